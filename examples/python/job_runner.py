#!/usr/bin/env python3
"""job_runner.py - a job that fences the file it writes with its token.

    job_runner.py JOURNAL [--table NAME] [--job LEASE] [--steps N] [--ttl S]
                  [--step-time S] [--wait S]

The journal is a resource outside the table: its first 8 bytes are a fence
register (shmlease.Fence over an mmap of the file), then one line per step,
"TOKEN step N". Each step is "flock, fence.admit(token), append, unlock", so
a runner that lost its lease and wakes up late is refused by the file itself
(Stale) as soon as a newer holder has written there, whatever it believes.
The lease is kept by the library's renewer; the runner also records its
progress in the lease's value (a guarded write) and stops at once when the
lease is lost. Exit status: 0 done, 3 lease lost, 4 refused by the fence.
"""

import argparse
import fcntl
import mmap
import os
import sys
import time

import shmlease

FENCE_BYTES = 8


def open_journal(path):
    """The journal's descriptor, with room for the fence word at the start."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    if os.fstat(fd).st_size < FENCE_BYTES:
        os.ftruncate(fd, FENCE_BYTES)  # zero: a fence that admits every token
    return fd


def append(fd, token, line):
    """Appends `line` for the holder of `token`, or raises shmlease.Stale when
    a newer token has already written to this journal. The lock makes
    "admit, then apply" one step for every process using the journal."""
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with mmap.mmap(fd, FENCE_BYTES) as m, shmlease.Fence(m) as fence:
            fence.admit(token)
        os.lseek(fd, 0, os.SEEK_END)
        os.write(fd, ("%d %s\n" % (token, line)).encode())
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def run(args):
    fd = open_journal(args.journal)
    with shmlease.Table(args.table, create=True, capacity=64, value_size=64) as table:
        try:
            with table.lease(args.job, ttl=args.ttl, wait=args.wait) as lease:
                print("runner %d: token %d" % (os.getpid(), lease.token), flush=True)
                for step in range(args.steps):
                    lease.check()  # before an effect outside the table
                    append(fd, lease.token, "step %d" % step)
                    lease.write(b"step %d" % step)  # progress, fenced by the table
                    time.sleep(args.step_time)
        except shmlease.Lost as e:
            print("runner %d: lease lost: %s" % (os.getpid(), e), file=sys.stderr)
            return 3
        except shmlease.Stale:
            print("runner %d: refused by the journal: a newer holder wrote there"
                  % os.getpid(), file=sys.stderr)
            return 4
        finally:
            os.close(fd)
    print("runner %d: done" % os.getpid(), flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("journal")
    ap.add_argument("--table", default="job-runner")
    ap.add_argument("--job", default="nightly")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--ttl", type=float, default=2.0, help="lease ttl, seconds")
    ap.add_argument("--step-time", type=float, default=0.05, help="seconds per step")
    ap.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the lease")
    return run(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
