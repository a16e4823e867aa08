#!/usr/bin/env bats
# The Redis Cluster harness (cluster_helpers.bash) the shared store's
# cluster run and scripts/bench/cluster.sh stand on, checked with
# redis-cli alone: a 3+3 cluster forms, keys route, a manual failover and
# a killed primary keep what was written, a slot moved with its keys
# keeps them and is redirected at its old owner, and nothing outlives a
# test.  Each test starts its own cluster and stops it in teardown, also
# when it failed.  No mount: it loads redis_helpers only, so the shared
# store's run (scripts/run-tests.sh, redis_suites) does not run it again.

# bats file_tags=cluster

load redis_helpers

teardown() {
	# The ports of this test's nodes, for the last test to check.
	echo "${CLUSTER_PORTS[*]}" >>"$BATS_FILE_TMPDIR/ports"
	redis_stop_all
}

# Every node answers on its port and every key is reachable from any.
@test "a 3+3 cluster forms: ok on every node, 3 primaries and 3 synced replicas" {
	cluster_start
	[ "${#CLUSTER_PORTS[@]}" -eq 6 ]
	[ "${#REDIS_PIDS[@]}" -eq 6 ]
	local p prim=0 repl=0
	for p in "${CLUSTER_PORTS[@]}"; do
		run ccli "$p" CLUSTER INFO
		assert_output --partial cluster_state:ok
		assert_output --partial cluster_slots_assigned:16384
		case $(ccli "$p" ROLE | head -n 1) in
		master) prim=$((prim + 1)) ;;
		slave) repl=$((repl + 1)) ;;
		esac
	done
	[ "$prim" -eq 3 ]
	[ "$repl" -eq 3 ]
	# CLUSTER_SEEDS names the primaries, CLUSTER_PORTS lists them first.
	[[ $CLUSTER_SEEDS == "127.0.0.1:${CLUSTER_PORTS[0]},127.0.0.1:${CLUSTER_PORTS[1]},127.0.0.1:${CLUSTER_PORTS[2]}" ]]
	for p in "${CLUSTER_PORTS[@]:0:3}"; do
		[ "$(ccli "$p" ROLE | head -n 1)" = master ]
	done
}

@test "keys route: ccli -c from any node, each stored on the primary of its slot" {
	cluster_start
	local k p owner
	for k in a b c '{statefs.t1}:t' '{statefs.t2}:t' '{statefs.t3}:t'; do
		run ccli "${CLUSTER_PORTS[5]}" -c SET "$k" "v-$k"
		assert_output OK
	done
	for k in a b c '{statefs.t1}:t' '{statefs.t2}:t' '{statefs.t3}:t'; do
		owner=$(cluster_primary_of_key "$k")
		[ -n "$owner" ]
		# The owner answers itself; every other node redirects there.
		run ccli "$owner" GET "$k"
		assert_output "v-$k"
		for p in "${CLUSTER_PORTS[@]}"; do
			run ccli "$p" -c GET "$k"
			assert_output "v-$k"
		done
	done
	# The three primaries between them hold the six keys.
	local sum=0
	for p in "${CLUSTER_PORTS[@]:0:3}"; do
		sum=$((sum + $(ccli "$p" DBSIZE)))
	done
	[ "$sum" -eq 6 ]
}

@test "a manual failover keeps a key written before it" {
	cluster_start
	local owner repl
	ccli "${CLUSTER_PORTS[0]}" -c SET before-failover kept >/dev/null
	owner=$(cluster_primary_of_key before-failover)
	# ROLE of a primary: master, offset, then ip, port, offset a replica.
	repl=$(ccli "$owner" ROLE | sed -n 4p)
	[ -n "$repl" ]
	ccli "$owner" WAIT 1 5000 >/dev/null
	cluster_failover "$repl"
	[ "$(cluster_primary_of_key before-failover)" = "$repl" ]
	[ "$(ccli "$owner" ROLE | head -n 1)" = slave ]
	run ccli "$repl" GET before-failover
	assert_output kept
	run ccli "$owner" -c GET before-failover
	assert_output kept
}

@test "a killed primary is replaced by its replica; the other shards answer throughout" {
	cluster_start
	local victim others=() p i
	# 300 keys, about a third on each primary.
	for ((i = 0; i < 300; i++)); do
		ccli "${CLUSTER_PORTS[0]}" -c SET "k{$i}" "v$i" >/dev/null
	done
	victim=${CLUSTER_PORTS[1]}
	ccli "$victim" WAIT 1 5000 >/dev/null
	others=("${CLUSTER_PORTS[0]}" "${CLUSTER_PORTS[2]}")
	# A key served by each of the other two primaries.
	local mine=() k
	for p in "${others[@]}"; do
		for ((i = 0; i < 300; i++)); do
			[ "$(cluster_primary_of_key "k{$i}")" = "$p" ] && break
		done
		mine+=("$i")
	done
	# While the failover runs, the other shards answer for their keys.
	(
		for ((k = 0; k < 40; k++)); do
			for i in 0 1; do
				[ "$(ccli "${others[i]}" GET "k{${mine[i]}}")" = "v${mine[i]}" ] ||
					echo "${others[i]} did not answer k{${mine[i]}}"
			done
			sleep 0.1
		done
	) >"$BATS_TEST_TMPDIR/during" 2>&1 3>&- &
	local watcher=$!
	cluster_kill_primary "$victim"
	wait "$watcher"
	run cat "$BATS_TEST_TMPDIR/during"
	assert_output ''
	# Every key, on whichever shard, is still there.
	for ((i = 0; i < 300; i++)); do
		[ "$(ccli "${others[0]}" -c GET "k{$i}")" = "v$i" ] ||
			fail "k{$i} lost after the failover"
	done
	[ -z "$(cluster_primary_of_key 'k{0}' | grep -x "$victim")" ]
}

