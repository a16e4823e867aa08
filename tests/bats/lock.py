#!/usr/bin/python3
"""lock.py - the lock calls of tests/bats/locks.bats, each through the real
system call: flock(2), fcntl(2) record locks (F_SETLK, F_SETLKW, F_GETLK)
and open file description locks (F_OFD_SETLK, F_OFD_SETLKW, F_OFD_GETLK).

KIND is flock-ex, flock-sh, posix-ex, posix-sh, ofd-ex or ofd-sh; a record
lock covers START LEN (default 0 0: the whole file).

  lock.py try KIND PATH [START LEN]
        one non-blocking attempt; prints OK or the errno's name
  lock.py hold KIND PATH HELD GO [START LEN]
        takes the lock, waiting for it, creates HELD, then holds it until
        GO exists (60 s at most), and exits (which releases it)
  lock.py wait KIND PATH DONE [START LEN]
        takes the lock, waiting for it, writes the time (ns) it got it to
        DONE, and exits
  lock.py intr KIND PATH SECS
        waits for the lock with a SIGALRM due in SECS s and prints the
        errno the call ended with (EINTR) or OK
  lock.py getlk KIND PATH START LEN
        F_GETLK (ofd: F_OFD_GETLK) of a write lock: prints "UNLCK", or
        "TYPE START LEN PID" of the lock in the way
  lock.py closeone KIND PATH
        posix or flock: takes the lock through one descriptor, opens and
        closes another of the same file, then reports, from a child
        process, whether the lock is still held (HELD or FREE)
"""
import ctypes
import errno
import fcntl
import os
import signal
import struct
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
FLOCK_FMT = 'hhqqi4x'  # struct flock on Linux x86-64 and arm64
LTYPE = {'ex': fcntl.F_WRLCK, 'sh': fcntl.F_RDLCK}
TNAME = {fcntl.F_WRLCK: 'WRLCK', fcntl.F_RDLCK: 'RDLCK', fcntl.F_UNLCK: 'UNLCK'}


def cmd(kind, wait):
    how = kind.split('-')[0]
    if how == 'posix':
        return fcntl.F_SETLKW if wait else fcntl.F_SETLK
    return fcntl.F_OFD_SETLKW if wait else fcntl.F_OFD_SETLK


def raw_lock(fd, kind, wait, start=0, length=0):
    """The system call itself, through ctypes (no retry on EINTR):
    0 or the errno."""
    how, mode = kind.split('-')
    if how == 'flock':
        op = fcntl.LOCK_EX if mode == 'ex' else fcntl.LOCK_SH
        rc = libc.flock(fd, op | (0 if wait else fcntl.LOCK_NB))
    else:
        buf = ctypes.create_string_buffer(
            struct.pack(FLOCK_FMT, LTYPE[mode], os.SEEK_SET, start, length, 0))
        rc = libc.fcntl(fd, cmd(kind, wait), buf)
    return 0 if rc == 0 else ctypes.get_errno()


def name(e):
    return 'OK' if e == 0 else errno.errorcode.get(e, str(e))


def rng(argv, i):
    return (int(argv[i]), int(argv[i + 1])) if len(argv) > i + 1 else (0, 0)


def main(argv):
    what, kind, path = argv[1], argv[2], argv[3]
    if what == 'try':
        fd = os.open(path, os.O_RDWR)
        print(name(raw_lock(fd, kind, False, *rng(argv, 4))))
    elif what == 'hold':
        held, go = argv[4], argv[5]
        fd = os.open(path, os.O_RDWR)
        e = raw_lock(fd, kind, True, *rng(argv, 6))
        if e:
            print(name(e))
            return 1
        open(held, 'w').close()
        end = time.monotonic() + 60
        while not os.path.exists(go) and time.monotonic() < end:
            time.sleep(0.02)
    elif what == 'wait':
        fd = os.open(path, os.O_RDWR)
        e = raw_lock(fd, kind, True, *rng(argv, 5))
        with open(argv[4], 'w') as f:
            f.write('%d\n' % time.time_ns() if e == 0 else name(e) + '\n')
    elif what == 'intr':
        signal.signal(signal.SIGALRM, lambda *a: None)
        fd = os.open(path, os.O_RDWR)
        signal.setitimer(signal.ITIMER_REAL, float(argv[4]))
        print(name(raw_lock(fd, kind, True)))
    elif what == 'getlk':
        fd = os.open(path, os.O_RDWR)
        start, length = int(argv[4]), int(argv[5])
        c = fcntl.F_OFD_GETLK if kind.startswith('ofd') else fcntl.F_GETLK
        out = fcntl.fcntl(fd, c, struct.pack(FLOCK_FMT, fcntl.F_WRLCK,
                                             os.SEEK_SET, start, length, 0))
        t, _, s, n, pid = struct.unpack(FLOCK_FMT, out)
        print('UNLCK' if t == fcntl.F_UNLCK else
              '%s %d %d %d' % (TNAME[t], s, n, pid))
    elif what == 'closeone':
        fd = os.open(path, os.O_RDWR)
        e = raw_lock(fd, kind, False)
        if e:
            print(name(e))
            return 1
        os.close(os.open(path, os.O_RDONLY))
        pid = os.fork()
        if pid == 0:
            fd2 = os.open(path, os.O_RDWR)
            e = raw_lock(fd2, kind.split('-')[0] + '-ex', False)
            os._exit(0 if e == 0 else 1)
        _, st = os.waitpid(pid, 0)
        print('FREE' if os.WEXITSTATUS(st) == 0 else 'HELD')
    else:
        print('lock.py: unknown command', what, file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
