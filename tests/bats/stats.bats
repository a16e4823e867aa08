#!/usr/bin/env bats
# statefs(8), SPECIAL FILES, .stats: key value lines at the root and in each
# tenant; special files are listed by ls -a.

load helpers

setup() {
	statefs_mount
}

@test "ls -a lists the special files of the root and of a tenant; plain ls hides them" {
	mkdir "$MNT/t"
	run ls -A "$MNT"
	assert_output $'.drain\n.events\n.snapshot\n.stats\nt'
	run ls -A "$MNT/t"
	assert_output $'.depart\n.drain\n.events\n.snapshot\n.stats'
	run ls "$MNT/t"
	assert_output ''
}

@test "parents have no special files" {
	mkdir -p "$MNT/t/p"
	run ls -A "$MNT/t/p"
	assert_output ''
	run stat "$MNT/t/p/.stats"
	assert_failure
	assert_output --partial 'No such file or directory'
}

@test ".stats is a read-only 0444 file and .depart a write-only 0200 file" {
	mkdir "$MNT/t"
	[ -f "$MNT/.stats" ] && [ -f "$MNT/t/.stats" ] && [ -f "$MNT/t/.depart" ]
	run stat -c %a "$MNT/.stats" "$MNT/t/.stats" "$MNT/t/.depart"
	assert_output $'444\n444\n200'
}

@test "writing to .stats is refused and changes nothing" {
	run bash -c 'echo tenants 9 >"$1/.stats"' _ "$MNT"
	assert_failure
	run stat_of tenants
	assert_output 0
}

@test ".stats is key value lines, one fact per line" {
	mkdir -p "$MNT/t/p"
	run awk 'NF != 2 || $1 !~ /^[a-z_]+$/' "$MNT/.stats"
	assert_success
	assert_output ''
	run awk 'NF != 2 || $1 !~ /^[a-z_]+$/' "$MNT/t/.stats"
	assert_success
	assert_output ''
	run bash -c 'awk "{print \$1}" "$1/.stats" | sort | uniq -d' _ "$MNT"
	assert_output ''
}

@test "a new mount's .stats: ready, an instance id, uptime and zero counts" {
	run stat_of state
	assert_output ready
	run stat_of instance
	assert_output --regexp '^[0-9a-f]+$'
	run stat_of uptime_ms
	assert_output --regexp '^[0-9]+$'
	local key
	for key in tenants parents children links tombstones bytes; do
		run stat_of "$key"
		assert_output 0
	done
}

@test "the root's .stats names the daemon's pid, which SIGTERM ends; a tenant's has none" {
	run stat_of pid
	assert_success
	assert_output "$STATEFS_PID"
	kill -0 "$output"
	[ "$(readlink "/proc/$output/exe")" = "$(realpath "$STATEFS_BIN")" ]
	mkdir "$MNT/t"
	run stat_of pid "$MNT/t"
	assert_failure
	# What the man page tells whoever did not start it: find it, end it.
	kill -TERM "$(stat_of pid)"
	statefs_wait_exit 30
	[ "$STATEFS_STATUS" -eq 0 ]
	run grep -F " $MNT " /proc/mounts
	assert_failure
}

@test "uptime grows" {
	local a b
	a=$(stat_of uptime_ms)
	sleep 0.3
	b=$(stat_of uptime_ms)
	[ "$b" -ge $((a + 200)) ]
}

@test "the root .stats lists every ceiling and quota with its value" {
	statefs_remount -o max_tenants=7,max_parents=8,max_children=9,max_bytes=100000,max_payload=1000,max_name=20,max_tombstones=5,parent_quota=3,tenant_quota=4
	run stat_of max_tenants
	assert_output 7
	run stat_of max_parents
	assert_output 8
	run stat_of max_children
	assert_output 9
	run stat_of max_bytes
	assert_output 100000
	run stat_of max_payload
	assert_output 1000
	run stat_of max_name
	assert_output 20
	run stat_of max_tombstones
	assert_output 5
	run stat_of parent_quota
	assert_output 3
	run stat_of tenant_quota
	assert_output 4
}

@test "the documented defaults show in .stats: max_name 255, max_payload 64 KiB, drain_window 30 s" {
	run stat_of max_name
	assert_output 255
	run stat_of max_payload
	assert_output 65536
	run stat_of drain_window_ms
	assert_output 30000
}

