#!/usr/bin/env bats
# Installed, mounted and documented like any Linux filesystem (statefs(8),
# MOUNTING and SYSTEMD): make install and uninstall, the source argument,
# mount -t fuse.statefs and fstab lines through the real mount(8) and
# mount.fuse3, umount, the systemd units and their readiness
# notification, and the man page.
#
# What needs the installed tree on the system's own paths (mount(8) runs
# its helpers without PATH, so statefs must be in /usr/local/bin or
# /usr/bin) runs in a mount namespace of its own in which a staging tree
# made by `make install DESTDIR=...` is /usr/local: nothing outside the
# test is installed or changed, and the mounts made there are seen only
# there.

load helpers

ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)

setup() {
	# The staging tree of `make install DESTDIR=$STAGE` (PREFIX /usr/local).
	STAGE="$BATS_TEST_TMPDIR/stage"
	# A mountpoint for the namespace tests.
	NSMNT="$BATS_TEST_TMPDIR/mnt"
	mkdir -p "$NSMNT"
	TESTDIR=$BATS_TEST_DIRNAME
	export STAGE NSMNT TESTDIR
}

# stage_install [VAR=VALUE...]: make install into $STAGE.
stage_install() {
	make -C "$ROOT" --no-print-directory install DESTDIR="$STAGE" "$@" \
		>"$BATS_TEST_TMPDIR/install.log" 2>&1 ||
		fail "make install failed: $(tail -n 20 "$BATS_TEST_TMPDIR/install.log")"
}

# in_ns SCRIPT: `run` bash SCRIPT (with -eu) in a mount namespace of its
# own where $STAGE/usr/local is mounted on /usr/local.  Daemons the script
# leaves behind are waited for, up to 20 s, and reported by reap.py
# ("reaped statefs exit 0"; "killed statefs" if one would not end).  The
# script unmounts $NSMNT when it ends, also after a failure.  fd 3 (bats'
# own) is not passed on, or a daemon would hold bats up.
in_ns() {
	run unshare --mount --propagation private -- \
		python3 "$BATS_TEST_DIRNAME/reap.py" 20 bash -euc "
			trap 'umount \"\$NSMNT\" 2>/dev/null || umount -l \"\$NSMNT\" 2>/dev/null || :' EXIT
			mount --bind \"\$STAGE/usr/local\" /usr/local
			$1" 3>&-
}

# --- make install / uninstall ---------------------------------------------

# bats test_tags=store-free
@test "make alone builds build/statefs and its man page: the default goal is all" {
	# -p prints make's data base, .DEFAULT_GOAL with it; -q builds nothing.
	run bash -c "make -C '$ROOT' -pq --no-print-directory 2>/dev/null | grep '^\.DEFAULT_GOAL'"
	assert_output ".DEFAULT_GOAL := all"
	run make -C "$ROOT" -n --no-print-directory -p all
	assert_success
	assert_line --regexp '^all: build/statefs build/statefs\.8'
}

# bats test_tags=store-free
@test "make install DESTDIR= PREFIX=/usr installs the binary, the man page and the units; make uninstall removes them" {
	stage_install PREFIX=/usr
	run bash -c "cd '$STAGE' && find . ! -type d -printf '%p %m %y\n' | sort"
	assert_output "./usr/bin/statefs 755 f
./usr/lib/systemd/system/statefs.service 644 f
./usr/lib/systemd/system/statefs@.service 644 f
./usr/share/man/man8/statefs.8 644 f"
	cmp "$STAGE/usr/bin/statefs" "$ROOT/build/statefs"
	cmp "$STAGE/usr/share/man/man8/statefs.8" "$ROOT/build/statefs.8"
	# The units start the installed binary.
	run grep -h '^ExecStart=' "$STAGE"/usr/lib/systemd/system/statefs.service \
		"$STAGE"/usr/lib/systemd/system/statefs@.service
	assert_output 'ExecStart=/usr/bin/statefs -f $OPTIONS ${STORE} ${MOUNTPOINT}
ExecStart=/usr/bin/statefs -f $OPTIONS ${STORE} ${MOUNTPOINT}'
	run "$STAGE/usr/bin/statefs" --version
	assert_success
	assert_line --partial 'statefs '

	make -C "$ROOT" --no-print-directory uninstall DESTDIR="$STAGE" PREFIX=/usr
	run find "$STAGE" ! -type d
	assert_output ''
}

