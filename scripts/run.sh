#!/bin/sh
# Mount statefs in the foreground (what `make run` does).
#
#   scripts/run.sh [MOUNTPOINT]        default: $STATEFS_MNT or /mnt/statefs
#   STATEFS_OPTS='-o max_tenants=10'   extra arguments for statefs
#
# A stale mount left by a statefs that crashed ("Transport endpoint is not
# connected") is lazily unmounted first; a live one is left alone and the
# script stops.  Ctrl-C (SIGINT) makes statefs drain, unmount and exit.
set -eu

cd "$(dirname "$0")/.."
MNT=${1:-${STATEFS_MNT:-/mnt/statefs}}
BIN=build/statefs

if [ ! -x "$BIN" ]; then
	echo "statefs: $BIN is missing; run make" >&2
	exit 1
fi

if awk -v m="$MNT" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; then
	if stat "$MNT" >/dev/null 2>&1; then
		echo "statefs: $MNT is already mounted (another statefs running?); unmount it first: fusermount3 -u $MNT" >&2
		exit 1
	fi
	echo "statefs: removing a stale mount at $MNT" >&2
	fusermount3 -uz "$MNT"
fi
mkdir -p "$MNT"

echo "statefs: mounted at $MNT — Ctrl-C unmounts"
# shellcheck disable=SC2086 # STATEFS_OPTS is a list of arguments
exec "$BIN" -f ${STATEFS_OPTS:-} "$MNT"
