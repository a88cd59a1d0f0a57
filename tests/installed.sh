#!/bin/sh
# tests/installed.sh - installed use: install into a temporary DESTDIR, build
# the examples against that installation with pkg-config, statically and
# dynamically, and run them; build a program that uses every group of the
# public header as C and as C++, and check that a group included on its own
# is refused; then install under a prefix of its own and check what the
# README says of -rpath and LD_LIBRARY_PATH. Run by `make test` (target
# test-installed).
#
#   usage: tests/installed.sh          (from the top of the tree; MAKE, CC,
#                                       CXX and B may be set)
set -eu

MAKE=${MAKE:-make}
CC=${CC:-cc}
CXX=${CXX:-c++}
B=${B:-build}
root=$(mktemp -d "${TMPDIR:-/tmp}/shlinst-XXXXXX")
# The examples' tables: removed on every way out (make test's run mark in
# the names lets its final check find any left).
tag="shlinst-${SHL_TEST_RUN:+$SHL_TEST_RUN-}$$"
trap 'rm -rf "$root"; rm -f /dev/shm/"$tag"-*' EXIT
trap 'exit 1' INT TERM
prefix=/usr
dest=$root/dest
out=$root/bin
mkdir -p "$out"

fail() { echo "installed.sh: $*" >&2; exit 1; }

$MAKE --no-print-directory -s B="$B" install DESTDIR="$dest" PREFIX=$prefix >/dev/null
for f in include/shmlease.h lib/libshmlease.a lib/libshmlease.so lib/pkgconfig/shmlease.pc \
         bin/shmlease share/man/man1/shmlease.1 share/man/man3/shmlease.3 \
         share/man/man7/shmlease.7; do
    [ -e "$dest$prefix/$f" ] || fail "not installed: $prefix/$f"
done
# The header's groups (lib/shmlease/), each of them and nothing else.
(cd lib && ls shmlease/*.h) >"$root/groups-tree"
(cd "$dest$prefix/include" && ls shmlease/*.h 2>/dev/null) >"$root/groups-installed" || true
cmp -s "$root/groups-tree" "$root/groups-installed" ||
    fail "$prefix/include/shmlease/ holds [$(tr '\n' ' ' <"$root/groups-installed")]," \
        "lib/ has [$(tr '\n' ' ' <"$root/groups-tree")]"

# man finds a function's and a subcommand's page by its own name (a .so
# link to the page that documents it), as after a real install.
for p in "3 shl_acquire shl_acquire_ex" "3 shl_last_error SHL_DETAIL_MAX" \
         "1 shmlease-run shmlease run" "1 shmlease-acquire shmlease acquire"; do
    set -- $p
    sec=$1 page=$2
    shift 2
    MANPATH="$dest$prefix/share/man" MANWIDTH=80 man -P cat "$sec" "$page" 2>/dev/null |
        grep -q "$*" || fail "man $sec $page does not find the page that says '$*'"
done

# pkg-config sees only the installation: the .pc names /usr, the sysroot
# variable maps it into DESTDIR.
# The system's .pc files stay visible for the library's private requirements
# (json-c with etcd support; libcurl is loaded at run time, not linked).
sys_pc=$(pkg-config --variable pc_path pkg-config)
export PKG_CONFIG_LIBDIR="$dest$prefix/lib/pkgconfig:$sys_pc"
export PKG_CONFIG_SYSROOT_DIR="$dest"
unset PKG_CONFIG_PATH
# With private requirements (etcd support), a fully static program could not
# load libcurl at run time (dlopen from a static program): "static" then
# links libshmlease.a, and json-c and libc dynamically.
requires=$(sed -n 's/^Requires.private: *//p' "$dest$prefix/lib/pkgconfig/shmlease.pc")
[ "$(pkg-config --modversion shmlease)" = "$(sed -n 's/^#define[ \t]*SHLEASE_VERSION_STRING[ \t]*"\(.*\)"/\1/p' lib/shmlease.h)" ] ||
    fail "pkg-config version differs from the header's"
cflags=$(pkg-config --cflags shmlease)
libs=$(pkg-config --libs shmlease)
if [ -n "$requires" ]; then
    # shellcheck disable=SC2086
    slibs="$dest$prefix/lib/libshmlease.a $(PKG_CONFIG_LIBDIR=$sys_pc PKG_CONFIG_SYSROOT_DIR= pkg-config --libs $requires) $(sed -n 's/^Libs.private: *//p' "$dest$prefix/lib/pkgconfig/shmlease.pc")"
    static=
else
    slibs=$(pkg-config --static --libs shmlease)
    static=-static
fi
case "$cflags" in *"$dest"*) ;; *) fail "cflags do not point into DESTDIR: $cflags" ;; esac
# libcurl is loaded on the first etcd use: never a dependency of the library.
if readelf -d "$dest$prefix/lib/libshmlease.so" | grep -q 'NEEDED.*libcurl'; then
    fail "libshmlease.so needs libcurl"