# bats test_tags=store-free
@test "make install honours BINDIR, MANDIR and UNITDIR" {
	stage_install PREFIX=/opt/sf BINDIR=/usr/sbin MANDIR=/usr/share/man \
		UNITDIR=/lib/systemd/system
	run bash -c "cd '$STAGE' && find . ! -type d | sort"
	assert_output "./lib/systemd/system/statefs.service
./lib/systemd/system/statefs@.service
./usr/sbin/statefs
./usr/share/man/man8/statefs.8"
	run grep -h '^ExecStart=' "$STAGE"/lib/systemd/system/statefs@.service
	assert_output 'ExecStart=/usr/sbin/statefs -f $OPTIONS ${STORE} ${MOUNTPOINT}'
	make -C "$ROOT" --no-print-directory uninstall DESTDIR="$STAGE" \
		PREFIX=/opt/sf BINDIR=/usr/sbin MANDIR=/usr/share/man \
		UNITDIR=/lib/systemd/system
	run find "$STAGE" ! -type d
	assert_output ''
}

# --- the source argument ----------------------------------------------------

@test "statefs SOURCE MNT mounts the embedded store and shows SOURCE as the mount's source" {
	statefs_mount -o max_tenants=1 state-1
	run awk -v m="$MNT" '$2 == m { print $1, $3 }' /proc/mounts
	assert_output "state-1 fuse.statefs"
	mkdir "$MNT/a"
	run mkdir "$MNT/b"
	assert_failure
	assert_output --partial "No space left on device"
	statefs_remount none
	run awk -v m="$MNT" '$2 == m { print $1, $3 }' /proc/mounts
	assert_output "none fuse.statefs"
	# Without a source, as before.
	statefs_remount
	run awk -v m="$MNT" '$2 == m { print $1, $3 }' /proc/mounts
	assert_output "statefs fuse.statefs"
}

# bats test_tags=store-free
@test "a source statefs does not have, or a third argument, is refused at start with one line and nothing is mounted" {
	local dir="$BATS_TEST_TMPDIR/m" src
	mkdir "$dir"
	for src in redis://127.0.0.1:6379 unix:/run/redis.sock a/b .hidden 'a b'; do
		run timeout 10 "$STATEFS_BIN" -f "$src" "$dir"
		assert_failure
		refute [ "$status" -eq 124 ]
		assert_equal "${#lines[@]}" 1
		assert_output --partial "$src"
		run _statefs_mounted "$dir"
		assert_failure
	done
	run timeout 10 "$STATEFS_BIN" -f none "$dir" extra
	assert_failure
	assert_equal "${#lines[@]}" 1
	assert_output --partial "too many arguments: 'extra'"
	run _statefs_mounted "$dir"
	assert_failure
}

# --- mount(8), mount.fuse3, fstab, umount ------------------------------------

# bats test_tags=store-free
@test "mount -t fuse.statefs none MNT -o ... mounts through mount.fuse3; umount ends the daemon with exit 0" {
	stage_install
	in_ns '
		mount -t fuse.statefs -o _netdev,nofail,allow_other,default_permissions,max_tenants=1 none "$NSMNT"
		awk -v m="$NSMNT" '\''$2 == m { print "mounted", $1, $3, $4 }'\'' /proc/mounts
		mkdir "$NSMNT/a"
		mkdir "$NSMNT/b" 2>&1 || :
		umount "$NSMNT"
		awk -v m="$NSMNT" '\''$2 == m { print "still mounted" }'\'' /proc/mounts
		echo done'
	assert_success
	assert_line --regexp "^mounted none fuse\.statefs .*default_permissions,allow_other"
	assert_line --partial "cannot create directory"
	assert_line --partial "No space left on device"
	assert_line "done"
	refute_line "still mounted"
	assert_line "reaped statefs exit 0"
	refute_line --partial "killed"
}

