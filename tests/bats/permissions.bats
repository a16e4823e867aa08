#!/usr/bin/env bats
# statefs(8), PERMISSIONS, SPECIAL FILES and OPTIONS: with -o
# allow_other,default_permissions the kernel enforces ownership and modes as on any Linux filesystem, so one
# tenant's owner can keep other users out; special files follow their
# directory's owner; every refusal is statefs(8)'s errno (EACCES for
# permissions, EPERM where Linux says so for chmod/chown by a non-owner and
# the sticky bit), never EIO.
#
# Users: uid 1001, 1002, 1003 (not in /etc/passwd; setpriv needs no
# entry), group 2000 shared by 1001 and 1002.  The root directory of the
# mount is made 1777 (like /tmp) so that every uid can make its own tenant.

load helpers

setup() {
	statefs_mount -o allow_other,default_permissions
	chmod 1777 "$MNT"
	ERRLOG="$BATS_TEST_TMPDIR/errors"
	: >"$ERRLOG"
}

teardown() {
	bg_stop
	rm -f "$(dirname "$MNT")/go"
	exec 5>&- 6>&- 7>&- 8>&- 9>&-
	statefs_unmount
}

U1=1001:1001:2000
U2=1002:1002:2000
U3=1003:1003

# as_user UID:GID[:GROUP,...] CMD...: run CMD as that user; without groups,
# with no supplementary groups.
as_user() {
	local uid gid groups
	IFS=: read -r uid gid groups <<<"$1"
	shift
	if [ -n "$groups" ]; then
		setpriv --reuid="$uid" --regid="$gid" --groups="$groups" -- "$@"
	else
		setpriv --reuid="$uid" --regid="$gid" --clear-groups -- "$@"
	fi
}

# sh_as USER SCRIPT [ARGS]: bash -c SCRIPT as USER ($1.. = ARGS).
sh_as() {
	local who=$1 script=$2
	shift 2
	as_user "$who" bash -c "$script" _ "$@"
}

# refused USER TEXT CMD...: CMD as USER fails with the strerror TEXT.
# Every refusal's output is kept in $ERRLOG for no_eio.
refused() {
	local who=$1 text=$2
	shift 2
	run as_user "$who" "$@"
	printf '%s\n' "$output" >>"$ERRLOG"
	assert_failure
	assert_output --partial "$text"
}

# no_eio: nothing this test saw failed with EIO, and every error line it
# kept names one of the errnos a permission refusal may have.
no_eio() {
	run grep -c 'Input/output error' "$ERRLOG"
	assert_output 0
	run grep -vE '^$|(Permission denied|Operation not permitted|Read-only file system)$' "$ERRLOG"
	assert_output ''
}

# probe USER OP...: run each OP as USER and print "OP RESULT" per line,
# RESULT being OK or the errno name (EACCES, EPERM, ...).  Paths in an OP
# are relative to $MNT.  OPs: ls P, stat P, read P, open P (O_RDONLY|
# O_NONBLOCK, then close), write P (O_WRONLY|O_TRUNC, write "x\n"), create P
# (O_CREAT|O_EXCL), mkdir P, rm P, rmdir P, mv P Q, ln P Q, getx P NAME,
# setx P NAME VALUE, touch P (utimes now), chmod P OCTAL, chown P UID.
PROBE_PY='
import os, sys, errno
mnt = sys.argv[1]
for spec in sys.argv[2:]:
    w = spec.split()
    op = w[0]
    p = os.path.join(mnt, w[1])
    try:
        if op == "ls":
            os.listdir(p)
        elif op == "stat":
            os.stat(p)
        elif op == "read":
            fd = os.open(p, os.O_RDONLY)
            try:
                os.read(fd, 65536)
            finally:
                os.close(fd)
        elif op == "open":
            os.close(os.open(p, os.O_RDONLY | os.O_NONBLOCK))
        elif op == "write":
            fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
            try:
                os.write(fd, b"x\n")
            finally:
                os.close(fd)
        elif op == "create":
            os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        elif op == "mkdir":
            os.mkdir(p)
        elif op == "rm":
            os.unlink(p)
        elif op == "rmdir":
            os.rmdir(p)
        elif op == "mv":
            os.rename(p, os.path.join(mnt, w[2]))
        elif op == "ln":
            os.link(p, os.path.join(mnt, w[2]))
        elif op == "getx":
            os.getxattr(p, w[2])
        elif op == "setx":
            os.setxattr(p, w[2], w[3].encode())
        elif op == "touch":
            os.utime(p)
        elif op == "chmod":
            os.chmod(p, int(w[2], 8))
        elif op == "chown":
            os.chown(p, int(w[2]), -1)
        else:
            raise SystemExit("probe: unknown op " + op)
        r = "OK"
    except OSError as e:
        r = errno.errorcode.get(e.errno, str(e.errno))
    print(spec, r)
'
# The system's python: a per-user one (pyenv under /root) is out of other
# users' reach.
PROBE_PYTHON=/usr/bin/python3
probe() {
	local who=$1
	shift
	if [ "$who" = root ]; then
		"$PROBE_PYTHON" -c "$PROBE_PY" "$MNT" "$@"
	else
		as_user "$who" "$PROBE_PYTHON" -c "$PROBE_PY" "$MNT" "$@"
	fi
}

# expect OP... RESULT: the lines probe prints when every OP gets RESULT.
expect() {
	local r=${*: -1} op
	for op in "${@:1:$#-1}"; do
		echo "$op $r"
	done
}

# What another user may try against a tenant t with parent p and child c.
INTRUDER_OPS=(
	"ls t" "ls t/p" "stat t/p" "stat t/p/c" "read t/p/c" "write t/p/c"
	"create t/p/n" "mkdir t/q" "rm t/p/c" "rmdir t/p" "mv t/p/c t/p/d"
	"ln t/p/c t/p/e" "getx t/p user.statefs.generation"
	"getx t/p/c user.statefs.version" "setx t/p/c user.statefs.ttl 5"
	"setx t/p user.statefs.child_ttl 5" "touch t/p/c" "touch t/p"
	"read t/.stats" "read t/.snapshot" "open t/.events" "read t/.drain"
	"write t/.drain" "write t/.depart" "stat t/.depart"
)

