#!/bin/sh
# Runs the ThreadSanitizer test binary ("$@"), retrying only when criterion's
# runner itself fails to start under TSan: its arena is mapped at a random
# fixed address that TSan's mmap interceptor usually refuses (Snaipe/Criterion
# issue 274), so it aborts before running any test. A real report (data race,
# any other crash) fails at once.
out=$(mktemp)
trap 'rm -f "$out"' EXIT
n=0
while :; do
    "$@" >"$out" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        cat "$out"
        exit 0
    fi
    if grep -q 'ThreadSanitizer: data race\|ThreadSanitizer: lock-order\|\[FAIL\]' "$out" ||
        ! grep -q 'Could not initialize inheritable arena\|SEGV (/lib/.*libcriterion' "$out"; then
        cat "$out"
        exit $rc
    fi
    n=$((n + 1))
    if [ $n -ge 200 ]; then
        cat "$out"
        echo "run-tsan: criterion did not start under TSan in $n attempts" >&2
        exit $rc
    fi
done
