#!/usr/bin/env bats
# statefs(8), WATCHING, inotify: a watcher of MNT/T/P sees its children come,
# change and go, a watcher of MNT/T sees parents come and go, whatever
# caused the change: a shell through the mount, a .depart, or a lease
# expiry (which the daemon echoes through its own mount from a thread, so
# those events come asynchronously: tests poll for them).

load helpers

setup() {
	statefs_mount -o testclock
	mkdir -p "$MNT/t/p"
	W="$BATS_TEST_TMPDIR/watch"
}

teardown() {
	bg_teardown
}

# count_line FILE LINE: how many lines of FILE are exactly LINE.
count_line() {
	grep -cxF -- "$2" "$1"
}

@test "a watcher of a parent sees CREATE, MODIFY, CLOSE_WRITE, ATTRIB and DELETE of a child" {
	watch_start "$W" "$MNT/t/p" -e create,delete,attrib,close_write,modify
	echo x >"$MNT/t/p/c"
	touch "$MNT/t/p/c"
	rm "$MNT/t/p/c"
	wait_line "$W" 'DELETE c'
	assert_equal "$(head -n 1 "$W")" 'CREATE c'
	assert_equal "$(tail -n 1 "$W")" 'DELETE c'
	run cat "$W"
	assert_line 'MODIFY c'
	assert_line 'CLOSE_WRITE,CLOSE c'
	assert_line 'ATTRIB c'
	sleep 0.5
	assert_equal "$(count_line "$W" 'DELETE c')" 1
}

@test "a touch renewal of a leased child is an ATTRIB event, and renews" {
	touch "$MNT/t/p/c"
	set_ttl 2 "$MNT/t/p/c"
	watch_start "$W" "$MNT/t/p" -e attrib,delete
	advance 1500
	touch "$MNT/t/p/c"
	wait_line "$W" 'ATTRIB c'
	advance 1999
	run ls "$MNT/t/p"
	assert_output c
	run grep -c DELETE "$W"
	assert_output 0
}

@test "a watcher of a tenant sees a parent join and leave" {
	watch_start "$W" "$MNT/t" -e create,delete
	mkdir "$MNT/t/q"
	rmdir "$MNT/t/q"
	wait_line "$W" 'DELETE,ISDIR q'
	run cat "$W"
	assert_output $'CREATE,ISDIR q\nDELETE,ISDIR q'
}

@test "rmdir of a parent with children is one DELETE,ISDIR in the tenant's watch" {
	touch "$MNT/t/p/a" "$MNT/t/p/b"
	watch_start "$W" "$MNT/t" -e create,delete
	rmdir "$MNT/t/p"
	wait_line "$W" 'DELETE,ISDIR p'
	sleep 0.5
	run cat "$W"
	assert_output 'DELETE,ISDIR p'
}

@test ".depart of a live parent raises DELETE,ISDIR in the tenant's watch" {
	touch "$MNT/t/p/a"
	watch_start "$W" "$MNT/t" -e create,delete
	echo p >"$MNT/t/.depart"
	run ls "$MNT/t"
	assert_output ''
	wait_line "$W" 'DELETE,ISDIR p'
	sleep 0.5
	assert_equal "$(count_line "$W" 'DELETE,ISDIR p')" 1
}

@test "a child's lease expiry raises DELETE in the parent's watch, once" {
	echo x >"$MNT/t/p/c"
	touch "$MNT/t/p/keep"
	set_ttl 1 "$MNT/t/p/c"
	watch_start "$W" "$MNT/t/p" -e create,delete,attrib,close_write,modify
	advance 1000
	run ls "$MNT/t/p"
	assert_output keep
	wait_line "$W" 'DELETE c'
	sleep 0.5
	run cat "$W"
	assert_output 'DELETE c'
	run ls "$MNT/t/p"
	assert_output keep
}

@test "a parent's lease expiry raises DELETE,ISDIR in the tenant's watch" {
	touch "$MNT/t/p/a"
	mkdir "$MNT/t/q"
	set_ttl 1 "$MNT/t/p"
	watch_start "$W" "$MNT/t" -e create,delete
	advance 1000
	wait_line "$W" 'DELETE,ISDIR p'
	sleep 0.5
	run cat "$W"
	assert_output 'DELETE,ISDIR p'
	run ls "$MNT/t"
	assert_output q
}

