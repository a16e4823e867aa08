#!/usr/bin/env bats
# statefs(8), THE TREE: the fixed-depth tree, name rules, node identity.

load helpers

setup() {
	statefs_mount
}

# --- depth ---------------------------------------------------------------

@test "mkdir at the root makes a tenant, in a tenant a parent, and files go in a parent" {
	mkdir "$MNT/t"
	mkdir "$MNT/t/p"
	echo hello >"$MNT/t/p/c"
	run ls "$MNT"
	assert_output t
	run ls "$MNT/t"
	assert_output p
	run ls "$MNT/t/p"
	assert_output c
	run cat "$MNT/t/p/c"
	assert_output hello
	run stat -c %F "$MNT/t" "$MNT/t/p" "$MNT/t/p/c"
	assert_output $'directory\ndirectory\nregular file'
}

@test "a regular file at the root is refused with EPERM" {
	run touch "$MNT/f"
	assert_failure
	assert_output --partial 'Operation not permitted'
	run bash -c 'echo x >"$1/f"' _ "$MNT"
	assert_failure
	assert_output --partial 'Operation not permitted'
	run ls "$MNT"
	assert_output ''
}

@test "a regular file at tenant level is refused with EPERM" {
	mkdir "$MNT/t"
	run touch "$MNT/t/f"
	assert_failure
	assert_output --partial 'Operation not permitted'
	run py_errno 'os.mknod(sys.argv[1], 0o644 | stat.S_IFREG)' "$MNT/t/f"
	assert_output EPERM
	run ls "$MNT/t"
	assert_output ''
}

@test "a directory inside a parent is refused with EPERM" {
	mkdir -p "$MNT/t/p"
	run mkdir "$MNT/t/p/d"
	assert_failure
	assert_output --partial 'Operation not permitted'
	run ls "$MNT/t/p"
	assert_output ''
}

@test "symlinks are refused with EPERM at every depth" {
	mkdir -p "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	for dir in "$MNT" "$MNT/t" "$MNT/t/p"; do
		run ln -s "$MNT/t/p/c" "$dir/l"
		assert_failure
		assert_output --partial 'Operation not permitted'
	done
	run ls "$MNT/t/p"
	assert_output c
}

@test "FIFOs are refused with EPERM" {
	mkdir -p "$MNT/t/p"
	run mkfifo "$MNT/t/p/fifo"
	assert_failure
	assert_output --partial 'Operation not permitted'
	run mkfifo "$MNT/t/fifo"
	assert_failure
	assert_output --partial 'Operation not permitted'
	run ls "$MNT/t/p"
	assert_output ''
}

@test "device nodes are refused with EPERM" {
	mkdir -p "$MNT/t/p"
	run mknod "$MNT/t/p/cdev" c 1 3
	assert_failure
	assert_output --partial 'Operation not permitted'
	run mknod "$MNT/t/p/bdev" b 7 0
	assert_failure
	assert_output --partial 'Operation not permitted'
	run py_errno 'os.mknod(sys.argv[1], 0o600 | stat.S_IFSOCK)' "$MNT/t/p/sock"
	assert_output EPERM
	run ls "$MNT/t/p"
	assert_output ''
}

@test "mknod of a regular file in a parent is an admission" {
	mkdir -p "$MNT/t/p"
	run py_errno 'os.mknod(sys.argv[1], 0o644 | stat.S_IFREG)' "$MNT/t/p/c"
	assert_output OK
	run stat -c '%F %s' "$MNT/t/p/c"
	assert_output 'regular empty file 0'
}

@test "a child cannot be hard-linked or moved to tenant or root level" {
	mkdir -p "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	run ln "$MNT/t/p/c" "$MNT/t/c"
	assert_failure
	assert_output --partial 'Operation not permitted'
	run py_errno 'os.rename(sys.argv[1], sys.argv[2])' "$MNT/t/p/c" "$MNT/t/c"
	assert_output EPERM
	run ls "$MNT/t"
	assert_output p
	run cat "$MNT/t/p/c"
	assert_output x
}

