#!/usr/bin/python3
"""resp.py SOCK - one redis-server connection for a whole bats test.

rcli (redis_helpers.bash) starts a process for every command it sends:
a redis-cli costs as much processor time as a small test's assertion,
and a suite of the Functions library sends thousands.  This process
keeps one connection to the redis-server on the unix socket SOCK and
answers each request read from stdin with what `redis-cli -s SOCK ARGS`
prints when its output is not a terminal, byte for byte:

  request   "N\\n", then N arguments, each "LEN\\n" and LEN bytes
  reply     "K\\n", then K parts, each "LEN\\n" and LEN bytes: redis-cli's
            output split at its NUL bytes (a shell reads no NUL into a
            variable: it writes one between two parts); "-\\n" when the
            server cannot be reached (redis-cli's message on stderr)

redis-cli's output (cliFormatReplyRaw, then a newline): a string or a
status as it is, an integer in decimal, nil as nothing, an error as its
text and a newline, an array as its elements' outputs joined by
newlines (a nested one flattened the same way).  A connection lost is
made again at the next request, as the next redis-cli would.
"""

import socket
import sys


def fmt(r):
    kind, v = r
    if kind == "err":
        return v + b"\n"
    if kind == "nil":
        return b""
    if kind == "int":
        return b"%d" % v
    if kind == "arr":
        return b"\n".join(fmt(e) for e in v)
    return v


class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.f = self.s.makefile("rb")

    def call(self, args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(out))
        return self.reply()

    def reply(self):
        line = self.f.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("connection closed")
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return ("str", rest)
        if t == b"-":
            return ("err", rest)
        if t == b":":
            return ("int", int(rest))
        if t == b"$":
            n = int(rest)
            if n < 0:
                return ("nil", None)
            data = self.f.read(n + 2)
            if len(data) != n + 2:
                raise ConnectionError("connection closed")
            return ("str", data[:-2])
        if t == b"*":
            n = int(rest)
            if n < 0:
                return ("nil", None)
            return ("arr", [self.reply() for _ in range(n)])
        raise ConnectionError("bad reply %r" % line)


def main():
    path = sys.argv[1]
    inp = sys.stdin.buffer
    outp = sys.stdout.buffer
    conn = None
    while True:
        line = inp.readline()
        if not line:
            return
        args = []
        for _ in range(int(line)):
            n = int(inp.readline())
            args.append(inp.read(n))
        try:
            if conn is None:
                conn = Conn(path)
            parts = (fmt(conn.call(args)) + b"\n").split(b"\0")
            outp.write(b"%d\n" % len(parts))
            for p in parts:
                outp.write(b"%d\n" % len(p) + p)
        except OSError as e:
            conn = None
            sys.stderr.write("Could not connect to Redis at %s: %s\n" % (path, e.strerror or e))
            sys.stderr.flush()
            outp.write(b"-\n")
        outp.flush()


main()