@test "root .stats counts tenants, parents, children, links, tombstones and bytes" {
	mkdir -p "$MNT/t/a" "$MNT/t/b" "$MNT/u/a" "$MNT/t/gone"
	printf 12345 >"$MNT/t/a/c1"
	printf 123 >"$MNT/t/a/c2"
	touch "$MNT/t/b/c3"
	printf 12 >"$MNT/u/a/c4"
	ln "$MNT/t/a/c1" "$MNT/t/b/c1"
	rmdir "$MNT/t/gone"
	run stat_of tenants
	assert_output 2
	run stat_of parents
	assert_output 3
	run stat_of children
	assert_output 4
	run stat_of links
	assert_output 5
	run stat_of tombstones
	assert_output 1
	run stat_of bytes
	assert_output 10
}

@test "counts go back down as nodes are removed" {
	mkdir -p "$MNT/t/a" "$MNT/u/a"
	printf 12345 >"$MNT/t/a/c"
	printf 123 >"$MNT/u/a/c"
	rm "$MNT/t/a/c"
	run stat_of children
	assert_output 1
	run stat_of bytes
	assert_output 3
	rmdir "$MNT/u"
	run stat_of tenants
	assert_output 1
	run stat_of parents
	assert_output 1
	run stat_of children
	assert_output 0
	run stat_of bytes
	assert_output 0
}

@test "a tenant's .stats counts only that tenant" {
	mkdir -p "$MNT/t/a" "$MNT/t/b" "$MNT/u/a"
	printf 12345 >"$MNT/t/a/c1"
	touch "$MNT/t/b/c2"
	ln "$MNT/t/a/c1" "$MNT/t/b/c1"
	printf 1234567 >"$MNT/u/a/c"
	echo z >"$MNT/t/.depart"
	run stat_of parents "$MNT/t"
	assert_output 2
	run stat_of children "$MNT/t"
	assert_output 2
	run stat_of links "$MNT/t"
	assert_output 3
	run stat_of tombstones "$MNT/t"
	assert_output 1
	run stat_of bytes "$MNT/t"
	assert_output 5
	run stat_of parents "$MNT/u"
	assert_output 1
	run stat_of bytes "$MNT/u"
	assert_output 7
	run stat_of tenant "$MNT/t"
	assert_output t
}

@test "admissions, removals, joins and leaves are counted" {
	mkdir -p "$MNT/t/p"
	touch "$MNT/t/p/a" "$MNT/t/p/b"
	rm "$MNT/t/p/a"
	rmdir "$MNT/t/p"
	run stat_of joins
	assert_output 1
	run stat_of leaves
	assert_output 1
	local adm rem
	adm=$(stat_of admissions)
	rem=$(stat_of removals)
	[ "$adm" -ge 2 ]
	[ "$rem" -ge 1 ]
}

@test "a lost compare-and-swap is counted as refused_conflict" {
	mkdir -p "$MNT/t/p"
	echo x >"$MNT/t/p/c"
	run python3 - "$MNT/t/p/c" <<'EOF'
import os, sys
path = sys.argv[1]
fd = os.open(path, os.O_RDWR)
with open(path, 'w') as f:
    f.write('other\n')
os.write(fd, b'mine')
try:
    os.close(fd)
except OSError:
    pass
EOF
	run stat_of refused_conflict
	assert_output 1
}

@test "the counters are consistent with what ls shows" {
	mkdir -p "$MNT/t/p" "$MNT/t/q" "$MNT/u/p"
	local i
	for i in $(seq 7); do touch "$MNT/t/p/c$i"; done
	for i in $(seq 3); do touch "$MNT/u/p/c$i"; done
	rm "$MNT/t/p/c2" "$MNT/t/p/c5"
	run stat_of tenants
	assert_output "$(ls "$MNT" | wc -l)"
	run stat_of parents
	assert_output "$(find "$MNT" -mindepth 2 -maxdepth 2 -type d | wc -l)"
	run stat_of children
	assert_output "$(find "$MNT" -mindepth 3 -type f | wc -l)"
}

@test "every mount is a new, empty store instance with a new instance id" {
	mkdir -p "$MNT/t/p"
	touch "$MNT/t/p/c"
	local first
	first=$(stat_of instance)
	statefs_remount
	run stat_of instance
	refute_output "$first"
	run ls -A "$MNT"
	assert_output $'.drain\n.events\n.snapshot\n.stats'
	run stat_of children
	assert_output 0
}