# events_as USER OUT: open $MNT/.events as USER (root: 0:0), then copy its
# lines to OUT in the background until the line "join open end" (gives up
# after 5 s); returns once the file is open.  events_wait waits for them.
EVENTS_PY='
import os, sys, signal
signal.alarm(5)
fd = os.open(sys.argv[1] + "/.events", os.O_RDONLY)
print("open", file=sys.stderr, flush=True)
buf = b""
while b"\tjoin\topen\tend\t" not in buf:
    buf += os.read(fd, 65536)
sys.stdout.write(buf.decode())
'
events_as() {
	local who=$1 out=$2
	as_user "$who" "$PROBE_PYTHON" -c "$EVENTS_PY" "$MNT" >"$out" 2>"$out.open" 3>&- &
	BG_PIDS+=($!)
	wait_line "$out.open" open 5 # the reader says it opened .events
}

# everything: every node under $MNT with its owner, mode and content.
everything() {
	(cd "$MNT" && find . -mindepth 1 -not -name '.*' -printf '%p %u:%g %m\n' | sort)
	find "$MNT" -type f -not -name '.*' -exec cat {} +
	gauges
}

@test "a 0700 tenant of one user is closed to another: list, read, join, write, remove all EACCES" {
	as_user "$U1" mkdir -m 0700 "$MNT/t"
	as_user "$U1" mkdir -m 0777 "$MNT/t/p"
	sh_as "$U1" 'umask 0 && echo secret >"$1"' "$MNT/t/p/c"
	as_user "$U2" mkdir -p "$MNT/u/p"
	as_user "$U2" touch "$MNT/u/p/x"
	run stat -c '%n %u:%g %a' "$MNT/t" "$MNT/t/p" "$MNT/t/p/c"
	assert_output "$MNT/t 1001:1001 700
$MNT/t/p 1001:1001 777
$MNT/t/p/c 1001:1001 666"
	local before
	before=$(everything)
	# Wide modes inside do not matter: the tenant's 0700 stops the walk.
	run probe "$U2" "${INTRUDER_OPS[@]}" "ln u/p/x t/p/x" "mv u/p/x t/p/x" \
		"ln t/p/c u/p/c" "mv t/p/c u/p/c"
	assert_output "$(expect "${INTRUDER_OPS[@]}" "ln u/p/x t/p/x" \
		"mv u/p/x t/p/x" "ln t/p/c u/p/c" "mv t/p/c u/p/c" EACCES)"
	# The same through the shell tools people use.
	refused "$U2" 'Permission denied' ls "$MNT/t"
	refused "$U2" 'Permission denied' ls "$MNT/t/p"
	refused "$U2" 'Permission denied' cat "$MNT/t/p/c"
	refused "$U2" 'Permission denied' mkdir "$MNT/t/q"
	refused "$U2" 'Permission denied' bash -c 'echo mine >"$1"' _ "$MNT/t/p/c"
	refused "$U2" 'Permission denied' bash -c 'echo mine >>"$1"' _ "$MNT/t/p/c"
	refused "$U2" 'Permission denied' bash -c 'echo new >"$1"' _ "$MNT/t/p/n"
	refused "$U2" 'Permission denied' touch "$MNT/t/p/n"
	refused "$U2" 'Permission denied' rm -f "$MNT/t/p/c"
	refused "$U2" 'Permission denied' rmdir "$MNT/t/p"
	refused "$U2" 'Permission denied' ln "$MNT/u/p/x" "$MNT/t/p/x"
	refused "$U2" 'Permission denied' mv "$MNT/t/p/c" "$MNT/t/p/d"
	refused "$U2" 'Permission denied' getfattr -n user.statefs.generation "$MNT/t/p"
	refused "$U2" 'Permission denied' setfattr -n user.statefs.ttl -v 5 "$MNT/t/p"
	refused "$U2" 'Permission denied' cat "$MNT/t/.stats"
	refused "$U2" 'Permission denied' cat "$MNT/t/.snapshot"
	refused "$U2" 'Permission denied' bash -c 'echo p >"$1"' _ "$MNT/t/.depart"
	refused "$U2" 'Permission denied' bash -c 'echo >"$1"' _ "$MNT/t/.drain"
	# Nothing changed.
	run everything
	assert_output "$before"
	run cat "$MNT/t/.drain"
	assert_output ready
	no_eio
}

@test "the owner of a 0700 tenant and root can do all of it" {
	as_user "$U1" mkdir -m 0700 "$MNT/t"
	as_user "$U1" mkdir "$MNT/t/p"
	sh_as "$U1" 'echo secret >"$1"' "$MNT/t/p/c"
	local ops=("ls t" "ls t/p" "stat t/p" "read t/p/c" "write t/p/c"
		"create t/p/n" "mkdir t/q" "ln t/p/c t/q/c" "mv t/p/n t/q/n"
		"getx t/p user.statefs.generation" "setx t/p/c user.statefs.ttl 3600"
		"setx t/p user.statefs.child_ttl 3600" "touch t/p/c" "touch t/p"
		"read t/.stats" "read t/.snapshot" "open t/.events" "read t/.drain"
		"rm t/q/n" "rmdir t/q")
	run probe "$U1" "${ops[@]}"
	assert_output "$(expect "${ops[@]}" OK)"
	run probe root "${ops[@]}"
	assert_output "$(expect "${ops[@]}" OK)"
	run ls "$MNT/t" "$MNT/t/p"
	assert_output "$MNT/t:
p

$MNT/t/p:
c"
	run cat "$MNT/t/p/c"
	assert_output x
}

