#!/bin/sh
# tools/stress_selftest.sh TOOL - the stress campaign's self-test.
#
# Runs a short campaign with the test build's tool (TOOL, build/test/shmlease)
# once on a clean library, which must pass, and once per deliberate bug in
# lib/mutation.h (SHL_MUTATION=<name>), which the campaign's own checks must
# catch. Two campaigns at a time (SELFTEST_JOBS). A campaign is random
# (faults land where the scheduler lets them): a mutation its first campaign
# did not catch gets up to SELFTEST_TRIES - 1 more, each with another seed,
# and is MISSED only when none catches it. One line per mutation:
# "mutation NAME: caught" or "mutation NAME: MISSED"; the exit status is 0
# only when the clean run passed and every mutation was caught.
tool=${1:?usage: stress_selftest.sh TOOL}
root=$(dirname "$0")/..
secs=${SELFTEST_SECONDS:-6}
jobs=${SELFTEST_JOBS:-2}
tries=${SELFTEST_TRIES:-3}
seed=${SELFTEST_SEED:-3}
args="--seconds $secs --workers 6 --leases 2 --ttl-ms 60 --kill-rate 3 --pause-rate 3
      --revoke-rate 2 --repair-rate 20 --json"
names=$(sed -n 's/^ *X([A-Z_]*, *"\([a-z-]*\)".*/\1/p' "$root/lib/mutation.h")
[ -n "$names" ] || { echo "stress-selftest: no mutations found in lib/mutation.h" >&2; exit 1; }
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT

# One campaign: its exit status in $out/NAME.rc, its summary in $out/NAME.json.
# $2: the seed.
run() {
    if [ "$1" = clean ]; then
        "$tool" stress $args --seed "$2" >"$out/$1.json" 2>"$out/$1.err"
    else
        SHL_MUTATION=$1 "$tool" stress $args --seed "$2" --fail-fast >"$out/$1.json" \
            2>"$out/$1.err"
    fi
    echo $? >"$out/$1.rc"
}

# Caught: the campaign failed because of violations, not an error.
caught() {
    [ "$(cat "$out/$1.rc")" = 1 ] && grep -q '"fail":"violations found"' "$out/$1.json"
}

n=0
for m in clean $names; do
    run "$m" "$seed" &
    n=$((n + 1))
    [ $((n % jobs)) -eq 0 ] && wait
done
wait

fail=0
if [ "$(cat "$out/clean.rc")" = 0 ]; then
    echo "clean library: pass"
else
    echo "clean library: FAIL (exit $(cat "$out/clean.rc"))"
    cat "$out/clean.json" "$out/clean.err"
    fail=1
fi
for m in $names; do
    t=1
    while ! caught "$m" && [ "$t" -lt "$tries" ]; do
        run "$m" $((seed + t))
        t=$((t + 1))
    done
    if caught "$m"; then
        echo "mutation $m: caught$([ "$t" -gt 1 ] && echo " (campaign $t of $tries)")"
    else
        echo "mutation $m: MISSED (exit $(cat "$out/$m.rc"))"
        cat "$out/$m.json"
        fail=1
    fi
done
exit $fail
