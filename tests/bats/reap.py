#!/usr/bin/env python3
"""reap.py SECONDS CMD...: run CMD and account for the daemons it leaves.

Makes this process a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so
a daemon that CMD starts and that detaches (forks, its parent exits) is
reparented here instead of to init.  CMD's output passes through.  Once
CMD has exited, waits up to SECONDS for every process left to end and
prints one line for each:

    reaped NAME exit STATUS      it exited by itself
    reaped NAME signal N         it died from a signal
    killed NAME                  still running after SECONDS: SIGKILLed

NAME is its /proc/PID/comm.  Exits with CMD's exit status."""
import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36

seconds = float(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
    sys.exit("reap.py: prctl: " + os.strerror(ctypes.get_errno()))
rc = subprocess.call(sys.argv[2:])
sys.stdout.flush()


def children():
    """PID -> comm of every process whose parent is this one."""
    me, found = os.getpid(), {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # "PID (COMM) STATE PPID ...": COMM may hold blanks and ')'.
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        if int(stat[stat.rindex(")") + 2:].split()[1]) == me:
            found[int(pid)] = comm
    return found


deadline = time.monotonic() + seconds
names = {}
while True:
    left = children()
    names.update(left)
    if not left:
        break
    pid, status = os.waitpid(-1, os.WNOHANG)
    if pid:
        name = names.get(pid, "?")
        if os.WIFEXITED(status):
            print(f"reaped {name} exit {os.WEXITSTATUS(status)}")
        else:
            print(f"reaped {name} signal {os.WTERMSIG(status)}")
        continue
    if time.monotonic() > deadline:
        for pid, name in left.items():
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            print(f"killed {name}")
        break
    time.sleep(0.05)
sys.exit(rc)
