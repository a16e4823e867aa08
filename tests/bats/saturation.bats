#!/usr/bin/env bats
# Saturation: many concurrent shells at every ceiling and quota at once
# (statefs(8), CHILDREN, SPECIAL FILES, OPTIONS and ERRORS).  Every
# refusal is the errno statefs(8) gives for what was tried, never EIO; every accepted operation is there afterwards;
# the .stats gauges equal a recount of the tree and of .snapshot.
#
# Limits: 3 tenants, 6 parents, 30 children, 1200 bytes, 8 entries per
# parent, 20 per tenant, 100 bytes per child: small enough that every one
# of them binds (with 6 parents of 8 entries, a children ceiling of 40 would
# never be reached before the quotas once links share states).  No tenant
# shares (tenant_max_*=0): the store-wide ceilings are to bind from
# whichever tenant gets there (the shares have their own tests).
#
# Phase 1: 24 shells race to make tenants and parents, in three steps so
# that the shape is always the same: 3 tenants A < B < C with 3, 2 and 1
# parents (tenant A can reach its quota of 20 before its parents are full).
# Phase 2: 24 shells each do 60 random operations (create, replace,
# append, oversize write, ln, ln across tenants, mv, mv over another child,
# rm, mkdir of more tenants and parents) on child names of their own
# (c<shell>_<k>) in every parent, while tenant C is drained part way
# through.  Each shell keeps a model of its own names (which path links
# which state, and each state's content) from its successes alone, so after
# the run the tree must be exactly the union of the models.  The op
# sequence of each shell is fixed (seeded $RANDOM); only the interleaving
# varies.

load helpers

LIMITS=max_tenants=3,max_parents=6,max_children=30,max_bytes=1200,parent_quota=8,tenant_quota=20,max_payload=100,drain_window=600
LIMITS+=,tenant_max_parents=0,tenant_max_children=0,tenant_max_bytes=0,tenant_max_tombstones=0
NSHELLS=24
NOPS=60

setup() {
	statefs_mount -o "$LIMITS"
	OUT="$BATS_TEST_TMPDIR/out"
	mkdir -p "$OUT"
	PIDS=()
}

teardown() {
	local p
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	exec 5>&- 6>&- 7>&- 8>&- 9>&-
	statefs_unmount
}

# --- The shells -----------------------------------------------------------

# record KIND PATH RC ERR: one line of this shell's log.  ERR is the last
# ": "-separated field of the tool's message, i.e. strerror, or the whole
# message when it has no such field; STAGE is open/write for dd.
record() {
	local kind=$1 path=$2 rc=$3 err=$4 stage=-
	err=${err//$'\n'/ | }
	case "$err" in
	*"failed to open"*) stage=open ;;
	*"error writing"* | *"closing output file"*) stage="write" ;;
	esac
	[ -n "$err" ] && printf '%s\n' "$err" >>"$ERRS"
	if [ "$rc" -eq 0 ]; then
		printf '%s\t%s\tOK\t-\t-\n' "$kind" "$path" >>"$LOG"
	else
		printf '%s\t%s\tFAIL\t%s\t%s\n' "$kind" "$path" "$stage" "${err##*: }" >>"$LOG"
	fi
}