fi

for src in examples/*.c; do
    name=$(basename "$src" .c)
    [ "$name" = demo ] && continue
    # Built outside the tree: no -Ilib, no library flags but pkg-config's.
    # shellcheck disable=SC2086
    $CC -std=c11 -Wall -Wextra -Werror $cflags -o "$out/$name-shared" "$src" $libs ||
        fail "$name: dynamic build failed"
    # shellcheck disable=SC2086
    $CC -std=c11 -Wall -Wextra -Werror $static $cflags -o "$out/$name-static" "$src" $slibs ||
        fail "$name: static build failed"
    if [ -n "$static" ] && readelf -d "$out/$name-static" 2>/dev/null | grep -q NEEDED; then
        fail "$name-static has shared dependencies"
    fi
    if readelf -d "$out/$name-static" 2>/dev/null | grep -q 'NEEDED.*libshmlease'; then
        fail "$name-static uses libshmlease.so"
    fi
    readelf -d "$out/$name-shared" | grep -q 'NEEDED.*libshmlease\.so\.' ||
        fail "$name-shared does not use libshmlease.so"
done

# The shared builds must find the installed library, not the build tree's.
export LD_LIBRARY_PATH="$dest$prefix/lib"
ldd "$out/leader-shared" | grep -q "$dest$prefix/lib/libshmlease.so" ||
    fail "leader-shared does not resolve to the installed library"

for kind in shared static; do
    "$out/leader-$kind" "$tag-leader-$kind" >"$root/log" 2>&1 || { cat "$root/log"; fail "leader-$kind"; }
    grep -q '^ok:' "$root/log" || fail "leader-$kind did not say ok"
    for run in 1 2; do
        "$out/fenced_writer-$kind" "$tag-fence-$kind" "$root/res-$kind" "$root/tokens-$kind" \
            >"$root/log" 2>&1 || { cat "$root/log"; fail "fenced_writer-$kind run $run"; }
    done
    "$out/counter-$kind" "$tag-counter-$kind" 4 1000 1 >"$root/log" 2>&1 ||
        { cat "$root/log"; fail "counter-$kind"; }
    "$out/long_job-$kind" "$tag-job-$kind" job --ttl 300 --steps 5 --step-ms 50 \
        >"$root/log" 2>&1 || { cat "$root/log"; fail "long_job-$kind"; }
    grep -q '^done 5 steps' "$root/log" || fail "long_job-$kind did not finish"
    echo "  ok      installed examples ($kind)"
done

# A program that uses a name of each group of the header, built with
# pkg-config's flags only, as C and (the header says extern "C") as C++:
# the C++ build links only if the declarations have C linkage.
cat >"$root/groups.c" <<'EOF'
#include <shmlease.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    shl_options o; /* table.h */
    shl_options_init(&o);
    shl_lease_info info; /* lease.h */
    memset(&info, 0, sizeof info);
    shl_renewer_options ro; /* wait.h */
    shl_renewer_options_init(&ro);
    shl_leader leader; /* election.h */
    memset(&leader, 0, sizeof leader);
    shl_fence f = {0}; /* fence.h */
    if (shl_fence_init(&f, 0) != SHL_OK || shl_fence_admit(&f, SHL_TOKEN_EPOCH_SPAN) != SHL_OK)
        return 1;
    if (strcmp(shl_state_name(SHL_STATE_HELD), "HELD") != 0) /* admin.h */
        return 1;
    printf("%s %s %u %d\n", shl_version(), shl_errname(SHL_EBUSY), (unsigned)o.capacity,
           SHL_OP_ACQUIRE);
    return strcmp(shl_version(), SHLEASE_VERSION_STRING) != 0;
}
EOF
cp "$root/groups.c" "$root/groups.cc"
# shellcheck disable=SC2086
$CC -std=c11 -Wall -Wextra -Werror -pedantic $cflags -o "$out/groups-c" "$root/groups.c" $libs ||
    fail "a C program using every group of the header does not build"