@test "group and other modes work as on any Linux filesystem" {
	as_user "$U1" mkdir -m 0750 "$MNT/t"
	as_user "$U1" chgrp 2000 "$MNT/t"
	as_user "$U1" mkdir -m 0755 "$MNT/t/p"
	sh_as "$U1" 'umask 022 && echo v >"$1"' "$MNT/t/p/c"
	run stat -c '%u:%g %a' "$MNT/t"
	assert_output '1001:2000 750'
	# 0750 with a shared group: a member lists and reads, cannot create.
	run probe "$U2" "ls t" "stat t/p" "read t/p/c" "mkdir t/q" \
		"create t/p/n" "write t/p/c" "rmdir t/p"
	assert_output "ls t OK
stat t/p OK
read t/p/c OK
mkdir t/q EACCES
create t/p/n EACCES
write t/p/c EACCES
rmdir t/p EACCES"
	run probe "$U3" "ls t" "stat t/p" "mkdir t/q"
	assert_output "$(expect "ls t" "stat t/p" "mkdir t/q" EACCES)"
	refused "$U2" 'Permission denied' mkdir "$MNT/t/q"
	# 0770: the member joins a parent of its own; others still cannot.
	as_user "$U1" chmod 0770 "$MNT/t"
	run probe "$U2" "mkdir t/q" "create t/q/c" "ls t"
	assert_output "$(expect "mkdir t/q" "create t/q/c" "ls t" OK)"
	run probe "$U3" "ls t" "mkdir t/r"
	assert_output "$(expect "ls t" "mkdir t/r" EACCES)"
	# The group bits apply to a member even when "other" grants more.
	as_user "$U1" chmod 0705 "$MNT/t"
	run probe "$U2" "ls t" "stat t/p"
	assert_output "$(expect "ls t" "stat t/p" EACCES)"
	run probe "$U3" "ls t" "stat t/p" "read t/p/c" "mkdir t/r"
	assert_output "ls t OK
stat t/p OK
read t/p/c OK
mkdir t/r EACCES"
	# 0711: others may pass through to a name they know, not list.
	as_user "$U1" chmod 0711 "$MNT/t"
	run probe "$U3" "ls t" "stat t/p" "read t/p/c" "ls t/p"
	assert_output "ls t EACCES
stat t/p OK
read t/p/c OK
ls t/p OK"
	# 0703: others may join, but not see who else is there.
	as_user "$U1" chmod 0703 "$MNT/t"
	run probe "$U3" "mkdir t/r" "ls t" "create t/r/c" "ls t/r"
	assert_output "mkdir t/r OK
ls t EACCES
create t/r/c OK
ls t/r OK"
	# A parent's own mode guards its children the same way.
	as_user "$U1" chmod 0755 "$MNT/t"
	as_user "$U1" chmod 0700 "$MNT/t/p"
	run probe "$U2" "ls t" "ls t/p" "read t/p/c" "create t/p/m"
	assert_output "ls t OK
ls t/p EACCES
read t/p/c EACCES
create t/p/m EACCES"
	run ls "$MNT/t"
	assert_output $'p\nq\nr'
	no_eio
}

@test "new nodes belong to the caller's uid and gid" {
	mkdir -m 0777 "$MNT/t"
	mkdir -m 0777 "$MNT/t/shared"
	as_user "$U2" mkdir "$MNT/t/p2"
	as_user "$U2" touch "$MNT/t/p2/c"
	sh_as "$U2" 'echo x >"$1"' "$MNT/t/shared/c2"
	as_user 1003:3000 mkdir "$MNT/t/p3"
	sh_as 1003:3000 'echo y >"$1"' "$MNT/t/p3/c"
	as_user 1003:3000 ln "$MNT/t/p3/c" "$MNT/t/shared/c3"
	run stat -c '%n %u:%g' "$MNT/t" "$MNT/t/p2" "$MNT/t/p2/c" \
		"$MNT/t/shared/c2" "$MNT/t/p3" "$MNT/t/p3/c" "$MNT/t/shared/c3"
	assert_output "$MNT/t 0:0
$MNT/t/p2 1002:1002
$MNT/t/p2/c 1002:1002
$MNT/t/shared/c2 1002:1002
$MNT/t/p3 1003:3000
$MNT/t/p3/c 1003:3000
$MNT/t/shared/c3 1003:3000"
	# A hand-over keeps the child's owner; a write by another user with
	# permission to write does not change it either.
	refused "$U2" 'Permission denied' mv "$MNT/t/shared/c2" "$MNT/t/p3/c2"
	as_user 1003:3000 chmod 0777 "$MNT/t/p3"
	as_user "$U2" mv "$MNT/t/shared/c2" "$MNT/t/p3/c2"
	as_user "$U2" chmod 0666 "$MNT/t/p3/c2"
	sh_as 1003:3000 'echo z >"$1"' "$MNT/t/p3/c2"
	run stat -c '%u:%g %a' "$MNT/t/p3/c2"
	assert_output '1002:1002 666'
	run cat "$MNT/t/p3/c2"
	assert_output z
	# The tenant's special files show the tenant's owner.
	run stat -c '%u:%g' "$MNT/t/.snapshot" "$MNT/t/.stats"
	assert_output $'0:0\n0:0'
	no_eio
}