@test "ls of a parent with 600 children lists each exactly once" {
	mkdir -p "$MNT/t/p"
	(cd "$MNT/t/p" && touch $(printf 'child-with-a-longish-name-%04d ' $(seq 600)))
	run bash -c 'ls "$1" | wc -l' _ "$MNT/t/p"
	assert_output 600
	run bash -c 'ls -f "$1" | sort | uniq -d' _ "$MNT/t/p"
	assert_output ''
	run bash -c 'find "$1" -type f | wc -l' _ "$MNT/t/p"
	assert_output 600
}

# --- names ---------------------------------------------------------------

@test "tenant and parent names beginning with a dot are refused with EINVAL" {
	run mkdir "$MNT/.t"
	assert_failure
	assert_output --partial 'Invalid argument'
	mkdir "$MNT/t"
	run mkdir "$MNT/t/.p"
	assert_failure
	assert_output --partial 'Invalid argument'
	[ ! -e "$MNT/.t" ] && [ ! -e "$MNT/t/.p" ]
	run ls "$MNT"
	assert_output t
	run ls "$MNT/t"
	assert_output ''
}

@test "a child's name may begin with a dot: a parent has no special files" {
	mkdir -p "$MNT/t/p"
	touch "$MNT/t/p/.c"
	echo x >"$MNT/t/p/.stats"
	run ls -A "$MNT/t/p"
	assert_output $'.c\n.stats'
	run cat "$MNT/t/p/.stats"
	assert_output x
	# A directory inside a parent is refused as ever.
	run mkdir "$MNT/t/p/.d"
	assert_failure
	assert_output --partial 'Operation not permitted'
	run ls -A "$MNT/t/p"
	assert_output $'.c\n.stats'
}

@test "names with a space are refused with EINVAL" {
	run mkdir "$MNT/a b"
	assert_failure
	assert_output --partial 'Invalid argument'
	mkdir -p "$MNT/t/p"
	run mkdir "$MNT/t/a b"
	assert_failure
	assert_output --partial 'Invalid argument'
	run touch "$MNT/t/p/a b"
	assert_failure
	assert_output --partial 'Invalid argument'
	run ls "$MNT"
	assert_output t
	run ls "$MNT/t/p"
	assert_output ''
}

@test "names with a tab, a newline or DEL are refused with EINVAL" {
	mkdir -p "$MNT/t/p"
	local bad
	for bad in $'a\tb' $'a\nb' $'a\x7fb' $'a\x01b'; do
		run py_errno 'os.mkdir(sys.argv[1])' "$MNT/$bad"
		assert_output EINVAL
		run py_errno 'os.mkdir(sys.argv[1])' "$MNT/t/$bad"
		assert_output EINVAL
		run py_errno 'os.close(os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644))' "$MNT/t/p/$bad"
		assert_output EINVAL
	done
	run touch "$MNT/t/p/"$'a\tb'
	assert_failure
	assert_output --partial 'Invalid argument'
	run ls "$MNT"
	assert_output t
	run ls "$MNT/t"
	assert_output p
	run ls "$MNT/t/p"
	assert_output ''
}

@test "rename or link to a bad name is refused with EINVAL" {
	mkdir -p "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	# (mv words a rename EINVAL as "cannot move ... to a subdirectory of
	# itself", so ask rename(2) directly.)
	run py_errno 'os.rename(sys.argv[1], sys.argv[2])' "$MNT/t/p/c" "$MNT/t/p/a b"
	assert_output EINVAL
	run ln "$MNT/t/p/c" "$MNT/t/p/x y"
	assert_failure
	assert_output --partial 'Invalid argument'
	run ls -A "$MNT/t/p"
	assert_output c
}

