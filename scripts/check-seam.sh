#!/usr/bin/env bash
# check-seam.sh - keep the seam between fs/ (and layout/) and the store.
#
# The store's interface is store/store.h (and store/cred.h and
# store/lock.h and store/hooks.h, which it includes; redis/redis.h, the shared store's
# options as a value):
# fs/ and layout/ include nothing else of store/, but store/store_test.h
# inside an #ifdef STORE_FAULTS block (the allocation-failure hook of
# test builds).  store.h keeps every struct of the store's own opaque:
# the only ones it defines are the plain values callers fill or are
# given (ALLOWED below); so the compiler refuses any use of a field of
# the others, and neither fs/ nor layout/ defines a struct store_* of its
# own.  Each source file of store/, redis/, fs/ and layout/ written in
# C, each Lua file under redis/ (the Functions library's parts), and
# each C source, header and Lua file under tests/ (the tests are
# sources too), stays under MAX_LINES lines.
#
# Prints what it finds and "seam: ok" or "seam: N problem(s)"; exits
# non-zero on any problem.  Run from anywhere; `make test` runs it.
set -u
cd "$(dirname "$0")/.." || exit 1

PUBLIC="store/store.h store/cred.h store/lock.h store/hooks.h redis/redis.h"
ALLOWED="store_limits store_clock store_owner store_cred store_attr
store_stats store_lease store_dirent store_dirlist store_event
store_snap_row store_snapshot store_remote store_remote_addr
store_lock_req"
MAX_LINES=1000
problems=0

problem() {
	echo "seam: $*"
	problems=$((problems + 1))
}

# 1. What fs/ and layout/ include of store/.
bad=$(for f in fs/*.[ch] layout/*.[ch]; do
	awk -v f="$f" -v public=" $PUBLIC " '
		/^[ \t]*#[ \t]*if/ {
			depth++
			faults[depth] = $0 ~ /STORE_FAULTS/
		}
		/^[ \t]*#[ \t]*endif/ { depth-- }
		/^[ \t]*#[ \t]*include[ \t]*"store\// {
			h = $0
			sub(/^[^"]*"/, "", h)
			sub(/".*/, "", h)
			if (index(public, " " h " "))
				next
			in_faults = 0
			for (i = 1; i <= depth; i++)
				if (faults[i])
					in_faults = 1
			if (h == "store/store_test.h" && in_faults)
				next
			printf "%s:%d: includes %s, not the store'"'"'s interface\n", f, FNR, h
		}' "$f"
done)
if [ -n "$bad" ]; then
	while read -r line; do
		problem "$line"
	done <<<"$bad"
fi

# includes_outside DIR "HEADERS" FILE...: each include in FILE... of a
# header of DIR/ that is not one of HEADERS, as "FILE:LINE: includes H";
# store/store_test.h counts as one of them inside an #if of STORE_FAULTS.
includes_outside() {
	local dir=$1 ok=$2
	shift 2
	awk -v dir="$dir" -v ok=" $ok " '
		FNR == 1 { depth = 0 }
		/^[ \t]*#[ \t]*if/ {
			depth++
			faults[depth] = $0 ~ /STORE_FAULTS/
		}
		/^[ \t]*#[ \t]*endif/ { depth-- }
		/^[ \t]*#[ \t]*include[ \t]*"/ {
			h = $0
			sub(/^[^"]*"/, "", h)
			sub(/".*/, "", h)
			if (index(h, dir "/") != 1 || index(ok, " " h " "))
				next
			in_faults = 0
			for (i = 1; i <= depth; i++)
				if (faults[i])
					in_faults = 1
			if (h == "store/store_test.h" && in_faults)
				next
			printf "%s:%d: includes %s\n", FILENAME, FNR, h
		}' "$@"
}

# 1b. The core names no engine: nothing in store/ includes a header of
# redis/ or of hiredis.  The embedded store is every engine's mirror; an
# engine reaches it through store/store.h and store/engine.h, never the
# other way.
bad=$(grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]\(redis/\|hiredis\)' \
	store/*.[ch] | cut -d: -f1,2)
if [ -n "$bad" ]; then
	while read -r line; do
		h=$(sed -n "${line#*:}p" "${line%%:*}" | sed 's/^[^"<]*["<]//; s/[">].*//')
		problem "$line: includes $h: the core includes nothing of an engine"
	done <<<"$bad"
fi

# 1c. What redis/ includes of store/: the interface (store/store.h and
# the store/cred.h it includes), the engine's header (store/engine.h:
# struct store_ops and the core functions an engine may call), and
# store/store_test.h inside #ifdef STORE_FAULTS, as for fs/.  The core's
# private header, store/internal.h, is the core's alone.
ENGINE_SEES="store/store.h store/cred.h store/lock.h store/hooks.h store/engine.h"
bad=$(includes_outside store "$ENGINE_SEES" redis/*.[ch])
if [ -n "$bad" ]; then
	while read -r line; do
		problem "$line, not the store's interface or engine header"
	done <<<"$bad"
fi

# 1d. lib/ sits below every layer: it includes nothing of store/, redis/,
# layout/ or fs/, and each of its files stays under MAX_LINES.
bad=$(grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"\(store\|redis\|layout\|fs\)/' \
	lib/*.[ch] | cut -d: -f1,2)
if [ -n "$bad" ]; then
	while read -r line; do
		h=$(sed -n "${line#*:}p" "${line%%:*}" | sed 's/^[^"]*"//; s/".*//')
		problem "$line: includes $h: lib/ includes nothing of the layers above it"
	done <<<"$bad"
fi
for f in lib/*.[ch]; do
	n=$(wc -l <"$f")
	[ "$n" -le "$MAX_LINES" ] ||
		problem "$f has $n lines (more than $MAX_LINES: split it by mechanism)"
done

# 2. The structs the interface defines: only the allowed values.
for s in $(sed -n 's/^struct \(store_[a-z_]*\) {.*/\1/p' $PUBLIC); do
	case " $(echo $ALLOWED) " in
	*" $s "*) ;;
	*) problem "struct $s is defined in the store's interface: a handle" \
		"must stay opaque (or, a plain value callers fill, be listed" \
		"in scripts/check-seam.sh)" ;;
	esac
done
for s in store store_node store_stage store_event_reader; do
	grep -q "^struct $s;" store/store.h ||
		problem "store.h no longer declares the opaque struct $s"
done

# 3. No struct of the store's defined outside store/.
bad=$(grep -Hn '^[[:space:]]*struct store[a-z_]* {' fs/*.[ch] layout/*.[ch])
if [ -n "$bad" ]; then
	while read -r line; do
		problem "$line: a struct of the store's defined outside store/"
	done <<<"$bad"
fi

# 4. One mechanism per file: none grows past MAX_LINES, the tests'
# files included (a test file split by what its parts test, their
# helpers in a header beside them).
for f in store/*.[ch] redis/*.[ch] fs/*.[ch] layout/*.[ch] \
	$(find redis -name '*.lua' | sort) \
	$(find tests -name '*.[ch]' -o -name '*.lua' | sort); do
	n=$(wc -l <"$f")
	[ "$n" -le "$MAX_LINES" ] ||
		problem "$f has $n lines (more than $MAX_LINES: split it by mechanism)"
done

if [ "$problems" -eq 0 ]; then
	echo "seam: ok"
	exit 0
fi
echo "seam: $problems problem(s)"
exit 1