@test "a setgid directory gives new nodes its group, and new directories its setgid bit" {
	# A setgid root of group 2000: U3 (gid 1003, not in 2000) makes a
	# tenant, a parent and a child; all take group 2000, the directories
	# the bit as well.
	chgrp 2000 "$MNT"
	chmod 3777 "$MNT"
	sh_as "$U3" 'umask 0 && mkdir "$1/t" && mkdir "$1/t/p" && echo x >"$1/t/p/c"' "$MNT"
	run stat -c '%n %u:%g %a' "$MNT/t" "$MNT/t/p" "$MNT/t/p/c"
	assert_output "$MNT/t 1003:2000 2777
$MNT/t/p 1003:2000 2777
$MNT/t/p/c 1003:2000 666"
	# chmod g+s by a tenant's owner in the group: the members' new
	# parents and children take the group.
	chmod g-s "$MNT"
	run stat -c %a "$MNT"
	assert_output 1777
	as_user "$U1" mkdir -m 0775 "$MNT/s"
	as_user "$U1" chgrp 2000 "$MNT/s"
	as_user "$U1" chmod g+s "$MNT/s"
	sh_as "$U2" 'umask 022 && mkdir "$1/s/p" && touch "$1/s/p/c"' "$MNT"
	run stat -c '%n %u:%g %a' "$MNT/s" "$MNT/s/p" "$MNT/s/p/c"
	assert_output "$MNT/s 1001:2000 2775
$MNT/s/p 1002:2000 2755
$MNT/s/p/c 1002:2000 644"
	# Without the bit, the caller's group again; what exists keeps its.
	as_user "$U1" chmod g-s "$MNT/s"
	as_user "$U2" mkdir "$MNT/s/q"
	run stat -c '%n %u:%g' "$MNT/s/q" "$MNT/s/p"
	assert_output "$MNT/s/q 1002:1002
$MNT/s/p 1002:2000"
	# The new tenants of a root without the bit: the caller's group.
	as_user "$U3" mkdir "$MNT/u"
	run stat -c '%u:%g' "$MNT/u"
	assert_output 1003:1003
	no_eio
}

@test "chmod and chown are the owner's (or root's): others get EPERM, as on Linux" {
	as_user "$U1" mkdir -m 0755 "$MNT/t"
	as_user "$U1" mkdir -m 0755 "$MNT/t/p"
	as_user "$U1" touch "$MNT/t/p/c"
	run probe "$U2" "chmod t 777" "chmod t/p 777" "chmod t/p/c 666" \
		"chown t 1002" "chown t/p/c 1002"
	assert_output "$(expect "chmod t 777" "chmod t/p 777" "chmod t/p/c 666" \
		"chown t 1002" "chown t/p/c 1002" EPERM)"
	refused "$U2" 'Operation not permitted' chmod 0777 "$MNT/t"
	refused "$U2" 'Operation not permitted' chown 1002 "$MNT/t/p/c"
	# An owner cannot give a node away either; root can.
	refused "$U1" 'Operation not permitted' chown 1002 "$MNT/t"
	run probe "$U1" "chmod t 700" "chmod t/p 700"
	assert_output "$(expect "chmod t 700" "chmod t/p 700" OK)"
	run probe "$U2" "ls t"
	assert_output 'ls t EACCES'
	chown 1002 "$MNT/t"
	run probe "$U2" "ls t" "chmod t 755"
	assert_output "$(expect "ls t" "chmod t 755" OK)"
	run stat -c '%u:%g %a' "$MNT/t" "$MNT/t/p" "$MNT/t/p/c"
	assert_output $'1002:1001 755\n1001:1001 700\n1001:1001 644'
	no_eio
}

@test "a sticky directory keeps users from removing each other's tenants and parents" {
	# The root is 1777 (setup): everyone makes a tenant, removes only theirs.
	as_user "$U1" mkdir -m 0755 "$MNT/t1"
	as_user "$U1" mkdir "$MNT/t1/p"
	as_user "$U1" touch "$MNT/t1/p/c"
	as_user "$U2" mkdir -m 0755 "$MNT/t2"
	refused "$U2" 'Operation not permitted' rmdir "$MNT/t1"
	run probe "$U2" "rmdir t1" "mv t1 t3"
	assert_output $'rmdir t1 EPERM\nmv t1 t3 EPERM'
	run ls "$MNT" "$MNT/t1/p"
	assert_output "$MNT:
t1
t2

$MNT/t1/p:
c"
	as_user "$U2" rmdir "$MNT/t2"
	# A shared 1770 tenant: members join, and leave only their own parents.
	as_user "$U1" mkdir -m 1770 "$MNT/s"
	as_user "$U1" chgrp 2000 "$MNT/s"
	as_user "$U1" mkdir "$MNT/s/p1"
	as_user "$U1" touch "$MNT/s/p1/c"
	as_user "$U2" mkdir "$MNT/s/p2"
	run probe "$U2" "rmdir s/p1" "rmdir s/p2"
	assert_output $'rmdir s/p1 EPERM\nrmdir s/p2 OK'
	refused "$U2" 'Operation not permitted' rmdir "$MNT/s/p1"
	run ls "$MNT/s" "$MNT/s/p1"
	assert_output "$MNT/s:
p1

$MNT/s/p1:
c"
	no_eio
}

@test "rmdir of another user's 0700 tenant with content is EACCES even in a 0777 root; its owner and root may" {
	chmod 0777 "$MNT"
	as_user "$U1" mkdir -m 0700 "$MNT/t" "$MNT/t2" "$MNT/empty"
	as_user "$U1" mkdir "$MNT/t/p" "$MNT/t2/p"
	sh_as "$U1" 'echo x >"$1"' "$MNT/t/p/c"
	local before
	before=$(everything)
	# The kernel lets anyone remove an entry of a 0777 directory; the
	# content would have to go first, which another user cannot do.
	refused "$U2" 'Permission denied' rmdir "$MNT/t"
	refused "$U2" 'Permission denied' rmdir "$MNT/t2"
	run probe "$U3" "rmdir t" "rmdir t2"
	assert_output $'rmdir t EACCES\nrmdir t2 EACCES'
	run everything
	assert_output "$before"
	# An empty one is anyone's to remove there, as on Linux.
	as_user "$U2" rmdir "$MNT/empty"
	# The owner may, and root.
	as_user "$U1" rmdir "$MNT/t"
	rmdir "$MNT/t2"
	run ls "$MNT"
	assert_output ''
	no_eio
}