@test "the name - is refused with EINVAL at every depth, in .depart and as a rename or link destination; looked up it is ENOENT" {
	# "-" is the "does not apply" field of .events and .snapshot.
	mkdir -p "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	run py_errno 'os.mkdir(sys.argv[1])' "$MNT/-"
	assert_output EINVAL
	run py_errno 'os.mkdir(sys.argv[1])' "$MNT/t/-"
	assert_output EINVAL
	run py_errno 'os.close(os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644))' "$MNT/t/p/-"
	assert_output EINVAL
	run py_errno 'os.mknod(sys.argv[1], 0o644 | stat.S_IFREG)' "$MNT/t/p/-"
	assert_output EINVAL
	run py_errno 'os.rename(sys.argv[1], sys.argv[2])' "$MNT/t/p/c" "$MNT/t/p/-"
	assert_output EINVAL
	run py_errno 'os.link(sys.argv[1], sys.argv[2])' "$MNT/t/p/c" "$MNT/t/p/-"
	assert_output EINVAL
	run bash -c 'echo - >"$1/t/.depart"' _ "$MNT"
	assert_failure
	assert_output --partial 'Invalid argument'
	# No node can have it: a lookup is ENOENT, as for any other name
	# that cannot be made.
	local d
	for d in "" t/ t/p/; do
		run py_errno 'os.stat(sys.argv[1])' "$MNT/$d-"
		assert_output ENOENT
	done
	run ls "$MNT" "$MNT/t" "$MNT/t/p"
	assert_output "$MNT:
t

$MNT/t:
p

$MNT/t/p:
c"
	grep -qx 'tombstones 0' "$MNT/.stats"
	# A name that only begins or ends with '-' is like any other.
	mkdir "$MNT/-t" "$MNT/t/p-" && touch "$MNT/t/p/--" "$MNT/t/p/-c"
	printf '%s\n' -q >"$MNT/t/.depart"
	run ls "$MNT/t/p"
	assert_output $'--\n-c\nc'
}

@test "names are UTF-8 friendly and may contain dashes, dots and colons" {
	mkdir -p "$MNT/t-1.x/p:9"
	touch "$MNT/t-1.x/p:9/c.é_1"
	run ls "$MNT/t-1.x/p:9"
	assert_output 'c.é_1'
}

@test "a name longer than max_name is refused with ENAMETOOLONG" {
	statefs_remount -o max_name=8
	mkdir "$MNT/12345678"
	run mkdir "$MNT/123456789"
	assert_failure
	assert_output --partial 'File name too long'
	mkdir "$MNT/12345678/p"
	run mkdir "$MNT/12345678/abcdefghi"
	assert_failure
	assert_output --partial 'File name too long'
	touch "$MNT/12345678/p/abcdefgh"
	run touch "$MNT/12345678/p/abcdefghi"
	assert_failure
	assert_output --partial 'File name too long'
	run mv "$MNT/12345678/p/abcdefgh" "$MNT/12345678/p/abcdefghi"
	assert_failure
	assert_output --partial 'File name too long'
	run ls "$MNT" "$MNT/12345678" "$MNT/12345678/p"
	assert_output "$MNT:
12345678

$MNT/12345678:
p

$MNT/12345678/p:
abcdefgh"
}

@test "stat, rm, chmod and getfattr of a name longer than max_name fail with ENAMETOOLONG" {
	statefs_remount -o max_name=8
	mkdir -p "$MNT/t/p"
	local path
	# At every depth, and past the default's 255 bytes as well.
	for path in "$MNT/123456789" "$MNT/t/123456789" "$MNT/t/p/123456789" \
		"$MNT/t/p/$(printf 'n%.0s' $(seq 300))"; do
		run py_errno 'os.stat(sys.argv[1])' "$path"
		assert_output ENAMETOOLONG
		run py_errno 'os.unlink(sys.argv[1])' "$path"
		assert_output ENAMETOOLONG
		run py_errno 'os.rmdir(sys.argv[1])' "$path"
		assert_output ENAMETOOLONG
		run py_errno 'os.chmod(sys.argv[1], 0o600)' "$path"
		assert_output ENAMETOOLONG
		run py_errno 'os.getxattr(sys.argv[1], "user.statefs.version")' "$path"
		assert_output ENAMETOOLONG
	done
	run stat "$MNT/t/p/123456789"
	assert_failure
	assert_output --partial 'File name too long'
	run rm "$MNT/t/p/123456789"
	assert_failure
	assert_output --partial 'File name too long'
	run chmod 600 "$MNT/t/p/123456789"
	assert_failure
	assert_output --partial 'File name too long'
	# Names within the bound that do not exist are still ENOENT.
	run py_errno 'os.stat(sys.argv[1])' "$MNT/t/p/12345678"
	assert_output ENOENT
}

@test "a name of 255 bytes is accepted by default" {
	local long
	long=$(printf 'n%.0s' $(seq 255))
	mkdir "$MNT/$long"
	run ls "$MNT"
	assert_output "$long"
}