@test "a slot moved with keys in it keeps them; its old owner answers MOVED" {
	cluster_start
	local slot from to i
	for ((i = 0; i < 250; i++)); do
		ccli "${CLUSTER_PORTS[0]}" -c SET "{moving}:$i" "v$i" >/dev/null
	done
	slot=$(ccli "${CLUSTER_PORTS[0]}" CLUSTER KEYSLOT '{moving}')
	from=$(cluster_primary_of_slot "$slot")
	for to in "${CLUSTER_PORTS[@]:0:3}"; do
		[ "$to" != "$from" ] && break
	done
	cluster_move_slot "$slot" "$to"
	[ "$(cluster_primary_of_slot "$slot")" = "$to" ]
	[ "$(ccli "$to" CLUSTER COUNTKEYSINSLOT "$slot")" -eq 250 ]
	[ "$(ccli "$from" CLUSTER COUNTKEYSINSLOT "$slot")" -eq 0 ]
	run ccli "$from" GET '{moving}:7'
	assert_output "MOVED $slot 127.0.0.1:$to"
	run ccli "$from" -c GET '{moving}:249'
	assert_output v249
	cluster_wait_ok
}

@test "the library loads on every primary" {
	cluster_start
	cluster_load_library
	local p
	for p in "${CLUSTER_PORTS[@]:0:3}"; do
		run ccli "$p" FUNCTION LIST
		assert_output --partial statefs
	done
}

# The shared store's cluster run (helpers.bash, STATEFS_STORE=cluster):
# one cluster for a bats file, up before its first test, the same for
# every test, stopped after the last even when a test failed.  A file of
# three tests (the last fails on purpose) run by a bats of its own, with
# no mount.
@test "STATEFS_STORE=cluster: one cluster for the file, stopped after it, also on failure" {
	local d=$BATS_TEST_TMPDIR/suite p
	mkdir -p "$d"
	cp "$BATS_TEST_DIRNAME"/*.bash "$d"/
	# (%: bats would read @test at the start of a line here as its own,
	# scripts/run-tests.sh a load of helpers as a suite of its group.)
	sed 's/^%//' >"$d/mode.bats" <<'SUITE'
%load helpers
%@test "the file's cluster is up" {
	run ccli "${CLUSTER_PORTS[0]}" CLUSTER INFO
	assert_output --partial cluster_state:ok
	[ "${#CLUSTER_PORTS[@]}" -eq 6 ]
	[[ $CLUSTER_SEEDS == 127.0.0.1:*,127.0.0.1:*,127.0.0.1:* ]]
	echo "$CLUSTER_PORT_LIST" >"$OUT/ports"
}
%@test "the second test has the same cluster, with the library" {
	[ "$CLUSTER_PORT_LIST" = "$(cat "$OUT/ports")" ]
	run ccli "${CLUSTER_PORTS[1]}" FUNCTION LIST
	assert_output --partial statefs
	ccli "${CLUSTER_PORTS[2]}" -c SET x y
}
%@test "a failing test" {
	false
}
SUITE
	OUT=$BATS_TEST_TMPDIR REDIS_LIBRARY=$REDIS_LIBRARY STATEFS_STORE=cluster \
		run bats --tap "$d/mode.bats"
	[ "$status" -eq 1 ]
	assert_line 'ok 1 the file'"'"'s cluster is up'
	assert_line 'ok 2 the second test has the same cluster, with the library'
	assert_line 'not ok 3 a failing test'
	for p in $(cat "$BATS_TEST_TMPDIR/ports"); do
		[ -z "$(ss -Hltn "sport = :$p")" ] || fail "a node still listens on $p"
	done
}

# scripts/bench/cluster.sh's statistics, without a mount: its own
# cluster, 300 tenant hash tags over the 3 primaries, each primary's
# share of 1200 FCALLs, and its nodes gone when it ends.
@test "scripts/bench/cluster.sh --selftest: the tenants' spread and each primary's share" {
	run "$BATS_TEST_DIRNAME/../../scripts/bench/cluster.sh" --selftest 300 4
	assert_success
	assert_line --partial "self test: 1200 FCALLs"
	local n sum=0 fc=0 p ports
	while read -r n; do
		sum=$((sum + n))
	done < <(sed -n 's/^  primary [0-9]*: \([0-9]*\) tenants$/\1/p' <<<"$output")
	[ "$sum" -eq 300 ]
	[ "$(grep -c ' tenants$' <<<"$output")" -eq 3 ]
	while read -r n; do
		fc=$((fc + n))
	done < <(awk '$2 ~ /^[0-9]+$/ && $4 ~ /%$/ { print $3 }' <<<"$output")
	[ "$fc" -eq 1200 ]
	assert_line --partial "computed, not measured"
	ports=$(sed -n 's/^cluster: primaries \(.*\), replicas \(.*\)$/\1 \2/p' <<<"$output")
	[ -n "$ports" ]
	for p in $ports; do
		[ -z "$(ss -Hltn "sport = :$p")" ] || fail "a node of cluster.sh still listens on $p"
	done
}

@test "teardown left no redis-server of an earlier test" {
	local p ports
	[ "${#REDIS_PIDS[@]}" -eq 0 ]
	read -r -d '' ports <"$BATS_FILE_TMPDIR/ports" || :
	[ -n "${ports// /}" ]
	for p in $ports; do
		[ -z "$(ss -Hltn "sport = :$p")" ] || fail "a node still listens on $p"
		! pgrep -f "^redis-server 127.0.0.1:$p " >/dev/null ||
			fail "a redis-server of port $p still runs"
	done
}
