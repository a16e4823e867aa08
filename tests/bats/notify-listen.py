#!/usr/bin/env python3
"""notify-listen.py SOCKET OUT MNT: be systemd's end of NOTIFY_SOCKET.

Binds the datagram socket SOCKET (a path, or "@name" for the abstract
namespace, as sd_notify(3) reads NOTIFY_SOCKET) and appends to OUT, for
each message, one line per assignment in it:

    PID mounted|unmounted KEY=VALUE

PID is the sender's, from the kernel (SO_PASSCRED), as systemd checks it
against the service's main process; mounted/unmounted says whether MNT
was a mount point in /proc/mounts at the moment the message arrived.
Prints "listening" on stdout once the socket is bound; runs until
killed."""
import os
import socket
import struct
import sys

path, out, mnt = sys.argv[1:4]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
s.bind("\0" + path[1:] if path.startswith("@") else path)
print("listening", flush=True)


def mounted():
    with open("/proc/mounts") as f:
        return any(line.split()[1] == mnt for line in f)


while True:
    msg, anc, _, _ = s.recvmsg(4096, socket.CMSG_SPACE(12))
    state = "mounted" if mounted() else "unmounted"
    pid = "?"
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid = str(struct.unpack("iII", data[:12])[0])
    with open(out, "a") as f:
        for kv in msg.decode(errors="replace").split("\n"):
            if kv:
                f.write(f"{pid} {state} {kv}\n")