@test "a cascade needs what emptying by hand would: parents of a 0777 tenant, sticky tenants, .depart" {
	chmod 0777 "$MNT"
	# A 0777 tenant of U1 with U1's 0700 parent p (a child) and q (empty).
	as_user "$U1" mkdir -m 0777 "$MNT/w"
	as_user "$U1" mkdir -m 0700 "$MNT/w/p" "$MNT/w/q"
	sh_as "$U1" 'echo x >"$1"' "$MNT/w/p/c"
	# A sticky tenant of U1 where U2 keeps a parent with a child.
	as_user "$U1" mkdir -m 1777 "$MNT/s"
	as_user "$U2" mkdir -m 0777 "$MNT/s/p2"
	sh_as "$U2" 'echo y >"$1"' "$MNT/s/p2/c"
	local before
	before=$(everything)
	run probe "$U2" "rmdir w/p" "rmdir w"
	assert_output $'rmdir w/p EACCES\nrmdir w EACCES'
	refused "$U2" 'Permission denied' rmdir "$MNT/w/p"
	run probe "$U3" "rmdir s"
	assert_output 'rmdir s EACCES'
	run everything
	assert_output "$before"
	as_user "$U2" rmdir "$MNT/w/q"
	# The sticky tenant's owner may remove it: U2's parent is 0777.
	as_user "$U1" rmdir "$MNT/s"
	# .depart: the tenant's owner departs members it could remove by
	# hand only; root departs any.
	as_user "$U1" mkdir -m 0777 "$MNT/d"
	as_user "$U2" mkdir -m 0700 "$MNT/d/m" "$MNT/d/e"
	sh_as "$U2" 'echo z >"$1"' "$MNT/d/m/c"
	refused "$U1" 'Permission denied' bash -c 'echo m >"$1"' _ "$MNT/d/.depart"
	run ls "$MNT/d"
	assert_output $'e\nm'
	run cat "$MNT/d/m/c"
	assert_output z
	sh_as "$U1" 'echo e >"$1"' "$MNT/d/.depart"
	echo m >"$MNT/d/.depart"
	run ls "$MNT/d"
	assert_output ''
	run stat_of tombstones
	assert_output 3
	no_eio
}

@test "without default_permissions statefs checks no cascade either" {
	statefs_remount -o allow_other
	as_user "$U1" mkdir -m 0700 "$MNT/t"
	as_user "$U1" mkdir -m 0700 "$MNT/t/p"
	sh_as "$U1" 'echo x >"$1"' "$MNT/t/p/c"
	as_user "$U2" rmdir "$MNT/t/p"
	as_user "$U2" rmdir "$MNT/t"
	run ls "$MNT"
	assert_output ''
}

@test "only root (the mount's owner) can drain the whole store: the root .drain is 0644 root's" {
	run stat -c '%u:%g %a' "$MNT/.drain"
	assert_output '0:0 644'
	as_user "$U1" mkdir "$MNT/t"
	as_user "$U1" mkdir "$MNT/t/p"
	sh_as "$U1" 'echo x >"$1"' "$MNT/t/p/c"
	# Anyone reads the state; nobody else starts a drain.
	run as_user "$U1" cat "$MNT/.drain"
	assert_output ready
	refused "$U1" 'Permission denied' bash -c 'echo >"$1"' _ "$MNT/.drain"
	refused "$U2" 'Permission denied' bash -c 'echo now >>"$1"' _ "$MNT/.drain"
	run probe "$U1" "write .drain"
	assert_output 'write .drain EACCES'
	run probe "$U3" "write .drain"
	assert_output 'write .drain EACCES'
	run stat_of state
	assert_output ready
	as_user "$U2" mkdir "$MNT/u"
	# Root can.
	echo >"$MNT/.drain"
	run cat "$MNT/.drain"
	assert_output --regexp '^(draining [0-9]+|drained)$'
	refused "$U2" 'Read-only file system' mkdir "$MNT/v"
	refused "$U1" 'Read-only file system' mkdir "$MNT/t/q"
	no_eio
}

@test "a tenant's .drain and .depart follow the tenant's owner" {
	as_user "$U1" mkdir -m 0755 "$MNT/t"
	as_user "$U1" mkdir "$MNT/t/p" "$MNT/t/q"
	sh_as "$U1" 'echo x >"$1"' "$MNT/t/q/c"
	run stat -c '%n %u:%g %a' "$MNT/t/.drain" "$MNT/t/.depart" \
		"$MNT/t/.stats" "$MNT/t/.snapshot" "$MNT/t/.events"
	assert_output "$MNT/t/.drain 1001:1001 644
$MNT/t/.depart 1001:1001 200
$MNT/t/.stats 1001:1001 444
$MNT/t/.snapshot 1001:1001 444
$MNT/t/.events 1001:1001 444"
	# Another user reads what is readable and writes nothing.
	run probe "$U2" "read t/.drain" "read t/.stats" "read t/.snapshot" \
		"open t/.events" "write t/.drain" "write t/.depart" "read t/.depart"
	assert_output "read t/.drain OK
read t/.stats OK
read t/.snapshot OK
open t/.events OK
write t/.drain EACCES
write t/.depart EACCES
read t/.depart EACCES"
	refused "$U2" 'Permission denied' bash -c 'echo p >"$1"' _ "$MNT/t/.depart"
	refused "$U2" 'Permission denied' bash -c 'echo >"$1"' _ "$MNT/t/.drain"
	run ls "$MNT/t"
	assert_output $'p\nq'
	run cat "$MNT/t/.drain"
	assert_output ready
	# .depart is write-only, for its owner too.
	refused "$U1" 'Permission denied' cat "$MNT/t/.depart"
	# The owner departs a parent and drains the tenant.
	sh_as "$U1" 'echo p >"$1"' "$MNT/t/.depart"
	run ls "$MNT/t"
	assert_output q
	sh_as "$U1" 'echo >"$1"' "$MNT/t/.drain"
	run cat "$MNT/t/.drain"
	assert_output --regexp '^draining [0-9]+$'
	refused "$U1" 'Read-only file system' mkdir "$MNT/t/p"
	# Handed over, the special files follow the new owner.
	as_user "$U1" mkdir -m 0755 "$MNT/u"
	as_user "$U1" mkdir "$MNT/u/p" "$MNT/u/q"
	chown 1002:1002 "$MNT/u"
	run stat -c '%u:%g %a' "$MNT/u/.drain" "$MNT/u/.depart"
	assert_output $'1002:1002 644\n1002:1002 200'
	run probe "$U1" "write u/.depart" "write u/.drain"
	assert_output $'write u/.depart EACCES\nwrite u/.drain EACCES'
	sh_as "$U2" 'echo p >"$1"' "$MNT/u/.depart"
	run ls "$MNT/u"
	assert_output q
	sh_as "$U2" 'echo >"$1"' "$MNT/u/.drain"
	run cat "$MNT/u/.drain"
	assert_output drained
	no_eio
}

