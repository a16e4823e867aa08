#!/usr/bin/env bats
# A shared store over TLS (-o store=rediss://HOST:PORT): two mounts share
# one tree through a TLS redis-server, each refusal of a handshake is one
# line at mount and nothing is mounted, the traffic read off the sockets
# (strace) shows no child name or content in clear, and a restart of the
# TLS server is recovered from as over TCP.
#
# The suite's setup makes two CAs with openssl(1) in its temporary
# directory: ca signs the server's certificate (for 127.0.0.1 and
# localhost), one for another name, and this mount's; other signs a
# server's and a client's certificate nobody trusts.  Each test starts
# its own redis-server on a loopback TLS port (its unix socket, plain, is
# the test's own redis-cli's), and the teardown unmounts and stops it.

STATEFS_STORE=embedded
load helpers
# shellcheck source=tests/bats/redis_helpers.bash
source "$BATS_TEST_DIRNAME/redis_helpers.bash"

setup_file() {
	local d=$BATS_FILE_TMPDIR/certs
	mkdir -p "$d"
	(
		set -e
		cd "$d"
		key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }
		ca() {
			key "$1"
			openssl req -x509 -new -key "$1.key" -out "$1.crt" -days 2 -subj "/CN=$1" 2>/dev/null
		}
		cert() {
			key "$1"
			openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$1" 2>/dev/null
			printf 'subjectAltName=%s\n' "$3" >"$1.ext"
			openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" \
				-CAcreateserial -days 2 -out "$1.crt" -extfile "$1.ext" 2>/dev/null
		}
		ca ca
		ca other
		cert server ca DNS:localhost,IP:127.0.0.1
		cert wrongname ca DNS:other.example
		cert stranger other DNS:localhost,IP:127.0.0.1
		cert client ca DNS:client
		cert badclient other DNS:client
	)
}

setup() {
	CERTS=$BATS_FILE_TMPDIR/certs
}

