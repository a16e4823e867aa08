#!/bin/sh
# Regenerate the committed seed corpus in tests/fuzz/corpus/ (run from
# anywhere; it overwrites only the seeds named here).  The encodings
# follow the decoders in fuzz_layout.c, fuzz_store.c (and its parts in
# store/) and fuzz_shared.c (and shared/): change one, and change this
# file with it.
set -eu
cd "$(dirname "$0")"

# bytes N...: the bytes with these decimal values
bytes() {
	for x in "$@"; do
		# shellcheck disable=SC2059
		printf "\\$(printf '%03o' "$x")"
	done
}

# --- fuzz_layout: MAX_NAME SELECTOR TEXT ----------------------------------------

L=corpus/fuzz_layout
mkdir -p "$L"
lay() { { bytes "$2" "$3"; printf '%s' "$4"; } >"$L/$1"; }
lay name 255 0 'worker-1'
lay name-utf8 4 0 "$(printf 'caf\303\251')"
lay depart-tight 8 68 "$(printf 'job-42\n')"
lay seconds 255 7 '1.5'
lay seconds-nl 255 10 "$(printf '600\n')"
lay option 255 4 'max_payload=16777216'
lay option-flag 255 12 'testclock=1'
lay special 255 0 '.stats'
# check_remote: SELECTOR % 8 picks store=, store=redis://, store=unix:,
# store=sentinel://, store_prefix=, ...
lay remote-tcp 255 1 '127.0.0.1:6379'
lay remote-unix 255 2 '/run/redis/redis.sock'
lay remote-sentinel 255 3 'a:1,[::1]:26379/mymaster'
lay remote-url 255 8 'sentinel://h:1,h:2'

# --- fuzz_store: CONFIG then operations -----------------------------------------
#
# Each operation is an op byte (enum op in store/ops.c) and a path byte
# (tenant | parent << 1 | child << 3 | extra << 5), then what the op takes.

S=corpus/fuzz_store
mkdir -p "$S"
p() { echo $(($1 | $2 << 1 | $3 << 3 | ${4:-0} << 5)); }