"$out/groups-c" >"$root/log" 2>&1 || { cat "$root/log"; fail "groups-c"; }
# The header promises C++ its extern "C": a C++ compiler is a test
# dependency, as criterion is, not a reason to skip.
command -v "$CXX" >/dev/null 2>&1 ||
    fail "no C++ compiler ($CXX) to build the installed header as C++: sudo apt-get install -y g++"
# shellcheck disable=SC2086
$CXX -std=c++11 -Wall -Wextra -Werror -pedantic $cflags -o "$out/groups-cxx" \
    "$root/groups.cc" $libs || fail "a C++ program using every group of the header does not build"
"$out/groups-cxx" >"$root/log" 2>&1 || { cat "$root/log"; fail "groups-cxx"; }
echo "  ok      the installed header's groups, from C and C++"
# A group included on its own is refused, with one error that names
# <shmlease.h>.
while read -r g; do
    printf '#include <%s>\nint main(void) { return 0; }\n' "$g" >"$root/direct.c"
    # shellcheck disable=SC2086
    if $CC -std=c11 $cflags -c -o "$root/direct.o" "$root/direct.c" 2>"$root/direct.err"; then
        fail "#include <$g> on its own compiles"
    fi
    grep -q "include <shmlease.h>, not <$g>" "$root/direct.err" ||
        { cat "$root/direct.err"; fail "#include <$g> on its own: not the message"; }
    [ "$(grep -c 'error:' "$root/direct.err")" = 1 ] ||
        { cat "$root/direct.err"; fail "#include <$g> on its own: more than the one error"; }
done <"$root/groups-installed"

"$dest$prefix/bin/shmlease" version >/dev/null || fail "installed tool does not run"
command -v man >/dev/null 2>&1 ||
    fail "man is needed to check the installed pages: sudo apt-get install -y man-db"
for p in man1/shmlease.1 man3/shmlease.3 man7/shmlease.7; do
    MANWIDTH=80 man -l "$dest$prefix/share/man/$p" 2>"$root/manerr" | grep -q shmlease ||
        fail "man -l $p shows nothing"
    [ ! -s "$root/manerr" ] || { cat "$root/manerr"; fail "man -l $p warns"; }
done
$MAKE --no-print-directory -s B="$B" uninstall DESTDIR="$dest" PREFIX=$prefix >/dev/null
left=$(find "$dest" -type f -o -type l)
[ -z "$left" ] || fail "uninstall left: $left"

# A prefix of one's own, as the README shows it: the program finds the shared
# library through -rpath or LD_LIBRARY_PATH, and not in that prefix without.
unset LD_LIBRARY_PATH PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_LIBDIR
custom=$root/custom
$MAKE --no-print-directory -s B="$B" install PREFIX="$custom" >/dev/null
export PKG_CONFIG_PATH="$custom/lib/pkgconfig"
# shellcheck disable=SC2046
$CC -std=c11 -o "$out/leader-rpath" examples/leader.c $(pkg-config --cflags --libs shmlease) \
    -Wl,-rpath,"$(pkg-config --variable=libdir shmlease)" || fail "rpath build failed"
# shellcheck disable=SC2046
$CC -std=c11 -o "$out/leader-plain" examples/leader.c $(pkg-config --cflags --libs shmlease) ||
    fail "plain build failed"
ldd "$out/leader-rpath" | grep -q "$custom/lib/libshmlease.so" ||
    fail "the -rpath build does not resolve to $custom/lib"
ldd "$out/leader-plain" | grep -q "$custom/lib/libshmlease.so" &&
    fail "without -rpath the loader found $custom/lib on its own: the README is wrong"
"$out/leader-rpath" "$tag-rpath" >"$root/log" 2>&1 || { cat "$root/log"; fail "leader-rpath"; }
LD_LIBRARY_PATH="$custom/lib" "$out/leader-plain" "$tag-plain" >"$root/log" 2>&1 ||
    { cat "$root/log"; fail "leader-plain with LD_LIBRARY_PATH"; }
$MAKE --no-print-directory -s B="$B" uninstall PREFIX="$custom" >/dev/null
left=$(find "$custom" -type f -o -type l)
[ -z "$left" ] || fail "uninstall left: $left"
echo "  ok      install, pkg-config builds, custom prefix (-rpath, LD_LIBRARY_PATH), uninstall"