@test "the root's .snapshot, .stats and .events are readable by anyone (0444); .snapshot lists the tenants the reader can list" {
	run stat -c '%n %u:%g %a' "$MNT/.snapshot" "$MNT/.stats" "$MNT/.events"
	assert_output "$MNT/.snapshot 0:0 444
$MNT/.stats 0:0 444
$MNT/.events 0:0 444"
	as_user "$U1" mkdir -m 0700 "$MNT/closed"
	as_user "$U1" mkdir "$MNT/closed/p"
	as_user "$U1" mkdir -m 0750 "$MNT/group"
	as_user "$U1" chgrp 2000 "$MNT/group"
	as_user "$U1" mkdir "$MNT/group/p"
	as_user "$U1" mkdir -m 0755 "$MNT/open"
	as_user "$U1" mkdir "$MNT/open/p"
	as_user "$U1" mkdir -m 0711 "$MNT/pass"
	as_user "$U1" mkdir "$MNT/pass/p"
	as_user "$U2" mkdir -m 0700 "$MNT/mine"
	run probe "$U2" "read .snapshot" "read .stats" "open .events" \
		"ls closed" "read closed/.snapshot"
	assert_output "read .snapshot OK
read .stats OK
open .events OK
ls closed EACCES
read closed/.snapshot EACCES"
	# tenants: the (kind, tenant, parent) of each line after the header.
	tenants_seen() {
		as_user "$1" cat "$MNT/.snapshot" | awk -F'\t' 'NR > 1 && $1 != "seq" { print $1, $2, $3 }' | sort
	}
	# Each reader sees the tenants it could list with ls, with everything
	# in them, and nothing of the others.
	run tenants_seen "$U2"
	assert_output "parent group p
parent open p
tenant group -
tenant mine -
tenant open -"
	run tenants_seen "$U3"
	assert_output $'parent open p\ntenant open -'
	run tenants_seen "$U1"
	assert_output "parent closed p
parent group p
parent open p
parent pass p
tenant closed -
tenant group -
tenant open -
tenant pass -"
	run awk -F'\t' 'NR > 1 && $1 != "seq" { print $1, $2, $3 }' "$MNT/.snapshot"
	assert_line 'tenant mine -'
	assert_line 'tenant closed -'
	assert_line 'parent pass p'
	run bash -c 'tail -n +3 "$1/.snapshot" | wc -l' _ "$MNT"
	assert_output 9
	run as_user "$U3" head -n 1 "$MNT/.snapshot"
	assert_output "$(printf 'kind\ttenant\tparent\tchild\tgeneration\tversion\tsize\tnlink\tttl_ms_left\tinode')"
	# .stats counts the whole store (numbers, no names).
	run as_user "$U3" grep -E '^(tenants|parents) ' "$MNT/.stats"
	assert_output $'tenants 5\nparents 4'
	# Read-only for everyone, root included.
	run probe "$U2" "write .snapshot" "write .stats" "write .events"
	assert_output "$(expect "write .snapshot" "write .stats" "write .events" EACCES)"
	run probe root "write .snapshot" "write .stats" "write .events"
	assert_output "$(expect "write .snapshot" "write .stats" "write .events" EACCES)"
	refused "$U2" 'Permission denied' bash -c 'echo x >"$1"' _ "$MNT/.snapshot"
	run bash -c 'echo x >"$1"' _ "$MNT/.stats"
	printf '%s\n' "$output" >>"$ERRLOG"
	assert_failure
	assert_output --partial 'Permission denied'
	no_eio
}

@test "the root's .events shows each reader the lines of the tenants it can list, as they were when each line came" {
	local d=$BATS_TEST_TMPDIR
	as_user "$U1" mkdir -m 0700 "$MNT/closed"
	as_user "$U1" mkdir -m 0750 "$MNT/group"
	as_user "$U1" chgrp 2000 "$MNT/group"
	as_user "$U1" mkdir -m 0755 "$MNT/open"
	events_as 0:0 "$d/root"
	events_as "$U1" "$d/u1"
	events_as "$U2" "$d/u2"
	events_as "$U3" "$d/u3"
	as_user "$U1" mkdir "$MNT/closed/p"
	sh_as "$U1" 'echo x >"$1"' "$MNT/closed/p/c"
	as_user "$U1" mkdir "$MNT/group/p"
	as_user "$U1" mkdir "$MNT/open/p"
	sh_as "$U1" 'echo y >"$1"' "$MNT/open/p/c"
	as_user "$U1" rmdir "$MNT/closed/p"
	# Opened for a moment: what happened meanwhile is everyone's.
	as_user "$U1" chmod 0755 "$MNT/closed"
	as_user "$U1" mkdir "$MNT/closed/q"
	as_user "$U1" chmod 0700 "$MNT/closed"
	as_user "$U1" mkdir "$MNT/closed/r"
	as_user "$U1" mkdir "$MNT/open/end"
	events_wait
	local all
	all=$(evlines join closed p - 1 - create closed p c 1 0 write closed p c 1 1 \
		join group p - 1 - join open p - 1 - create open p c 1 0 \
		write open p c 1 1 leave closed p - 1 - join closed q - 1 - \
		join closed r - 1 - join open end - 1 -)
	# Root and the owner see everything.
	run cut -f2- "$d/root"
	assert_output "$all"
	run cut -f2- "$d/u1"
	assert_output "$all"
	# A member of group 2000 (a supplementary group) sees the 0750
	# tenant too; nobody else sees the 0700 one while it was closed.
	run cut -f2- "$d/u2"
	assert_output "$(evlines join group p - 1 - join open p - 1 - \
		create open p c 1 0 write open p c 1 1 join closed q - 1 - \
		join open end - 1 -)"
	run cut -f2- "$d/u3"
	assert_output "$(evlines join open p - 1 - create open p c 1 0 \
		write open p c 1 1 join closed q - 1 - join open end - 1 -)"
	# The lines keep the store's sequence numbers: each filtered
	# reader's lines are root's lines, numbers included (gaps, not
	# renumbering).
	run grep -cvxF -f "$d/root" "$d/u3"
	assert_output 0
	run grep -cvxF -f "$d/root" "$d/u2"
	assert_output 0
	run awk -F'\t' 'NR > 1 && $1 != prev + 1 { gap = 1 } { prev = $1 } END { exit !gap }' "$d/u3"
	assert_success
	# A tenant's own .events is guarded by its directory.
	run probe "$U2" "open closed/.events"
	assert_output 'open closed/.events EACCES'
}