mkdir_t() { bytes 0 "$(p "$1" 0 0)"; }
rmdir_t() { bytes 1 "$(p "$1" 0 0)"; }
join() { bytes 2 "$(p "$1" "$2" 0)"; }
leave() { bytes 3 "$(p "$1" "$2" 0)"; }
depart() { bytes 4 "$(p "$1" "$2" 0)"; }
create() { bytes 5 "$(p "$1" "$2" "$3" "${4:-0}")"; }     # 4: 1 = excl
# publish T P C MODE(0 replace, 1 append, 2 cas at 1) BYTE...
publish() {
	t=$1 pp=$2 c=$3 mode=$4
	shift 4
	bytes 6 "$(p "$t" "$pp" "$c" "$mode")" $(($# - 1)) "$@"
}
truncate_() { bytes 7 "$(p "$1" "$2" "$3")" "$4"; }
unlink_() { bytes 8 "$(p "$1" "$2" "$3")"; }
link_() { bytes 9 "$(p "$1" "$2" "$3")" "$(p "$4" "$5" "$6")"; }
# rename T P C T2 P2 C2 FLAGS (1 noreplace, 2 exchange)
rename_() { bytes 10 "$(p "$1" "$2" "$3" "$7")" "$(p "$4" "$5" "$6")"; }
# set_ttl T P C(-1: the parent) TTL-INDEX (0 100 ... see TTLS)
set_ttl() {
	if [ "$3" -lt 0 ]; then bytes 11 "$(p "$1" "$2" 0 0)" "$4"
	else bytes 11 "$(p "$1" "$2" "$3" 1)" "$4"; fi
}
renew() {
	if [ "$3" -lt 0 ]; then bytes 12 "$(p "$1" "$2" 0 0)" 0
	else bytes 12 "$(p "$1" "$2" "$3" 1)" 0; fi
}
child_ttl() { bytes 13 "$(p "$1" "$2" 0)" "$3"; }
# advance INDEX (1 50 99 100 250 500 1000 3000 ms)
advance() { bytes 14 "$(p $(($1 & 1)) 0 0 $(($1 >> 1)))"; }
drain() { bytes 15 "$(p "$1" 0 0)"; }
drain_store() { bytes 15 "$(p 0 0 0 7)"; }
# stage_open SLOT T P C MODE(0 read, 1 replace, 2 append, 3 cas)
stage_open() { bytes 16 "$(p "$2" "$3" "$4" $(($1 | $5 << 1)))"; }
stage_write() { s=$1; shift; bytes 17 "$(p "$s" 0 0)" $(($# - 1)) "$@"; }
stage_publish() { bytes 18 "$(p "$1" 0 0)"; }
stage_read() { bytes 19 "$(p "$1" 0 0)"; }
stage_close() { bytes 20 "$(p "$1" 0 0)"; }
handle() { bytes 23 "$(p "$2" "$3" 0 "$1")"; }
handle_create() { bytes 24 "$(p 0 0 "$2" "$1")"; }
handle_list() { bytes 27 "$(p 0 0 0 "$1")"; }
stage_truncate() { bytes 28 "$(p "$1" 0 0)" "$2"; }
stage_flush() { bytes 29 "$(p "$1" 0 0)"; }
lazy_advance() { bytes 30 "$(p $(($1 & 1)) 0 0 $(($1 >> 1)))"; }
# wrong_depth KIND(0..7, see OP_WRONG_DEPTH) T P C
wrong_depth() { bytes 31 "$(p "$2" "$3" "$4" "$1")"; }
# snapshot_store MASK / snapshot_tenant T MASK: the next operations run at
# the snapshot's steps whose bit is set in MASK
snapshot_store() { bytes 32 "$(p 0 0 0 0)" "$1"; }
snapshot_tenant() { bytes 32 "$(p "$1" 0 0 1)" "$2"; }

{
	bytes 0
	mkdir_t 0; join 0 0; join 0 1
	create 0 0 0 1; create 0 0 0 1; create 0 0 0
	publish 0 0 0 0 97 98; publish 0 0 0 1 99 100
	link_ 0 0 0 0 1 1; publish 0 1 1 1 101
	rename_ 0 0 0 0 1 2 0; unlink_ 0 1 1; truncate_ 0 1 2 5
	leave 0 0; join 0 0; leave 0 1
} >"$S/tree"

{
	bytes 1
	mkdir_t 1; join 1 0; set_ttl 1 0 -1 3; create 1 0 0
	advance 3; renew 1 0 -1; advance 4; join 1 0
	child_ttl 1 0 2; create 1 0 1; set_ttl 1 0 1 6; advance 6
	depart 1 2; depart 1 1; depart 1 2; advance 7
} >"$S/leases"

{
	bytes 0
	mkdir_t 0; join 0 2; create 0 2 1
	stage_open 0 0 2 1 3; stage_open 1 0 2 1 0
	publish 0 2 1 0 120; stage_write 0 121 122
	stage_read 1; stage_publish 0; stage_read 0; stage_read 1
	stage_open 0 0 2 1 2; stage_write 0 1 2 3 4; unlink_ 0 2 1
	stage_publish 0; stage_close 0; stage_close 1
} >"$S/stages"

{
	bytes 2
	mkdir_t 0; mkdir_t 1; join 0 0; join 1 0; join 1 1
	create 0 0 0; create 1 0 0; create 1 1 1
	drain 1; unlink_ 1 0 0; create 1 1 2; join 1 2
	unlink_ 1 1 1; drain_store; publish 0 0 0 0 1; advance 5
	mkdir_t 0
} >"$S/drain"

# The ceilings from one tenant: config 8, no tenant shares.
{
	bytes 8
	mkdir_t 0; join 0 0; join 0 1; join 0 2
	create 0 0 0; create 0 0 1; create 0 0 2; create 0 1 0
	create 0 1 1; create 0 1 2; create 0 2 0; link_ 0 0 0 0 2 1
	publish 0 0 0 0 1 2 3 4; publish 0 0 1 0 1 2 3 4
	publish 0 0 2 0 1 2 3 4; publish 0 1 0 0 1 2 3 4
	publish 0 1 0 1 5 6 7 8; publish 0 1 1 1 5
	depart 0 0; depart 0 1; leave 0 2; depart 0 0
} >"$S/capacity"

# The default tenant shares: t0 fills each of its own, t1 still gets in.
{
	bytes 0
	mkdir_t 0; mkdir_t 1; join 0 0; join 0 1; join 0 2
	create 0 0 0; create 0 0 1; create 0 1 0; create 0 1 1
	publish 0 0 0 0 1 2 3 4; publish 0 0 1 0 1 2 3 4
	publish 0 1 0 0 1 2 3 4
	join 1 0; create 1 0 0; publish 1 0 0 0 1 2 3 4
	depart 0 2; leave 0 1; depart 1 2; leave 1 0
} >"$S/shares"

{
	bytes 0
	mkdir_t 0; join 0 0; handle 0 0 0; handle 1 0 0
	leave 0 0; join 0 0; handle_create 0 1; handle_list 0
	handle 0 0 0; handle_create 0 1; handle_list 0
	bytes 1 0; handle_list 1; handle_create 1 2
} >"$S/handles"

{
	bytes 0
	mkdir_t 0; join 0 0; join 0 1; create 0 0 0; create 0 1 3
	link_ 0 0 0 0 1 2; set_ttl 0 0 0 2; set_ttl 0 1 -1 3
	lazy_advance 3; join 0 0; lazy_advance 4; create 0 0 0
	wrong_depth 0 0 0 0; wrong_depth 1 0 0 0; wrong_depth 2 0 0 0
	wrong_depth 4 0 0 0; wrong_depth 5 0 0 0; wrong_depth 7 0 0 0
} >"$S/lazy"

{
	bytes 0
	mkdir_t 0; join 0 0; create 0 0 0; publish 0 0 0 0 1 2 3
	stage_open 0 0 0 0 1; stage_flush 0; stage_write 0 9; stage_flush 0
	stage_open 1 0 0 0 3; stage_truncate 1 1; stage_read 1
	publish 0 0 0 0 4; stage_flush 1; stage_truncate 1 12; stage_close 1
} >"$S/truncate"

# A truncated O_APPEND file replaces the content: in a tenant whose byte
# share is held by another open file, a cut below the content fits.
{
	bytes 0
	mkdir_t 0; join 0 0; create 0 0 0; publish 0 0 0 0 1 2 3
	stage_open 0 0 0 0 1; stage_truncate 0 6
	stage_open 1 0 0 0 2; stage_truncate 1 1; stage_read 1
	stage_flush 1; stage_flush 0; stage_close 1; stage_close 0
} >"$S/truncate-append"

{
	bytes 0
	mkdir_t 0; mkdir_t 1; join 0 0; join 0 1; join 1 0
	create 0 0 0; create 0 0 1; create 0 1 2; create 1 0 0
	link_ 0 0 0 0 1 3; publish 0 0 0 0 1 2; join 1 1; leave 1 1
	snapshot_store 255
	publish 0 0 0 1 3; rename_ 0 0 1 0 1 1 0; leave 0 1; unlink_ 1 0 0
	depart 0 2; rmdir_t 1; join 0 1; create 0 0 2
	snapshot_tenant 0 7
	set_ttl 0 0 -1 1; advance 0
} >"$S/snapshot"

# --- fuzz_shared: CONFIG then operations ----------------------------------------
#
# The same framing as fuzz_store (an op byte, enum op in shared/ops.c,
# then a path byte and what the op takes), with its own op numbers; the
# extra bits (x) of the path byte pick the variant: the owner of a mkdir
# or create, the credentials of a removal (0 none, 1 the first owner, 2
# another user), excl, a publication's mode, a rename's flags, a stage
# slot and mode, the clock step.

H=corpus/fuzz_shared
mkdir -p "$H"
h_mkdir_t() { bytes 0 "$(p "$1" 0 0 "${2:-0}")"; }
h_rmdir_t() { bytes 1 "$(p "$1" 0 0 "${2:-0}")"; }
h_join() { bytes 2 "$(p "$1" "$2" 0 "${3:-0}")"; }
h_leave() { bytes 3 "$(p "$1" "$2" 0 "${3:-0}")"; }
h_depart() { bytes 4 "$(p "$1" "$2" 0 "${3:-0}")"; }
h_create() { bytes 5 "$(p "$1" "$2" "$3" "${4:-0}")"; }  # 4: 1 excl, 2 owner 2
# h_publish T P C MODE(0 replace, 1 append, 2 cas) BYTE...
h_publish() {
	t=$1 pp=$2 c=$3 mode=$4
	shift 4
	bytes 6 "$(p "$t" "$pp" "$c" "$mode")" $# "$@"
}
h_truncate() { bytes 7 "$(p "$1" "$2" "$3")" "$4"; }
h_unlink() { bytes 8 "$(p "$1" "$2" "$3")"; }
h_link() { bytes 9 "$(p "$1" "$2" "$3")" "$(p "$4" "$5" "$6")"; }
h_rename() { bytes 10 "$(p "$1" "$2" "$3" "$7")" "$(p "$4" "$5" "$6")"; }
# h_set_ttl T P C(-1: the parent) TTL-INDEX (0 1 100 250 500 700 1000 2000)
h_set_ttl() {
	if [ "$3" -lt 0 ]; then bytes 11 "$(p "$1" "$2" 0 0)" "$4"
	else bytes 11 "$(p "$1" "$2" "$3" 1)" "$4"; fi
}
h_renew() { bytes 12 "$(p "$1" "$2" 0 0)" 0; }
h_child_ttl() { bytes 13 "$(p "$1" "$2" 0)" "$3"; }
# h_advance INDEX (1 50 99 100 250 500 1000 3000 ms)
h_advance() { bytes 14 "$(p 0 0 0 "$1")"; }
h_drain() { bytes 15 "$(p "$1" 0 0 "${2:-0}")"; }        # 2: credentials
h_drain_store() { bytes 15 "$(p 0 0 0 7)"; }
h_drain_now() { bytes 15 "$(p 0 0 0 6)"; }
# h_stage_open SLOT T P C MODE(0 read, 1 replace, 2 append, 3 cas)
h_stage_open() { bytes 16 "$(p "$2" "$3" "$4" $(($1 | $5 << 1)))"; }
h_stage_write() { s=$1; shift; bytes 17 "$(p "$s" 0 0)" $# "$@"; }
h_stage_publish() { bytes 18 "$(p "$1" 0 0)"; }
h_stage_read() { bytes 19 "$(p "$1" 0 0)"; }
h_stage_close() { bytes 20 "$(p "$1" 0 0)"; }
h_stage_flush() { bytes 22 "$(p "$1" 0 0)"; }
h_handle() { bytes 23 "$(p "$2" "$3" 0 "$1")"; }
h_handle_create() { bytes 24 "$(p 0 0 "$2" "$1")"; }
h_handle_list() { bytes 25 "$(p 0 0 0 "$1")"; }
# h_chmod T P C WHICH(0 tenant, 1 parent, 2 child) MODE-INDEX
h_chmod() { bytes 26 "$(p "$1" "$2" "$3" "$4")" "$5"; }
h_wrong_depth() { bytes 27 "$(p "$2" "$3" "$4" "$1")"; }

{
	bytes 0
	h_mkdir_t 0; h_join 0 0; h_join 0 1; h_create 0 0 0 1; h_create 0 0 0 1
	h_create 0 0 1; h_publish 0 0 0 0 97 98; h_publish 0 0 0 1 99
	h_publish 0 0 0 2 100; h_link 0 0 0 0 1 2; h_publish 0 1 2 1 101
	h_rename 0 0 1 0 1 3 0; h_rename 0 0 0 0 1 3 2; h_unlink 0 1 2
	h_truncate 0 1 3 5; h_leave 0 0; h_join 0 0; h_depart 0 2
	h_rmdir_t 0
} >"$H/tree"

{
	bytes 1
	h_mkdir_t 1; h_join 1 0; h_set_ttl 1 0 -1 3; h_create 1 0 0
	h_advance 3; h_renew 1 0; h_advance 4; h_join 1 0
	h_child_ttl 1 0 2; h_create 1 0 1; h_set_ttl 1 0 1 6; h_advance 6
	h_depart 1 2; h_depart 1 1; h_depart 1 2; h_advance 7
} >"$H/leases"

{
	bytes 0
	h_mkdir_t 0; h_join 0 2; h_create 0 2 1
	h_stage_open 0 0 2 1 3; h_stage_open 1 0 2 1 0
	h_publish 0 2 1 0 120; h_stage_write 0 121 122
	h_stage_read 1; h_stage_publish 0; h_stage_read 0; h_stage_read 1
	h_stage_open 0 0 2 1 2; h_stage_write 0 1 2 3 4; h_unlink 0 2 1
	h_stage_publish 0; h_stage_flush 0; h_stage_close 0; h_stage_close 1
} >"$H/stages"

{
	bytes 2
	h_mkdir_t 0; h_mkdir_t 1; h_join 0 0; h_join 1 0; h_join 1 1
	h_create 0 0 0; h_create 1 0 0; h_create 1 1 1
	h_drain 1; h_unlink 1 0 0; h_create 1 1 2; h_join 1 2
	h_unlink 1 1 1; h_drain_store; h_publish 0 0 0 0 1; h_advance 5
	h_mkdir_t 0; h_drain_now
} >"$H/drain"

{
	bytes 8
	h_mkdir_t 0; h_join 0 0; h_join 0 1; h_join 0 2
	h_create 0 0 0; h_create 0 0 1; h_create 0 0 2; h_create 0 1 0
	h_create 0 1 1; h_create 0 1 2; h_create 0 2 0; h_link 0 0 0 0 2 1
	h_publish 0 0 0 0 1 2 3 4; h_publish 0 0 1 0 1 2 3 4
	h_publish 0 0 2 0 1 2 3 4; h_publish 0 1 0 0 1 2 3 4 5 6 7 8 9
	h_depart 0 0; h_depart 0 1; h_leave 0 2; h_depart 0 0
} >"$H/capacity"

# Owners and modes: removals as another user, sticky and closed parents.
{
	bytes 0
	h_mkdir_t 0 1; h_join 0 0 1; h_join 0 1; h_create 0 0 0 2
	h_create 0 1 1; h_leave 0 0 2; h_chmod 0 1 0 1 1; h_leave 0 1 2
	h_chmod 0 0 0 0 4; h_depart 0 1 2; h_rmdir_t 0 2; h_drain 0 2
	h_chmod 0 0 0 0 2; h_rmdir_t 0 1
} >"$H/owners"

{
	bytes 0
	h_mkdir_t 0; h_join 0 0; h_handle 0 0 0; h_handle 1 0 0
	h_leave 0 0; h_join 0 0; h_handle_create 0 1; h_handle_list 0
	h_handle 0 0 0; h_handle_create 0 1; h_handle_list 0
	h_wrong_depth 0 0 0 0; h_wrong_depth 1 0 0 0; h_wrong_depth 2 0 0 1
	h_wrong_depth 3 0 0 0; h_wrong_depth 4 0 0 1; h_wrong_depth 5 0 0 0
	h_wrong_depth 6 0 0 0; h_wrong_depth 7 0 0 0
} >"$H/handles"

# A drain of the store whose clear takes a tenant with its tombstones.
{
	bytes 8
	h_mkdir_t 0; h_depart 0 0; h_depart 0 0; h_drain_store
} >"$H/drain-tombstones"

# A lease and a drain of the store due at one clock step: the lease ends
# as an expiry first (counted), then the drain clears the rest.
{
	bytes 0
	h_mkdir_t 0; h_mkdir_t 1; h_join 1 0; h_set_ttl 1 0 -1 1
	h_create 1 0 1; h_drain_store; h_advance 5
} >"$H/expire-then-drain"

# A parent and its child due at the same instant (the child's lease set
# first): the parent goes first, its child a removal.
{
	bytes 1
	h_mkdir_t 1; h_join 1 0; h_child_ttl 1 0 6; h_create 1 0 1
	h_set_ttl 1 0 -1 6; h_advance 7
} >"$H/tie-parent-child"
