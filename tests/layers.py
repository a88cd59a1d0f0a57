#!/usr/bin/env python3
"""tests/layers.py - the library's layers, checked on its objects and sources.

Which file calls which: an edge A -> B when A's object uses a symbol that B's
defines (nm). The rules (docs/DEVELOPING.md, "Map"):

  - shm/ and etcd/ call and include nothing of lib/;
  - a kind (lib/kind_shm/, lib/kind_etcd/) calls nothing of the other kind, and
    of lib/'s own files only the kind-neutral ones below the kinds (BELOW);
  - lib/'s own files include no header of a kind but kind.h's declarations
    (they include internal.h); the kinds' internal headers stay in their
    folders;
  - no loop of calls crosses a folder: files that call each other in a circle
    are all in one folder (a tight loop inside one concept is allowed there,
    and said in that folder's README).

  usage: tests/layers.py OBJDIR [--graph]   (OBJDIR: build/rel; from the top
         of the tree. --graph prints the edges and the loops and checks.)
Exit 0 when every rule holds, 1 with one line per broken rule.
"""
import os
import re
import subprocess
import sys

FOLDERS = ("shm", "etcd", "lib", "lib/kind_shm", "lib/kind_etcd")
KINDS = ("lib/kind_shm", "lib/kind_etcd")
# lib/'s files that both kinds may call: below the kinds, above shm/ and etcd/.
BELOW = {"lib/names", "lib/detail", "lib/error", "lib/handle", "lib/problem", "lib/mutation",
         "lib/etcd_name", "lib/code_names"}


def folder(f):
    return os.path.dirname(f)


def symbols(obj):
    out = subprocess.run(["nm", obj], check=True, capture_output=True, text=True).stdout
    defs, uses = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            uses.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBR":
            defs.add(parts[2])
    return defs, uses


def call_graph(objdir):
    files = {}
    for top in FOLDERS:
        src = top
        if not os.path.isdir(src):
            continue
        for name in sorted(os.listdir(src)):
            if name.endswith(".c"):
                f = os.path.join(top, name[:-2])
                obj = os.path.join(objdir, f + ".o")
                if not os.path.exists(obj):
                    if top == "etcd":
                        continue  # a build without the etcd client
                    sys.exit("layers: no object %s (build the library first)" % obj)
                files[f] = symbols(obj)
    owner = {}
    for f, (defs, _) in files.items():
        for s in defs:
            owner[s] = f
    edges = {f: set() for f in files}
    for f, (_, uses) in files.items():
        for s in uses:
            g = owner.get(s)
            if g and g != f:
                edges[f].add(g)
    return edges


def loops(edges):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def includes(path):
    """The files a source or header includes, as paths from the top."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    out = []
    for name in INCLUDE.findall(text):
        here = os.path.normpath(os.path.join(os.path.dirname(path), name))
        out.append(here if os.path.exists(here) else os.path.normpath(os.path.join("lib", name)))
    return out


def broken_rules(edges):
    bad = []
    for a in sorted(edges):
        for b in sorted(edges[a]):
            fa, fb = folder(a), folder(b)
            if fa in ("shm", "etcd") and fb.startswith("lib"):
                bad.append("%s calls %s: shm/ and etcd/ are below lib/" % (a, b))
            if fa in KINDS and fb in KINDS and fa != fb:
                bad.append("%s calls %s: one kind calls the other" % (a, b))
            if fa in KINDS and fb == "lib" and b not in BELOW:
                bad.append("%s calls %s: a kind calls an entry point or a client of the API"
                           % (a, b))
    for comp in loops(edges):
        if len({folder(f) for f in comp}) > 1:
            bad.append("a loop of calls across folders: " + " ".join(comp))
        elif folder(comp[0]) == "lib":
            bad.append("a loop of calls among lib/'s own files: " + " ".join(comp))
    for top in FOLDERS:
        if not os.path.isdir(top):
            continue
        for name in sorted(os.listdir(top)):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(top, name)
            for inc in includes(path):
                fi = folder(inc)
                if top in ("shm", "etcd") and fi.startswith("lib"):
                    bad.append("%s includes %s: shm/ and etcd/ are below lib/" % (path, inc))
                if top == "lib" and fi in KINDS:
                    bad.append("%s includes %s: lib/'s own files see the kinds only through "
                               "kind.h" % (path, inc))
                if top in KINDS and fi in KINDS and fi != top:
                    bad.append("%s includes %s: one kind includes the other" % (path, inc))
    return bad


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    edges = call_graph(sys.argv[1])
    if "--graph" in sys.argv[2:]:
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print("%s -> %s" % (a, b))
        for comp in loops(edges):
            print("loop: " + " ".join(comp))
    bad = broken_rules(edges)
    for line in bad:
        print("layers: " + line, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
