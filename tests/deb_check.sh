#!/bin/sh
# tests/deb_check.sh - the Debian packages in use: installs build/*.deb with
# apt-get, builds an example against the installed library with pkg-config
# and runs it, runs the tool, imports the module with Debian's python3, finds
# the manual page, then purges the packages whatever happened. Run by
# `make deb-check` (as root), after `make deb`.
#
#   usage: tests/deb_check.sh [BUILD_DIR]
set -eu

B=${1:-build}
PKGS="libshmlease0.3 libshmlease-dev shmlease python3-shmlease"
table="shldeb-${SHL_TEST_RUN:+$SHL_TEST_RUN-}$$"

fail() { echo "deb_check.sh: $*" >&2; exit 1; }

# Those of the packages that dpkg has installed, one a line.
installed() {
    for p in $PKGS; do
        dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q ' installed$' && echo "$p"
    done
    return 0
}

[ "$(id -u)" = 0 ] || fail "installing packages needs root"
have=$(installed)
[ -z "$have" ] || fail "installed already: $(printf '%s' "$have" | tr '\n' ' ') (this check would remove them)"
debs=$(ls "$B"/*.deb 2>/dev/null) || fail "no packages in $B/ (make deb)"
work=$(mktemp -d "${TMPDIR:-/tmp}/shldeb-XXXXXX")

# apt-get refuses the whole purge when one name is unknown to it: only what
# is installed is named.
purge() {
    left=$(installed)
    if [ -n "$left" ]; then
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $left >/dev/null 2>&1 ||
            echo "deb_check.sh: apt-get purge -y $left failed" >&2
    fi
    rm -rf "$work"; rm -f /dev/shm/"$table"*
}
trap purge EXIT
trap 'exit 1' INT TERM

# apt-get takes a path for a package file only with a slash in front.
paths=$(for d in $debs; do case $d in /*) echo "$d" ;; *) echo "./$d" ;; esac; done | tr '\n' ' ')
echo "deb-check: apt-get install -y --no-install-recommends $paths"
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $paths >/dev/null

for p in $PKGS; do
    dpkg-query -W -f '${Package} ${Version} ${Installed-Size} KiB\n' "$p" 2>/dev/null ||
        fail "$p was not installed (is its .deb in $B/?)"
done

# An example, built as a program outside the tree is: the installed header and
# library through pkg-config only, linked against the shared library.
cflags=$(pkg-config --cflags --libs shmlease) || fail "pkg-config does not know shmlease"
echo "deb-check: cc examples/counter.c $cflags"
# shellcheck disable=SC2086
cc -std=c11 -o "$work/counter" examples/counter.c $cflags
ldd "$work/counter" | grep -q '/libshmlease\.so\.' || fail "the example does not use the installed libshmlease.so"
"$work/counter" "$table" >"$work/counter.out" || fail "the example failed: $(cat "$work/counter.out")"
echo "deb-check: examples/counter ran: $(tail -n 1 "$work/counter.out")"

v=$(shmlease version) || fail "shmlease version failed"
echo "deb-check: shmlease version: $v"
[ "$(command -v shmlease)" = /usr/bin/shmlease ] || fail "shmlease is not /usr/bin/shmlease"

/usr/bin/python3 -P -c 'import shmlease, sys; print("deb-check: import shmlease from", shmlease.__file__)' ||
    fail "/usr/bin/python3 cannot import shmlease"
/usr/bin/python3 -P -c 'import shmlease; assert shmlease.__file__.startswith("/usr/lib/python3/dist-packages/")' ||
    fail "shmlease was imported from elsewhere than the package"

for page in 1:shmlease 3:shmlease 7:shmlease; do
    m=$(man -w "${page%%:*}" "${page#*:}") || fail "man -w ${page%%:*} ${page#*:} finds nothing"
    case $m in /usr/share/man/*) ;; *) fail "man ${page#*:}(${page%%:*}) is $m, not the package's" ;; esac
    echo "deb-check: man ${page%%:*} ${page#*:}: $m"
done
# man opens it: rendered, not only found.
MANPAGER=cat MANWIDTH=80 man shmlease 2>/dev/null | grep -q 'shmlease' || fail "man shmlease renders nothing"

echo "deb-check: ok; purging $PKGS"