@test "lines of a tenant a reader cannot list never make its root .events overflow" {
	local d=$BATS_TEST_TMPDIR go
	go="$(dirname "$MNT")/go"
	as_user "$U1" mkdir -m 0700 "$MNT/closed"
	as_user "$U1" mkdir -m 0777 "$MNT/closed/p"
	as_user "$U1" mkdir -m 0755 "$MNT/open"
	# Two readers open the stream and do not read: another user, and
	# root.  Then 5000 lines of the closed tenant, more than the 4096 a
	# reader may fall behind, and one line of the open one.
	# reader WHO OUT: open, wait for $go, read up to "join open end".
	local reader='
import os, sys, time
fd = os.open(sys.argv[1] + "/.events", os.O_RDONLY)
print("open", file=sys.stderr, flush=True)
t0 = time.monotonic()
while not os.path.exists(sys.argv[2]):
    if time.monotonic() - t0 > 60:
        sys.exit("no go")
    time.sleep(0.05)
buf = b""
while b"\tjoin\topen\tend\t" not in buf:
    buf += os.read(fd, 65536)
sys.stdout.write(buf.decode())
'
	as_user "$U2" timeout 90 "$PROBE_PYTHON" -c "$reader" "$MNT" "$go" >"$d/u2" 2>"$d/u2.open" &
	BG_PIDS+=($!)
	timeout 90 "$PROBE_PYTHON" -c "$reader" "$MNT" "$go" >"$d/root" 2>"$d/root.open" &
	BG_PIDS+=($!)
	local i
	for i in $(seq 100); do
		grep -q open "$d/u2.open" && grep -q open "$d/root.open" && break
		sleep 0.05
	done
	"$PROBE_PYTHON" -c '
import os, sys
for i in range(5000):
    os.close(os.open("%s/closed/p/c%d" % (sys.argv[1], i), os.O_CREAT | os.O_WRONLY, 0o644))
' "$MNT"
	# A line is handed out once the daemon's cache thread has passed it
	# (statefs(8), WATCHING), and a reader falls behind only what it may
	# read: one more reader, opened now, waits for the last line first,
	# so that every line is the two readers' to read when they start.
	exec 8<"$MNT/.events"
	mkdir "$MNT/open/end"
	timeout 10 grep -q -m 1 $'\tjoin\topen\tend\t' <&8
	exec 8<&-
	touch "$go"
	events_wait
	rm -f "$go"
	run cut -f2- "$d/u2"
	assert_output "$(evlines join open end - 1 -)"
	run head -n 1 "$d/root"
	assert_output overflow
	run tail -n 1 "$d/root"
	assert_output --regexp $'^[0-9]+\tjoin\topen\tend\t-\t1\t-$'
}

@test "every refusal of this suite's kinds is its errno, never EIO: a sweep of shell tools" {
	as_user "$U1" mkdir -m 0700 "$MNT/t"
	as_user "$U1" mkdir -m 0755 "$MNT/t/p"
	sh_as "$U1" 'echo x >"$1"' "$MNT/t/p/c"
	as_user "$U1" mkdir -m 0755 "$MNT/o"
	as_user "$U1" mkdir -m 0755 "$MNT/o/p"
	sh_as "$U1" 'umask 022 && echo x >"$1"' "$MNT/o/p/c"
	local before
	before=$(everything)
	local who cmd
	for who in "$U2" "$U3"; do
		for cmd in \
			'ls -la "$1/t"' 'ls -la "$1/t/p"' 'cat "$1/t/p/c"' 'stat "$1/t/p"' \
			'mkdir "$1/t/x"' 'mkdir -p "$1/t/p/y"' 'touch "$1/t/p/n"' \
			'echo y >"$1/t/p/c"' 'echo y >>"$1/o/p/c"' 'echo y >"$1/o/p/c"' \
			'touch "$1/o/p/n"' 'mkdir "$1/o/q"' 'rm -f "$1/o/p/c"' 'rmdir "$1/o/p"' \
			'mv "$1/o/p/c" "$1/o/p/d"' 'ln "$1/o/p/c" "$1/o/p/e"' \
			'setfattr -n user.statefs.ttl -v 1 "$1/o/p/c"' \
			'setfattr -n user.statefs.ttl -v 1 "$1/o/p"' \
			'setfattr -n user.statefs.child_ttl -v 1 "$1/o/p"' 'touch "$1/o/p/c"' \
			'truncate -s 0 "$1/o/p/c"' 'chmod 777 "$1/o/p/c"' 'chown 1 "$1/o"' \
			'echo p >"$1/o/.depart"' 'echo >"$1/o/.drain"' 'echo >"$1/.drain"' \
			'cat "$1/o/.depart"' 'rmdir "$1/o"' 'rm -rf "$1/o"' 'mv "$1/o" "$1/z"'; do
			run as_user "$who" bash -c "$cmd" _ "$MNT"
			printf '%s\n' "$output" >>"$ERRLOG"
			[ "$status" -ne 0 ] || fail "as $who, succeeded: $cmd"
		done
	done
	run everything
	assert_output "$before"
	no_eio
}