# bats test_tags=store-free
@test "an fstab line NAME MNT fuse.statefs OPTIONS 0 0 mounts with mount MNT" {
	stage_install
	in_ns '
		printf "# statefs\nstate  %s  fuse.statefs  _netdev,nofail,noauto,allow_other,max_tenants=2,tenant_quota=1  0  0\n" "$NSMNT" >"$NSMNT.fstab"
		mount --fstab "$NSMNT.fstab" "$NSMNT"
		findmnt -n -o SOURCE,FSTYPE --tab-file /proc/self/mountinfo "$NSMNT" | sed "s/^/mounted /"
		mkdir "$NSMNT/t" "$NSMNT/t/p"
		echo x >"$NSMNT/t/p/a"
		(echo y >"$NSMNT/t/p/b") 2>&1 || :
		umount "$NSMNT"
		echo done'
	assert_success
	assert_line --regexp "^mounted state +fuse\.statefs$"
	assert_line --partial "Disk quota exceeded"
	assert_line "done"
	assert_line "reaped statefs exit 0"
	refute_line --partial "killed"
}

# bats test_tags=store-free
@test "mount.fuse3 runs statefs, also in its type#source form" {
	stage_install
	in_ns '
		mount.fuse3 none "$NSMNT" -t fuse.statefs -o max_tenants=3
		awk -v m="$NSMNT" '\''$2 == m { print "mounted", $1, $3 }'\'' /proc/mounts
		grep "^max_tenants " "$NSMNT/.stats"
		umount "$NSMNT"
		mount.fuse3 "statefs#other" "$NSMNT"
		awk -v m="$NSMNT" '\''$2 == m { print "mounted", $1, $3 }'\'' /proc/mounts
		umount "$NSMNT"
		echo done'
	assert_success
	assert_line "mounted none fuse.statefs"
	assert_line "max_tenants 3"
	assert_line "mounted other fuse.statefs"
	assert_line "done"
	assert_equal "$(grep -c '^reaped statefs exit 0$' <<<"$output")" 2
	refute_line --partial "killed"
}

# bats test_tags=store-free
@test "mount -t fuse.statefs with a source statefs does not have fails and mounts nothing" {
	stage_install
	in_ns '
		if mount -t fuse.statefs redis://127.0.0.1:6379 "$NSMNT" 2>&1; then
			echo "mount succeeded"
		fi
		awk -v m="$NSMNT" '\''$2 == m { print "still mounted" }'\'' /proc/mounts
		echo done'
	assert_success
	assert_line --partial "redis://127.0.0.1:6379"
	refute_line "mount succeeded"
	refute_line "still mounted"
	assert_line "done"
	refute_line --partial "reaped"
}

# --- systemd ------------------------------------------------------------------

# bats test_tags=store-free
@test "systemd-analyze verify accepts the installed units" {
	stage_install
	in_ns '
		cd /usr/local/lib/systemd/system
		systemd-analyze verify ./statefs.service ./statefs@state.service 2>&1
		echo "verify: $?"'
	assert_success
	# Not a word of warning either.
	assert_output "verify: 0"
}

