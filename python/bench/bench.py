"""make bench-python: the binding against the C calls it makes, and against
the file locks Python programs use today (filelock, fasteners).

Reported, not asserted. Each figure is the median of several rounds, in
nanoseconds per operation (an acquire+release pair counts as one). The
idiom row is one use of ``with t.lease(name, ttl=30): pass`` (acquire, keep,
release), set beside filelock's acquire+release measured in the same run:
the target is at most a quarter of it."""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import shmlease


def in_turn(fns, n, rounds):
    """The median ns/op of each of fns, their rounds taken in turn, so that
    a change in the machine's load falls on all of them alike."""
    results = [[] for _ in fns]
    for _ in range(rounds):
        for fn, res in zip(fns, results):
            t0 = time.perf_counter_ns()
            fn(n)
            res.append((time.perf_counter_ns() - t0) / n)
    return [statistics.median(r) for r in results]


def per_op(fn, n, rounds):
    return in_turn([fn], n, rounds)[0]


def file_lock_pairs(module, cls, path):
    """k acquire+release pairs of module.cls(path); None if not installed."""
    try:
        lock = getattr(__import__(module), cls)(path)
    except ImportError:
        return None

    def pairs(k):
        for _ in range(k):
            lock.acquire()
            lock.release()
    return pairs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=200_000, help="operations per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    a = ap.parse_args()
    n, rounds = a.n, a.rounds
    name = "bench-python-%d" % os.getpid()
    rows = []
    with shmlease.Table(name, create=True, exclusive=True, capacity=16, value_size=256) as t:
        try:
            lease, owner, value = "bench", "bench-owner", b"x" * 64

            def pairs(k):
                acq, rel = t.acquire, t.release
                for _ in range(k):
                    rel(lease, owner, acq(lease, owner, ttl_ns=60_000_000_000))

            tok = t.acquire("w", owner, 600)

            def writes(k):
                w = t.write
                for _ in range(k):
                    w("w", owner, tok, value)

            def reads(k):
                r = t.read
                for _ in range(k):
                    r("w")

            def contexts(k):
                lease = t.lease
                for _ in range(k):
                    with lease("ctx", ttl=30):
                        pass

            def nops(k):
                f = shmlease._shmlease._nop
                for _ in range(k):
                    f("w", owner, tok, value)

            t.write("w", owner, tok, value)
            floor = per_op(nops, n, rounds)
            py = {"acquire_release": per_op(pairs, n, rounds),
                  "write": per_op(writes, n, rounds), "read": per_op(reads, n, rounds)}
            t.release("w", owner, tok)
            # The idiom against filelock's pair, in turns (the target: a quarter).
            with tempfile.TemporaryDirectory() as d:
                fl_pairs = file_lock_pairs("filelock", "FileLock", os.path.join(d, "fl.lock"))
                idiom, fl_beside = (in_turn([contexts, fl_pairs], max(n // 10, 1000), rounds)
                                    if fl_pairs else (per_op(contexts, max(n // 10, 1000),
                                                             rounds), None))
            c = {op: statistics.median(t._bench(op, "c" + op[:5], owner, n) for _ in range(rounds))
                 for op in py}
        finally:
            shmlease.unlink(name)
    for op in ("acquire_release", "write", "read"):
        # A pair is two calls: the overhead per call is half the pair's.
        calls = 2 if op == "acquire_release" else 1
        rows.append({"op": op, "python_ns": py[op], "c_ns": c[op],
                     "overhead_per_call_ns": (py[op] - c[op]) / calls})

    alt = {}
    with tempfile.TemporaryDirectory() as d:
        for label, module, cls in (("filelock.FileLock", "filelock", "FileLock"),
                                   ("fasteners.InterProcessLock", "fasteners",
                                    "InterProcessLock")):
            lock_pairs = file_lock_pairs(module, cls, os.path.join(d, module + ".lock"))
            alt[label] = lock_pairs and per_op(lock_pairs, max(n // 10, 1000), rounds)

    print("shmlease %s, Python %s, %d ops x %d rounds (median ns/op)" % (
        shmlease.version(), sys.version.split()[0], n, rounds))
    print("empty native call (4 args): %.0f ns" % floor)
    print("%-28s %12s %10s %18s" % ("operation", "Python ns", "C ns", "overhead/call ns"))
    for r in rows:
        print("%-28s %12.0f %10.0f %18.0f" % (r["op"], r["python_ns"], r["c_ns"],
                                              r["overhead_per_call_ns"]))
    pair = py["acquire_release"]
    print("%-28s %12s %10s %18s" % ("acquire+release pair", "ns", "", "vs shmlease"))
    print("%-28s %12.0f %10s %18s" % ("shmlease.Table", pair, "", "1.0x"))
    for k, v in alt.items():
        if v is None:
            print("%-28s %12s (not installed: apt-get install python3-%s)" % (
                k, "-", k.split(".")[0]))
        else:
            print("%-28s %12.0f %10s %17.1fx" % (k, v, "", v / pair))
    print("%-28s %12.0f %10s %18s" % ("with t.lease(...) per use", idiom, "",
                                      "%.2fx filelock" % (idiom / fl_beside) if fl_beside else
                                      "(filelock not installed)"))
    if fl_beside:
        print("  (filelock's pair in the same rounds, taken in turn: %.0f ns)" % fl_beside)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"native_call_floor_ns": floor, "rows": rows, "alternatives_pair_ns": alt,
                       "lease_context_ns": idiom, "filelock_pair_beside_ns": fl_beside,
                       "n": n, "rounds": rounds}, f, indent=2)


if __name__ == "__main__":
    main()
