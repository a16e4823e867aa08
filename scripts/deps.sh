#!/bin/sh
# Install what building, running and testing statefs needs, from Debian's
# packages, and the packages named as arguments (`make bench` adds the
# benchmark's).  Idempotent: installs only what is missing, and refreshes
# the package lists once before the first install on a fresh machine.
set -eu

PKGS="build-essential pkg-config libfuse3-dev fuse3 uthash-dev libcmocka-dev
libsystemd-dev scdoc
bats bats-support bats-assert parallel inotify-tools attr util-linux mount procps
python3 man-db systemd rsync zip unzip vim redis-server redis-tools
libhiredis-dev libssl-dev openssl strace clang-14 libclang-rt-14-dev valgrind $*"

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "statefs: missing packages:$missing (run as root to install them)" >&2
	exit 1
fi
echo "statefs: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