# --- identity --------------------------------------------------------------

@test "a re-created child gets a new inode number" {
	mkdir -p "$MNT/t/p"
	touch "$MNT/t/p/c"
	local before after
	before=$(stat -c %i "$MNT/t/p/c")
	rm "$MNT/t/p/c"
	touch "$MNT/t/p/c"
	after=$(stat -c %i "$MNT/t/p/c")
	[ -n "$before" ] && [ -n "$after" ]
	assert_not_equal "$before" "$after"
}

@test "a rejoined parent and a re-made tenant get new inode numbers" {
	mkdir -p "$MNT/t/p"
	local p1 p2 t1 t2
	p1=$(stat -c %i "$MNT/t/p")
	rmdir "$MNT/t/p"
	mkdir "$MNT/t/p"
	p2=$(stat -c %i "$MNT/t/p")
	assert_not_equal "$p1" "$p2"
	t1=$(stat -c %i "$MNT/t")
	rmdir "$MNT/t"
	mkdir "$MNT/t"
	t2=$(stat -c %i "$MNT/t")
	assert_not_equal "$t1" "$t2"
}

@test "inode numbers are never reused across many incarnations" {
	mkdir -p "$MNT/t/p"
	local seen="$BATS_TEST_TMPDIR/inos"
	for _ in $(seq 30); do
		touch "$MNT/t/p/c"
		stat -c %i "$MNT/t/p/c" >>"$seen"
		rm "$MNT/t/p/c"
		mkdir "$MNT/t/q"
		stat -c %i "$MNT/t/q" >>"$seen"
		rmdir "$MNT/t/q"
	done
	run wc -l <"$seen"
	assert_output 60
	run bash -c 'sort "$1" | uniq -d' _ "$seen"
	assert_output ''
}

@test "an open file of an earlier incarnation gets ESTALE and changes nothing" {
	mkdir -p "$MNT/t/p"
	echo old >"$MNT/t/p/c"
	exec 8<"$MNT/t/p/c"
	rm "$MNT/t/p/c"
	echo new >"$MNT/t/p/c"
	run cat <&8
	assert_failure
	assert_output --partial 'Stale file handle'
	exec 8<&-
	run cat "$MNT/t/p/c"
	assert_output new
}

# A departed directory answers ESTALE while the kernel still holds it;
# once statefs has told the kernel (the echo that raises inotify's DELETE),
# the kernel itself answers ENOENT inside it, as after a local rmdir.
# Either way nothing is admitted.
stale_or_gone() {
	assert_failure
	[[ $output == *'Stale file handle'* || $output == *'No such file or directory'* ]] ||
		fail "expected ESTALE or ENOENT, got: $output"
}

@test "a shell whose working directory is a departed parent cannot create in it" {
	mkdir -p "$MNT/t/p"
	run bash -c 'cd "$1/t/p" && echo p >"$1/t/.depart" && touch x' _ "$MNT"
	stale_or_gone
	run ls "$MNT/t"
	assert_output ''
}

@test "rm through an old working directory never removes the new child" {
	mkdir -p "$MNT/t/p"
	touch "$MNT/t/p/c"
	run bash -c 'cd "$1/t/p" &&
		echo p >"$1/t/.depart" && mkdir "$1/t/p" && echo new >"$1/t/p/c" &&
		rm c' _ "$MNT"
	stale_or_gone
	run cat "$MNT/t/p/c"
	assert_output new
}

@test "an admission through an old directory handle gets ESTALE before the kernel learns of the departure" {
	mkdir -p "$MNT/t/p"
	# Hold the departed parent open and create through it at once: the
	# store refuses the old incarnation whatever the kernel knows.
	run python3 -c '
import os, sys
mnt = sys.argv[1]
fd = os.open(mnt + "/t/p", os.O_RDONLY | os.O_DIRECTORY)
with open(mnt + "/t/.depart", "w") as f:
    f.write("p")
os.mkdir(mnt + "/t/p")
try:
    os.close(os.open("x", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
    print("created")
except OSError as e:
    print(os.strerror(e.errno))
' "$MNT"
	[[ $output == 'Stale file handle' || $output == 'No such file or directory' ]] ||
		fail "got: $output"
	run ls "$MNT/t/p"
	assert_output ''
}