@test "a tenant's .snapshot and .events are opened only by who may list the tenant: a 0711 tenant keeps its names" {
	as_user "$U1" mkdir -m 0711 "$MNT/sec"
	as_user "$U1" mkdir "$MNT/sec/hidden-parent"
	sh_as "$U1" 'echo s >"$1"' "$MNT/sec/hidden-parent/hidden-child"
	# Search permission alone reaches the special files, as any file.
	run probe "$U2" "ls sec" "stat sec/.snapshot" "read sec/.snapshot" \
		"open sec/.events" "read sec/.stats" "read sec/.drain"
	assert_output "ls sec EACCES
stat sec/.snapshot OK
read sec/.snapshot EACCES
open sec/.events EACCES
read sec/.stats OK
read sec/.drain OK"
	refused "$U2" 'Permission denied' cat "$MNT/sec/.snapshot"
	refused "$U2" 'Permission denied' timeout 5 cat "$MNT/sec/.events"
	# The owner and root read them; so does a member of a group the
	# tenant opens to.
	run probe "$U1" "read sec/.snapshot" "open sec/.events"
	assert_output $'read sec/.snapshot OK\nopen sec/.events OK'
	run awk -F'\t' 'NR > 1 && $1 != "seq" { print $1, $3, $4 }' "$MNT/sec/.snapshot"
	assert_output $'tenant - -\nparent hidden-parent -\nchild hidden-parent hidden-child'
	as_user "$U1" chgrp 2000 "$MNT/sec"
	as_user "$U1" chmod 0751 "$MNT/sec"
	run probe "$U2" "read sec/.snapshot" "open sec/.events"
	assert_output $'read sec/.snapshot OK\nopen sec/.events OK'
	run probe "$U3" "read sec/.snapshot" "open sec/.events"
	assert_output $'read sec/.snapshot EACCES\nopen sec/.events EACCES'
	no_eio
}

@test "an open tenant .events stops showing the tenant while its reader may not list it" {
	local d=$BATS_TEST_TMPDIR
	as_user "$U1" mkdir -m 0755 "$MNT/open"
	# events_as, on the tenant's own stream.
	as_user "$U2" "$PROBE_PYTHON" -c "$EVENTS_PY" "$MNT/open" >"$d/u2" 2>"$d/u2.open" 3>&- &
	BG_PIDS+=($!)
	wait_line "$d/u2.open" open 5
	"$PROBE_PYTHON" -c "$EVENTS_PY" "$MNT/open" >"$d/root" 2>"$d/root.open" 3>&- &
	BG_PIDS+=($!)
	wait_line "$d/root.open" open 5
	as_user "$U1" mkdir "$MNT/open/before"
	as_user "$U1" chmod 0700 "$MNT/open"
	as_user "$U1" mkdir "$MNT/open/secret"
	sh_as "$U1" 'echo s >"$1"' "$MNT/open/secret/c"
	as_user "$U1" rmdir "$MNT/open/secret"
	as_user "$U1" chmod 0755 "$MNT/open"
	as_user "$U1" mkdir "$MNT/open/end"
	events_wait
	run cut -f2- "$d/u2"
	assert_output "$(evlines join open before - 1 - join open end - 1 -)"
	run cut -f2- "$d/root"
	assert_output "$(evlines join open before - 1 - join open secret - 1 - \
		create open secret c 1 0 write open secret c 1 1 \
		leave open secret - 1 - join open end - 1 -)"
	# The same numbers as root's, with a gap.
	run grep -cvxF -f "$d/root" "$d/u2"
	assert_output 0
}

@test "a tenant .drain starts only for who could empty the tenant by hand: another user's parent in a shared tenant stops it" {
	as_user "$U1" mkdir -m 1777 "$MNT/shared"
	as_user "$U2" mkdir -m 0755 "$MNT/shared/q"
	sh_as "$U2" 'echo bob-state >"$1"' "$MNT/shared/q/bobjob"
	local before
	before=$(everything)
	# The tenant's owner may not remove U2's parent by any other way.
	run probe "$U1" "rmdir shared/q" "rm shared/q/bobjob" "write shared/.drain"
	assert_output "rmdir shared/q EACCES
rm shared/q/bobjob EACCES
write shared/.drain EACCES"
	refused "$U1" 'Permission denied' bash -c 'echo q >"$1"' _ "$MNT/shared/.depart"
	refused "$U1" 'Permission denied' bash -c 'echo go >"$1"' _ "$MNT/shared/.drain"
	# Nothing started: the tenant is ready and admits.
	run cat "$MNT/shared/.drain"
	assert_output ready
	run everything
	assert_output "$before"
	as_user "$U3" mkdir "$MNT/shared/r"
	as_user "$U3" rmdir "$MNT/shared/r"
	# Once U2's parent is open to its owner, the owner may drain it.
	as_user "$U2" chmod 0777 "$MNT/shared/q"
	sh_as "$U1" 'echo go >"$1"' "$MNT/shared/.drain"
	run cat "$MNT/shared/.drain"
	assert_output --regexp '^draining [0-9]+$'
	refused "$U3" 'Read-only file system' mkdir "$MNT/shared/r"
	# Root may drain any tenant.
	as_user "$U1" mkdir -m 0755 "$MNT/other"
	mkdir -m 0700 "$MNT/other/p"
	chown 1002:1002 "$MNT/other/p"
	echo >"$MNT/other/.drain"
	run cat "$MNT/other/.drain"
	assert_output drained
	no_eio
}
