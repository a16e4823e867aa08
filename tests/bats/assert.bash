# assert.bash - bats-support and bats-assert, and the waits of the helpers,
# for helpers.bash and redis_helpers.bash (each loads this file).
#
# What a test costs here is mostly the processes it starts: on this kind
# of machine a fork and exec costs several milliseconds of processor
# time, more than a hundred lines of shell.  So what every test runs
# (the loading below, the waits of helpers.bash and redis_helpers.bash)
# starts no process it can do without:
#
#   - bats-support and bats-assert are sourced file by file: their
#     load.bash runs dirname, a process, once a file (15 of them), at
#     every test and again in every file's setup_file process.  Their
#     files hold nothing but functions, in any order.  Loaded once per
#     process, whichever of the two helpers loads this file first.
#   - statefs_sleep SECS waits without a process: a read with a timeout
#     on a FIFO that nobody writes to, opened read-write (so the open does
#     not wait for a writer and the read never sees an end of file).  One
#     FIFO for the whole bats run (in BATS_RUN_TMPDIR), made by the first
#     test that waits; each test opens it once.  Without a FIFO (mkfifo
#     failed) it is sleep(1).
#   - file_has_line FILE LINE: whether a line of FILE is exactly LINE,
#     as grep -qxF would say, read by the shell (a file with a NUL byte
#     is read up to it).
#   - proc_alive PID: whether PID still runs: kill -0, and not a zombie.
#     A child of this shell that has exited answers kill -0 until the
#     shell reaps it, which bash does when it handles the SIGCHLD, and
#     inside bats (its traps, a builtin read with a timeout) that can
#     wait for the next child to end: a daemon that had exited looked
#     alive for seconds to a wait made of kill -0 and statefs_sleep.

if ! declare -F assert_success >/dev/null; then
	if [ -d /usr/lib/bats/bats-support/src ] && [ -d /usr/lib/bats/bats-assert/src ]; then
		for _statefs_lib in /usr/lib/bats/bats-support/src/*.bash \
			/usr/lib/bats/bats-assert/src/*.bash; do
			# shellcheck disable=SC1090
			source "$_statefs_lib"
		done
		unset _statefs_lib
	else
		load '/usr/lib/bats/bats-support/load'
		load '/usr/lib/bats/bats-assert/load'
	fi
fi

_STATEFS_SLEEP_FD=
statefs_sleep() {
	if [ -z "$_STATEFS_SLEEP_FD" ]; then
		local fifo=${BATS_RUN_TMPDIR:-${TMPDIR:-/tmp}}/statefs-sleep.fifo
		if [ -p "$fifo" ] || mkfifo "$fifo" 2>/dev/null || [ -p "$fifo" ]; then
			exec {_STATEFS_SLEEP_FD}<>"$fifo"
		else
			sleep "$1"
			return 0
		fi
	fi
	read -r -t "$1" -u "$_STATEFS_SLEEP_FD" _ || :
}

file_has_line() {
	local text=
	IFS= read -r -d '' text <"$1" 2>/dev/null || :
	[[ $'\n'$text$'\n' == *$'\n'"$2"$'\n'* ]]
}

proc_alive() {
	local stat
	kill -0 "$1" 2>/dev/null || return 1
	read -r stat 2>/dev/null </proc/"$1"/stat || return 1
	stat=${stat##*) }
	[ "${stat%% *}" != Z ]
}