teardown() {
	local rc=0
	exec 5>&- 6>&- 7>&- 8>&- 9>&-
	statefs_unmount || rc=1
	redis_stop_all
	return "$rc"
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# tls_start [CERT] [ARGS...]: a redis-server on a loopback TLS port
# (PORT) with the certificate CERT (default server), asking for a client
# certificate of ca's; ARGS go to redis-server.  TLS_ARGS: its arguments,
# for a restart.
tls_start() {
	local c=${1:-server}
	[ $# -gt 0 ] && shift
	PORT=$(free_port)
	TLS_ARGS=(--bind 127.0.0.1 --tls-port "$PORT"
		--tls-cert-file "$CERTS/$c.crt" --tls-key-file "$CERTS/$c.key"
		--tls-ca-cert-file "$CERTS/ca.crt" --tls-auth-clients yes "$@")
	redis_start "${TLS_ARGS[@]}"
}

# The options of a mount over TLS to PORT, with this mount's certificate.
tls_opts() {
	echo "store=rediss://127.0.0.1:$PORT,store_tls_ca=$CERTS/ca.crt,store_tls_cert=$CERTS/client.crt,store_tls_key=$CERTS/client.key"
}

# refused OPTS PART: statefs with OPTS exits non-zero within store_timeout
# and some, prints one line holding PART, and mounts nothing.
refused() {
	local mnt=$BATS_TEST_TMPDIR/mnt
	mkdir -p "$mnt"
	run timeout 30 "$STATEFS_BIN" -f -o "$1" "$mnt" </dev/null 3>&-
	[ "$status" -ne 0 ] || fail "statefs mounted with $1"
	[ "$status" -ne 124 ] || fail "statefs hung with $1"
	[ "${#lines[@]}" -eq 1 ] || fail "not one line: $output"
	assert_output --partial "$2"
	assert_output --partial "statefs: -o store=rediss://127.0.0.1:"
	! _statefs_mounted "$mnt"
}

@test "two mounts over TLS share one tree; .stats says connected" {
	tls_start
	statefs_mount -o "$(tls_opts)"
	A=$MNT
	statefs_mount -o "$(tls_opts),store_tls_name=localhost"
	B=$MNT
	mkdir -p "$A/t/p"
	echo hello >"$A/t/p/c"
	fsyncdir "$B"
	run timeout 20 cat "$B/t/p/c"
	assert_output hello
	rm "$B/t/p/c"
	fsyncdir "$A/t/p"
	run ls "$A/t/p"
	assert_output ''
	run stat_of store "$A"
	assert_output connected
}

@test "every refusal of TLS at mount is one line saying which, and nothing is mounted" {
	tls_start stranger
	refused "$(tls_opts)" "signed by no CA trusted"
	redis_stop_all
	tls_start wrongname
	refused "$(tls_opts)" "not for '127.0.0.1'"
	refused "$(tls_opts),store_tls_name=third.example" "not for 'third.example'"
	redis_stop_all
	tls_start
	refused "store=rediss://127.0.0.1:$PORT,store_tls_ca=$CERTS/ca.crt" \
		"wants this mount's certificate"
	refused "store=rediss://127.0.0.1:$PORT,store_tls_ca=$CERTS/ca.crt,store_tls_cert=$CERTS/badclient.crt,store_tls_key=$CERTS/badclient.key" \
		"refused this mount's certificate"
	refused "store=rediss://127.0.0.1:$PORT,store_tls_ca=$CERTS/other.crt,store_tls_cert=$CERTS/client.crt,store_tls_key=$CERTS/client.key" \
		"signed by no CA trusted"
	refused "store=rediss://127.0.0.1:$PORT,store_tls_ca=$CERTS/nothing.crt" \
		"-o store_tls_ca=$CERTS/nothing.crt"
	refused "store=rediss://127.0.0.1:$PORT,store_tls_ca=$CERTS/ca.crt,store_tls_cert=$CERTS/client.crt,store_tls_key=$CERTS/server.key" \
		"is not the key of -o store_tls_cert"
	# A plain Redis behind rediss://.
	PORT=$(free_port)
	redis_start --bind 127.0.0.1 --port "$PORT"
	refused "$(tls_opts)" "speaks plain Redis, not TLS"
}

# traced_mount TRACE [ARGS...]: statefs_mount under strace of the
# daemon's reads and writes, one file TRACE.TID per thread (-ff: no call
# is split into "unfinished" and "resumed" lines), each descriptor named
# (-yy): only those to the store's port count, as /dev/fuse carries the
# names in clear, as it must.  traced TRACE: those files' lines.
traced_mount() {
	local wrap=$BATS_TEST_TMPDIR/traced-statefs
	printf '#!/bin/sh\nexec strace -ff -qq -yy -s 65536 -e trace=write,sendto,sendmsg,read,recvfrom,recvmsg -o %s %s "$@"\n' \
		"$1" "$STATEFS_BIN" >"$wrap"
	chmod +x "$wrap"
	shift
	STATEFS_BIN=$wrap statefs_mount "$@"
}

traced() {
	cat "$1".*
}

@test "over TLS the store's traffic shows no child name or content in clear (strace of the sockets); over TCP it does" {
	command -v strace >/dev/null || skip "strace is not installed"
	tls_start
	traced_mount "$BATS_TEST_TMPDIR/tls.trace" -o "$(tls_opts)"
	mkdir -p "$MNT/tenantzq/parentzq"
	echo contentzqsecret >"$MNT/tenantzq/parentzq/childzqname"
	run cat "$MNT/tenantzq/parentzq/childzqname"
	assert_output contentzqsecret
	statefs_unmount
	seen=$BATS_TEST_TMPDIR/tls.lines
	traced "$BATS_TEST_TMPDIR/tls.trace" | grep ":$PORT\]>" >"$seen" || true
	[ -s "$seen" ] || fail "no traffic to port $PORT in the trace"
	# The names' and the content's bytes travel in TLS records only:
	# application data records (type 23, TLS 1.2's version) both ways.
	run grep -E 'childzqname|contentzqsecret|parentzq|tenantzq' "$seen"
	assert_failure 1
	[ "$(grep '^write(' "$seen" | grep -cF ', "\27\3\3')" -gt 0 ]
	[ "$(grep '^read(' "$seen" | grep -cF ', "\27\3\3')" -gt 0 ]
	# The same over plain TCP: the names are there, so the trace sees
	# what it would have to see.
	redis_stop_all
	PORT=$(free_port)
	redis_start --bind 127.0.0.1 --port "$PORT"
	traced_mount "$BATS_TEST_TMPDIR/tcp.trace" -o "store=redis://127.0.0.1:$PORT"
	mkdir -p "$MNT/tenantzq/parentzq"
	echo contentzqsecret >"$MNT/tenantzq/parentzq/childzqname"
	statefs_unmount
	traced "$BATS_TEST_TMPDIR/tcp.trace" | grep -qE ":$PORT\]>.*childzqname"
	traced "$BATS_TEST_TMPDIR/tcp.trace" | grep -qE ":$PORT\]>.*contentzqsecret"
}

@test "a restart of the TLS server: EIO within store_timeout meanwhile, then both mounts recover; nothing lost" {
	tls_start server --appendonly yes --appendfsync always
	dir=$REDIS_DIR
	statefs_mount -o "$(tls_opts),store_timeout=1"
	A=$MNT
	statefs_mount -o "$(tls_opts),store_timeout=1"
	B=$MNT
	mkdir -p "$A/t/p"
	echo kept >"$A/t/p/c"
	pid=${REDIS_PIDS[0]}
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null || true
	run timeout 20 python3 -c 'import os, sys
try:
    os.mkdir(sys.argv[1]); print("OK")
except OSError as e:
    import errno; print(errno.errorcode[e.errno])' "$A/t/q"
	assert_output EIO
	run stat_of store "$A"
	assert_output disconnected
	# The same server again: same directory, socket, port and files.
	redis-server --unixsocket "$dir/redis.sock" --unixsocketperm 700 \
		--port 0 --save '' --dir "$dir" --logfile "$dir/redis.log" \
		"${TLS_ARGS[@]}" </dev/null >/dev/null 2>&1 3>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
	REDIS_PIDS+=($!)
	for i in $(seq 200); do
		[ "$(stat_of store "$A")" = connected ] && break
		sleep 0.1
	done
	mkdir "$A/t/q"
	fsyncdir "$B/t"
	run ls "$B/t"
	assert_output "$(printf 'p\nq')"
	run cat "$B/t/p/c"
	assert_output kept
	run stat_of store "$B"
	assert_output connected
}
