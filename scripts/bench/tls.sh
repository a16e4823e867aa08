#!/bin/bash
# scripts/bench/tls.sh - `make bench-tls`: the cost of TLS per transition
# of the shared store.  One redis-server listens on a loopback TCP port
# and a loopback TLS port (certificates made by openssl(1) in the work
# directory); statefs mounts it once as redis://127.0.0.1:PORT and once
# as rediss://127.0.0.1:TLSPORT, each mount in a tenant of its own, and
# the point phases of scripts/bench/loadgen.c (create, stat, read,
# rename, unlink) run on each in turn, BENCH_TLS_REPS rounds of
# BENCH_TLS_OPS operations with one thread, alternating, so both see the
# same machine.  Prints each phase's median ops/s on both and the
# difference per operation in microseconds (what encryption costs a
# transition, a round trip to Redis each), and writes every round to
# build/bench/tls.tsv.  Every mount and the server are undone on exit.
#
#   BENCH_TLS_OPS=2000 BENCH_TLS_REPS=5
set -euo pipefail
cd "$(dirname "$0")/../.."

B=build/bench
OPS=${BENCH_TLS_OPS:-2000}
REPS=${BENCH_TLS_REPS:-5}
W=$(mktemp -d /tmp/statefs-bench-tls.XXXXXX)
PIDS=()

cleanup() {
	for m in "$W/tcp" "$W/tls"; do
		mountpoint -q "$m" 2>/dev/null && fusermount3 -u "$m" 2>/dev/null || true
	done
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$W"
}
trap cleanup EXIT

port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

(
	cd "$W"
	key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }
	key ca
	openssl req -x509 -new -key ca.key -out ca.crt -days 2 -subj /CN=ca 2>/dev/null
	key server
	openssl req -new -key server.key -out server.csr -subj /CN=server 2>/dev/null
	echo 'subjectAltName=IP:127.0.0.1' >server.ext
	openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
		-days 2 -out server.crt -extfile server.ext 2>/dev/null
)
PORT=$(port)
TLSPORT=$(port)
redis-server --bind 127.0.0.1 --port "$PORT" --tls-port "$TLSPORT" \
	--tls-cert-file "$W/server.crt" --tls-key-file "$W/server.key" \
	--tls-ca-cert-file "$W/ca.crt" --tls-auth-clients no \
	--save '' --appendonly no --dir "$W" --logfile "$W/redis.log" &
PIDS+=($!)
for _ in $(seq 200); do
	[ "$(redis-cli -p "$PORT" PING 2>/dev/null)" = PONG ] && break
	sleep 0.05
done

mkdir "$W/tcp" "$W/tls"
build/statefs -f -o "store=redis://127.0.0.1:$PORT" "$W/tcp" 2>"$W/tcp.log" &
PIDS+=($!)
build/statefs -f -o "store=rediss://127.0.0.1:$TLSPORT,store_tls_ca=$W/ca.crt" \
	"$W/tls" 2>"$W/tls.log" &
PIDS+=($!)
for m in tcp tls; do
	for _ in $(seq 200); do
		mountpoint -q "$W/$m" && break
		sleep 0.05
	done
	mountpoint -q "$W/$m" || { cat "$W/$m.log" >&2; exit 1; }
done

mkdir -p "$B"
: >"$B/tls.tsv"
for r in $(seq "$REPS"); do
	for m in tcp tls; do
		# A fresh tenant per round: the same population each time.
		d="$W/$m/$m$r"
		mkdir "$d"
		"$B/loadgen" point "$d" 1 "$OPS" |
			awk -v m="$m" -v r="$r" '$1 == "phase" { print m "\t" r "\t" $2 "\t" $4 "\t" $5 }' \
				>>"$B/tls.tsv"
	done
done

echo "create and unlink over TLS against plain TCP: one redis-server, one thread, $OPS operations x $REPS rounds (medians)"
awk -F'\t' '
	{ v[$1, $3, ++n[$1, $3]] = $4 / $5; phases[$3] = 1 }
	function median(m, p,   i, j, k, t, a) {
		k = n[m, p]
		for (i = 1; i <= k; i++) a[i] = v[m, p, i]
		for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++)
			if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
	}
	END {
		printf "%-8s %12s %12s %14s\n", "phase", "tcp ops/s", "tls ops/s", "tls cost us/op"
		split("create stat restat read rename unlink", order, " ")
		for (i = 1; i <= 6; i++) {
			p = order[i]
			if (!(p in phases)) continue
			a = median("tcp", p); b = median("tls", p)
			printf "%-8s %12.0f %12.0f %14.1f\n", p, a, b, 1e6 / b - 1e6 / a
		}
	}' "$B/tls.tsv"