# bats test_tags=store-free
@test "the unit's ExecStart reports READY=1 once mounted and STOPPING=1 on SIGTERM, then drains, unmounts and exits 0" {
	stage_install
	in_ns '
		sock="@statefs-bats-$$-$RANDOM"
		notes="$NSMNT.notes"
		python3 "$TESTDIR/notify-listen.py" "$sock" "$notes" "$NSMNT" >"$NSMNT.ready" &
		listener=$!
		trap "kill $listener 2>/dev/null; umount \"\$NSMNT\" 2>/dev/null || :" EXIT
		for i in $(seq 200); do [ -s "$NSMNT.ready" ] && break; sleep 0.05; done
		# The command line systemd runs, with the unit'\''s variables set.
		cmd=$(sed -n "s/^ExecStart=//p" /usr/local/lib/systemd/system/statefs@.service)
		cmd=${cmd//\$OPTIONS/-o drain_window=60}
		cmd=${cmd//\$\{STORE\}/none}
		cmd=${cmd//\$\{MOUNTPOINT\}/$NSMNT}
		NOTIFY_SOCKET=$sock $cmd </dev/null &
		pid=$!
		for i in $(seq 200); do grep -q READY=1 "$notes" 2>/dev/null && break; sleep 0.05; done
		mkdir "$NSMNT/t"
		kill -TERM $pid
		rc=0; wait $pid || rc=$?
		echo "exit $rc"
		awk -v m="$NSMNT" '\''$2 == m { print "still mounted" }'\'' /proc/mounts
		for i in $(seq 200); do grep -q STATUS=unmounted "$notes" 2>/dev/null && break; sleep 0.05; done
		sed "s/^$pid /main /" "$notes"'
	assert_success
	assert_line "exit 0"
	refute_line "still mounted"
	# The first message, from the main process, with the mount live.
	assert_equal "$(grep -m 1 '^main ' <<<"$output")" "main mounted READY=1"
	assert_line "main mounted STOPPING=1"
	assert_line --regexp "^main mounted STATUS=draining"
	assert_line "main unmounted STATUS=unmounted"
	refute_line --regexp "^[0-9?]+ "
}

# --- the man page -------------------------------------------------------------

# bats test_tags=store-free
@test "man statefs finds the installed page" {
	stage_install
	in_ns '
		man -w statefs
		MANWIDTH=100 man statefs 2>&1 | grep -E "^[A-Z][A-Z ]+$"'
	assert_success
	assert_line "/usr/local/share/man/man8/statefs.8"
	local s
	for s in NAME SYNOPSIS DESCRIPTION "THE TREE" PARENTS CHILDREN PERMISSIONS \
		LEASES WATCHING "SPECIAL FILES" OPTIONS MOUNTING SYSTEMD ERRORS \
		TOOLS LIMITS FILES EXAMPLES "SEE ALSO"; do
		assert_line "$s"
	done
}

# bats test_tags=store-free
@test "the man page lists every statefs option --help lists, with the same meaning and default" {
	local page n=0 line spec rest
	page=$(MANWIDTH=200 man -l "$ROOT/build/statefs.8" 2>&1)
	run "$STATEFS_BIN" --help
	assert_success
	while IFS= read -r line; do
		[[ $line =~ ^\ \ \ \ -o\ ([^ ]+)\ +(.*\(default:\ [^\)]*\))$ ]] || continue
		spec=${BASH_REMATCH[1]}
		rest=${BASH_REMATCH[2]}
		grep -qxF -- "       -o $spec" <<<"$page" ||
			fail "the man page has no entry for -o $spec"
		grep -A1 -xF -- "       -o $spec" <<<"$page" | grep -qxF -- "           $rest" ||
			fail "the man page says otherwise of -o $spec: want '$rest'"
		n=$((n + 1))
	done <<<"$output"
	# Every option there was when this was written, at least.
	[ "$n" -ge 14 ] || fail "only $n options found in --help"
}

# bats test_tags=store-free
@test "the man page names every special file and every errno statefs answers with" {
	local page word
	page=$(MANWIDTH=200 man -l "$ROOT/build/statefs.8" 2>&1)
	for word in .stats .depart .events .snapshot .drain .clock \
		ENOENT EEXIST ESTALE EAGAIN ENOSPC EDQUOT EFBIG EINVAL ENAMETOOLONG \
		EROFS EPERM EXDEV EACCES ENOTDIR EISDIR ENODATA ENOTSUP ENOMEM ENFILE EMFILE; do
		grep -qE "^       ([^ ]+, )*${word//./\\.}( |,|$)" <<<"$page" ||
			fail "the man page has no entry for $word"
	done
}