# content N: N bytes of this shell's content alphabet.
content() {
	local n=$1 s=""
	while [ ${#s} -lt "$n" ]; do
		s+="s${SH}o${I}x$RANDOM"
	done
	printf '%s' "${s:0:n}"
}

tenant_of() { echo "${1%%/*}"; }

# phase1 SH STEP NAMES...: mkdir each name (t or t/p) in an order of this
# shell's own; log to $OUT/p1.STEP.SH.
phase1() {
	set +e # refusals are the point; bats runs tests with errexit
	SH=$1
	LOG="$OUT/p1.$2.$SH"
	ERRS="$OUT/errs.p1.$2.$SH"
	RANDOM=$((SH * 7919 + ${#2}))
	shift 2
	local n err kind
	while read -r _ n; do
		kind=mkdir_t
		[[ "$n" == */* ]] && kind=mkdir_p
		err=$(mkdir "$MNT/$n" 2>&1)
		record "$kind" "$n" $? "$err"
	done < <(for n in "$@"; do echo "$RANDOM $n"; done | sort -n)
}

# phase2 SH: NOPS operations on this shell's names; the model is dumped to
# $OUT/model.SH at the end ("path<TAB>SH:sid<TAB>content" per link).
phase2() {
	set +e
	SH=$1
	LOG="$OUT/log.$SH"
	ERRS="$OUT/errs.$SH"
	: >"$LOG"
	RANDOM=$((SH * 104729 + 3))
	local -A path_sid=() sid_content=() sid_links=()
	local nsid=0 op kind path dst src sid old c err rc np=${#SAT_PARENTS[@]}
	local keys same
	for ((I = 0; I < NOPS; I++)); do
		op=$((RANDOM % 100))
		keys=("${!path_sid[@]}")
		if [ "${#keys[@]}" -eq 0 ] && [ "$op" -ge 25 ] && [ "$op" -lt 95 ]; then
			op=0 # nothing of ours exists: create instead
		fi
		src=${keys[RANDOM % (${#keys[@]} > 0 ? ${#keys[@]} : 1)]:-}
		path="${SAT_PARENTS[RANDOM % np]}/c${SH}_$((RANDOM % 6))"
		if [ "$op" -lt 25 ]; then
			# Exclusive create with content (dd conv=excl: O_CREAT|O_EXCL).
			kind=create
			[ -n "${path_sid[$path]:-}" ] && kind=create_dup
			c=$(content $((1 + RANDOM % 60)))
			err=$(printf '%s' "$c" | dd conv=excl status=none of="$MNT/$path" 2>&1)
			rc=$?
			record "$kind" "$path" $rc "$err"
			if [ "$kind" = create ]; then
				if [ $rc -eq 0 ]; then
					nsid=$((nsid + 1))
					path_sid[$path]=$nsid
					sid_content[$nsid]=$c
					sid_links[$nsid]=1
				elif [[ "$err" != *"failed to open"* ]]; then
					# Admitted at open; the write was refused: empty.
					nsid=$((nsid + 1))
					path_sid[$path]=$nsid
					sid_content[$nsid]=
					sid_links[$nsid]=1
				fi
			fi
		elif [ "$op" -lt 45 ]; then
			# Replace (O_TRUNC); one in ten is over max_payload.
			kind="write"
			if [ $((RANDOM % 10)) -eq 0 ]; then
				kind=write_big
				c=$(content $((101 + RANDOM % 30)))
			else
				c=$(content $((1 + RANDOM % 90)))
			fi
			err=$(printf '%s' "$c" | dd status=none of="$MNT/$src" 2>&1)
			rc=$?
			record "$kind" "$src" $rc "$err"
			[ $rc -eq 0 ] && sid_content[${path_sid[$src]}]=$c
		elif [ "$op" -lt 60 ]; then
			# Append (O_APPEND).
			c=$(content $((1 + RANDOM % 40)))
			err=$(printf '%s' "$c" | dd status=none oflag=append conv=notrunc of="$MNT/$src" 2>&1)
			rc=$?
			record append "$src" $rc "$err"
			[ $rc -eq 0 ] && sid_content[${path_sid[$src]}]+=$c
		elif [ "$op" -lt 72 ]; then
			# ln: share the state with another parent (maybe of another tenant).
			[ "$path" = "$src" ] && continue
			sid=${path_sid[$src]}
			# An existing destination is EEXIST before anything else (the
			# kernel finds it while it makes the new name).
			kind="ln"
			if [ -n "${path_sid[$path]:-}" ]; then
				kind=ln_dup
			elif [ "$(tenant_of "$src")" != "$(tenant_of "$path")" ]; then
				kind=ln_xdev
			fi
			err=$(ln "$MNT/$src" "$MNT/$path" 2>&1)
			rc=$?
			record "$kind" "$path" $rc "$err"
			if [ $rc -eq 0 ]; then
				path_sid[$path]=$sid
				sid_links[$sid]=$((sid_links[$sid] + 1))
			fi
		elif [ "$op" -lt 85 ]; then
			# mv within the tenant, onto a free name or over another state.
			sid=${path_sid[$src]}
			same=()
			for dst in "${SAT_PARENTS[@]}"; do
				[ "${dst%%/*}" = "${src%%/*}" ] && same+=("$dst")
			done
			dst="${same[RANDOM % ${#same[@]}]}/${path##*/}"
			[ "$dst" = "$src" ] && continue
			old=${path_sid[$dst]:-}
			[ "$old" = "$sid" ] && continue # the same state: mv refuses
			kind="mv"
			[ -n "$old" ] && kind=mv_replace
			err=$(mv -f "$MNT/$src" "$MNT/$dst" 2>&1)
			rc=$?
			record "$kind" "$dst" $rc "$err"
			if [ $rc -eq 0 ]; then
				if [ -n "$old" ]; then
					sid_links[$old]=$((sid_links[$old] - 1))
				fi
				path_sid[$dst]=$sid
				unset "path_sid[$src]"
			fi
		elif [ "$op" -lt 95 ]; then
			sid=${path_sid[$src]}
			err=$(rm "$MNT/$src" 2>&1)
			rc=$?
			record rm "$src" $rc "$err"
			if [ $rc -eq 0 ]; then
				unset "path_sid[$src]"
				sid_links[$sid]=$((sid_links[$sid] - 1))
			fi
		elif [ "$op" -lt 97 ]; then
			dst="t$((RANDOM % 5))"
			err=$(mkdir "$MNT/$dst" 2>&1)
			record mkdir_t "$dst" $? "$err"
		else
			dst="$(tenant_of "$path")/p$((RANDOM % 6))"
			err=$(mkdir "$MNT/$dst" 2>&1)
			record mkdir_p "$dst" $? "$err"
		fi
	done
	for path in "${!path_sid[@]}"; do
		printf '%s\t%s:%s\t%s\n' "$path" "$SH" "${path_sid[$path]}" \
			"${sid_content[${path_sid[$path]}]}"
	done >"$OUT/model.$SH"
}

# --- Checks ---------------------------------------------------------------

# bad_refusals LOGS... (kind path OK|FAIL stage errtext): the lines whose
# refusal is not one the contract allows for that kind (and path: in the
# drained tenant $DRAINED, EROFS and ENOENT are allowed as well), or that
# succeeded where nothing may succeed.
bad_refusals() {
	awk -F'\t' -v drained="$DRAINED" '
	BEGIN {
		ENOSPC = "No space left on device"; EDQUOT = "Disk quota exceeded"
		EEXIST = "File exists"; ENOENT = "No such file or directory"
		EFBIG = "File too large"; EROFS = "Read-only file system"
		EXDEV = "Invalid cross-device link"
		ok["mkdir_t"] = EEXIST "|" ENOSPC
		ok["mkdir_p"] = EEXIST "|" ENOSPC "|" ENOENT
		ok["create"] = ENOSPC "|" EDQUOT
		ok["create_dup"] = EEXIST
		ok["write"] = ENOSPC
		ok["write_big"] = EFBIG
		ok["append"] = ENOSPC "|" EFBIG
		ok["ln"] = EDQUOT
		ok["ln_dup"] = EEXIST
		ok["ln_xdev"] = EXDEV
		ok["mv"] = EDQUOT
		ok["mv_replace"] = EDQUOT
		ok["rm"] = "-"
		never["write_big"] = never["ln_xdev"] = never["create_dup"] = never["ln_dup"] = 1
	}
	{
		kind = $1; path = $2; res = $3; err = $5
		if (!(kind in ok)) { print "unknown kind: " $0; next }
		if (res == "OK") {
			if (kind in never) print "succeeded: " $0
			next
		}
		n = split(ok[kind], a, "|")
		allowed = 0
		for (i = 1; i <= n; i++) if (a[i] == err) allowed = 1
		split(path, pp, "/")
		if (pp[1] == drained && (err == EROFS || err == ENOENT)) allowed = 1
		if (!allowed) print "refused wrongly: " $0
	}' "$@"
}

# tree_recount [DIR]: the gauges of DIR (default the whole store) counted
# from the tree, in .stats order and form (tombstones from .snapshot).
tree_recount() {
	local scope=${1:-}
	(
		cd "$MNT" || exit 1
		local tenants parents children links bytes tombs
		if [ -n "$scope" ]; then
			tenants=1
			parents=$(find "$scope" -mindepth 1 -maxdepth 1 -type d | wc -l)
			files=$(find "$scope" -mindepth 2 -maxdepth 2 -type f -printf '%i %s\n')
			tombs=$(awk -F'\t' '$1 == "tombstone"' "$scope/.snapshot" | wc -l)
		else
			tenants=$(find . -mindepth 1 -maxdepth 1 -type d | wc -l)
			parents=$(find . -mindepth 2 -maxdepth 2 -type d | wc -l)
			files=$(find . -mindepth 3 -maxdepth 3 -type f -printf '%i %s\n')
			tombs=$(awk -F'\t' '$1 == "tombstone"' .snapshot | wc -l)
		fi
		links=$(printf '%s' "$files" | grep -c .)
		children=$(printf '%s' "$files" | awk 'NF { print $1 }' | sort -u | grep -c .)
		bytes=$(printf '%s' "$files" | awk 'NF && !seen[$1]++ { s += $2 } END { print s + 0 }')
		printf '%s\n' "tenants $tenants" "parents $parents" "children $children" \
			"links $links" "tombstones $tombs" "bytes $bytes"
	)
}

# snapshot_recount [DIR]: the same gauges counted from DIR/.snapshot.
snapshot_recount() {
	awk -F'\t' -v scoped="${1:+1}" '
	NR == 1 { next }
	$1 == "tenant" { t++ }
	$1 == "parent" { p++ }
	$1 == "tombstone" { tb++ }
	$1 == "child" { l++; if (!seen[$10]++) { c++; b += $7 } }
	END {
		printf "tenants %d\nparents %d\nchildren %d\nlinks %d\ntombstones %d\nbytes %d\n",
			scoped ? 1 : t, p, c, l, tb, b
	}' "$MNT/${1:+$1/}.snapshot"
}

# linkage PATH-AND-GROUP-LINES: for each group (state), its paths joined,
# one line per group, sorted: the sharing structure without the ids.
linkage() {
	awk '{ g[$2] = g[$2] (g[$2] == "" ? "" : ",") $1 } END { for (k in g) print g[k] }' |
		while read -r l; do tr , '\n' <<<"$l" | sort | paste -sd,; done | sort
}

# The store-wide ceilings binding across tenants, exact: a store of the
# tenant layout (every store on a Redis Cluster) bounds each tenant as
# if it were the store alone instead (capacity.bats, shares.bats and
# concurrency.bats assert that there), so the cluster run leaves it out.
# bats test_tags=exact-ceilings
@test "24 shells at every ceiling and quota at once: exact refusals, nothing lost, gauges equal a recount" {
	local i step
	# Phase 1: the structure, raced in three steps, so that its shape is
	# the same every run: 3 of 5 tenant names win (A < B < C); then the 6
	# parents A/p0-p2, B/p0-p1, C/p0, each made by exactly one shell; then
	# more tenants and parents, all refused.
	race() {
		local step=$1 i
		shift
		for i in $(seq "$NSHELLS"); do
			(phase1 "$i" "$step" "$@") 3>&- &
			PIDS+=($!)
		done
		wait "${PIDS[@]}"
		PIDS=()
	}
	race a t0 t1 t2 t3 t4
	local tenants A B C
	tenants=$(ls "$MNT")
	read -r A B C _ <<<"$(echo $tenants)"
	[ -n "$C" ] && [ "$(echo $tenants | wc -w)" -eq 3 ] || fail "tenants: $tenants"
	race b "$A/p0" "$A/p1" "$A/p2" "$B/p0" "$B/p1" "$C/p0"
	race c t5 t6 "$A/p3" "$B/p2" "$C/p1" "$C/p2" t9/p0
	run bash -c 'cd "$1" && find . -mindepth 1 -maxdepth 2 -type d -printf "%P\n" | sort' _ "$MNT"
	local dirs=$output
	assert_output "$(printf '%s\n' "$A" "$A/p0" "$A/p1" "$A/p2" "$B" "$B/p0" "$B/p1" "$C" "$C/p0" | sort)"
	# Every directory has exactly one winner, and nothing else won.
	run bash -c 'cat "$1"/p1.* | awk -F"\t" "\$3 == \"OK\" { print \$2 }" | sort' _ "$OUT"
	assert_output "$dirs"
	DRAINED=
	run bad_refusals "$OUT"/p1.*
	assert_output ''
	run bash -c 'cat "$1"/p1.a.* | cut -f5 | sort -u' _ "$OUT"
	assert_output $'-\nFile exists\nNo space left on device'
	run bash -c 'cat "$1"/p1.b.* | cut -f5 | sort -u' _ "$OUT"
	assert_output $'-\nFile exists'
	run bash -c 'cat "$1"/p1.c.* | cut -f3,5 | sort -u' _ "$OUT"
	assert_output $'FAIL\tNo space left on device\nFAIL\tNo such file or directory'
	run stat_of parents
	assert_output 6

	# Phase 2: children at every limit; one tenant drained part way.
	mapfile -t SAT_PARENTS < <(grep / <<<"$dirs")
	DRAINED=$C
	for i in $(seq "$NSHELLS"); do
		(phase2 "$i") 3>&- &
		PIDS+=($!)
	done
	(
		total=$((NSHELLS * NOPS))
		for _ in $(seq 1500); do
			[ "$(cat "$OUT"/log.* 2>/dev/null | wc -l)" -ge $((total * 6 / 10)) ] && break
			sleep 0.02
		done
		if echo >"$MNT/$DRAINED/.drain"; then
			echo "drain 0" >"$OUT/drainer"
		else
			echo "drain failed" >"$OUT/drainer"
		fi
	) 3>&- &
	PIDS+=($!)
	wait "${PIDS[@]}"
	PIDS=()
	run cat "$OUT/drainer"
	assert_output 'drain 0'

	# No EIO, nor any other error text than the contract's, anywhere.
	run bash -c 'cat "$1"/errs.* | grep -c "Input/output error"' _ "$OUT"
	assert_output 0
	run bad_refusals "$OUT"/log.*
	assert_output ''
	# The limits were all hit: each refusal kind shows up.
	run bash -c 'cat "$1"/log.* | awk -F"\t" "\$3 == \"FAIL\" { print \$1 \": \" \$5 }" | sort -u' _ "$OUT"
	assert_line 'create: No space left on device'
	assert_line 'create: Disk quota exceeded'
	assert_line 'write_big: File too large'
	assert_line 'append: File too large'
	assert_line 'create_dup: File exists'
	assert_line 'ln_xdev: Invalid cross-device link'
	assert_line --regexp '^(create|ln|mv): Read-only file system$'
	assert_line 'mkdir_t: No space left on device'
	# Both store-wide ceilings: children (refused when dd opens, i.e. at
	# admission) and bytes (refused when it writes).
	run bash -c 'cat "$1"/log.* | awk -F"\t" "\$3 == \"FAIL\" { print \$1 \" \" \$4 \": \" \$5 }" | sort -u' _ "$OUT"
	assert_line 'create open: No space left on device'
	assert_line --regexp '^(create|write|append) write: No space left on device$'
	local refused
	# (Not refused_exists: the kernel answers EEXIST itself for a name it
	# finds, and it serializes creations in one directory, so these
	# refusals never reach the daemon.)
	for refused in refused_capacity refused_quota refused_payload refused_draining; do
		run stat_of "$refused"
		[ "$output" -gt 0 ] || fail "$refused is $output"
	done

	# The drained tenant: still draining (children left) or drained (empty).
	local dstate
	dstate=$(cat "$MNT/$DRAINED/.drain")
	[[ "$dstate" =~ ^(draining\ [0-9]+|drained)$ ]] || fail "$DRAINED/.drain: $dstate"
	local skip=__none__
	if [ "$dstate" = drained ]; then
		run ls -A "$MNT/$DRAINED"
		assert_output "$(printf '%s\n' .depart .drain .events .snapshot .stats)"
		skip=$DRAINED
	fi

	# Accepted work is all there: exactly the union of the models, with
	# the content each shell last wrote, sharing states as linked.
	cat "$OUT"/model.* | awk -F'\t' -v s="$skip/" 'index($1, s) != 1' | sort >"$OUT/expected"
	(cd "$MNT" && find . -mindepth 3 -maxdepth 3 -type f -printf '%P\t%i\n' | sort) >"$OUT/actual.ino"
	run bash -c 'cut -f1 "$1/expected"' _ "$OUT"
	local want=$output
	run cut -f1 "$OUT/actual.ino"
	assert_output "$want"
	run bash -c 'cut -f1,3 "$1/expected"' _ "$OUT"
	want=$output
	run bash -c 'cd "$1" && while IFS=$(printf "\t") read -r p _; do printf "%s\t%s\n" "$p" "$(cat "$p")"; done <"$2/actual.ino"' _ "$MNT" "$OUT"
	assert_output "$want"
	export -f linkage
	run bash -c 'cut -f1,2 "$1/expected" | tr "\t" " " | linkage' _ "$OUT"
	want=$output
	run bash -c 'tr "\t" " " <"$1/actual.ino" | linkage' _ "$OUT"
	assert_output "$want"
	# nlink of every path equals the number of paths of its state.
	run bash -c 'cd "$1" && while IFS=$(printf "\t") read -r p i; do
		n=$(awk -F"\t" -v i="$i" "\$2 == i" "$2/actual.ino" | wc -l)
		[ "$(stat -c %h "$p")" = "$n" ] || echo "$p: nlink $(stat -c %h "$p"), $n paths"
	done <"$2/actual.ino"' _ "$MNT" "$OUT"
	assert_output ''

	# Gauges equal a recount: the store, and each tenant.
	run gauges
	local g=$output
	run tree_recount
	assert_output "$g"
	run snapshot_recount
	assert_output "$g"
	local t
	for t in $(grep -v / <<<"$dirs"); do
		run gauges "$MNT/$t"
		g=$output
		run tree_recount "$t"
		assert_output "$g"
		run snapshot_recount "$t"
		assert_output "$g"
	done
	# And within the limits: the ceilings, and the quotas of every parent
	# (8 entries) and tenant (20).
	[ "$(stat_of children)" -le 30 ] && [ "$(stat_of bytes)" -le 1200 ] &&
		[ "$(stat_of parents)" -le 6 ] && [ "$(stat_of tenants)" -le 3 ] ||
		fail "over a ceiling: $(gauges)"
	run bash -c 'cut -d/ -f1,2 "$1/actual.ino" | sort | uniq -c | awk "\$1 > 8"' _ "$OUT"
	assert_output ''
	run bash -c 'cut -d/ -f1 "$1/actual.ino" | sort | uniq -c | awk "\$1 > 20"' _ "$OUT"
	assert_output ''
	# The run left real work to check.
	[ "$(wc -l <"$OUT/expected")" -ge 10 ] || fail "only $(wc -l <"$OUT/expected") children left"
}