@test "many children expiring at once each raise DELETE" {
	local i names=()
	for i in $(seq 50); do
		names+=("$MNT/t/p/c$i")
	done
	touch "${names[@]}"
	setfattr -n user.statefs.child_ttl -v 1 "$MNT/t/p"
	touch "$MNT/t/p/late"
	for i in $(seq 50); do
		set_ttl 1 "$MNT/t/p/c$i"
	done
	watch_start "$W" "$MNT/t/p" -e delete
	advance 999
	touch "$MNT/t/p/late" # renewed: due 1000 ms after this
	advance 1
	for i in $(seq 50); do
		wait_line "$W" "DELETE c$i" 5
	done
	sleep 0.5
	run wc -l <"$W"
	assert_output 50
	run ls "$MNT/t/p"
	assert_output late
}

@test "an expiry's echo never removes a new incarnation of the same name" {
	local i
	for i in 1 2 3 4 5; do
		echo old >"$MNT/t/p/c"
		set_ttl 1 "$MNT/t/p/c"
		advance 1000
		echo new$i >"$MNT/t/p/c"
		sleep 0.3
		run cat "$MNT/t/p/c"
		assert_success
		assert_output new$i
		rm "$MNT/t/p/c"
	done
	run stat_of expiries
	assert_output 5
}

@test "without testclock, a child's expiry raises DELETE with nobody touching the mount" {
	statefs_remount
	mkdir -p "$MNT/t/p"
	touch "$MNT/t/p/c"
	set_ttl 1 "$MNT/t/p/c"
	watch_start "$W" "$MNT/t/p" -e delete
	wait_line "$W" 'DELETE c' 4
	run ls "$MNT/t/p"
	assert_output ''
}

# rejoin_rounds DIR ROUNDS: in each round, join parent pR, .depart it and
# join it again at once, then admit a child into the new pR through a
# directory descriptor opened right after the mkdir and through the path.
# Prints one line per admission that failed (none expected).
rejoin_rounds() {
	python3 - "$1" "$2" <<'PY'
import os, sys, errno
T, rounds = sys.argv[1], int(sys.argv[2])
dep = os.open(T + "/.depart", os.O_WRONLY)
for r in range(rounds):
    P = "%s/p%d" % (T, r)
    os.mkdir(P)
    os.write(dep, b"p%d\n" % r)
    os.mkdir(P)
    dfd = os.open(P, os.O_RDONLY | os.O_DIRECTORY)
    for how, call in (("dirfd", lambda: os.open("a", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=dfd)),
                      ("path", lambda: os.open(P + "/b", os.O_CREAT | os.O_WRONLY, 0o644))):
        try:
            os.close(call())
        except OSError as e:
            print("round %d: create through %s: %s" % (r, how, errno.errorcode[e.errno]))
    os.close(dfd)
PY
}

# rejoin_check ROUNDS: after rejoin_rounds with a watch of the tenant in $W,
# wait until every echo before a last .depart has run, then check that
# each pR is usable and that its watch saw no DELETE after its last CREATE.
rejoin_check() {
	local r last
	mkdir "$MNT/t/last"
	echo last >"$MNT/t/.depart"
	# One echo thread replays the removals in order: once this one is
	# seen, every earlier echo has run (or was skipped).
	wait_line "$W" 'DELETE,ISDIR last' 10
	for r in $(seq 0 $(($1 - 1))); do
		last=$(grep -E " p$r\$" "$W" | tail -n 1)
		assert_equal "$last" "CREATE,ISDIR p$r"
		run ls "$MNT/t/p$r"
		assert_output $'a\nb'
		touch "$MNT/t/p$r/c"
	done
}

@test "a parent that rejoins right after a .depart stays usable, and its CREATE is the last event" {
	statefs_remount -o cache_timeout=0
	mkdir "$MNT/t"
	watch_start "$W" "$MNT/t" -e create,delete
	run rejoin_rounds "$MNT/t" 40
	assert_output ''
	rejoin_check 40
}

@test "the same with the kernel caching names" {
	statefs_remount
	mkdir "$MNT/t"
	watch_start "$W" "$MNT/t" -e create,delete
	run rejoin_rounds "$MNT/t" 40
	assert_output ''
	rejoin_check 40
}
