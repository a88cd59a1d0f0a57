#!/bin/sh
# tools/stress_selftest.sh TOOL - the stress campaign's self-test.
#
# Runs a short campaign with the test build's tool (TOOL, build/test/shmlease)
# once on a clean library, which must pass, and once per deliberate bug in
# lib/mutation.h (SHL_MUTATION=<name>), which the campaign's own checks must
# catch. Two campaigns at a time (SELFTEST_JOBS). One line per mutation:
# "mutation NAME: caught" or "mutation NAME: MISSED"; the exit status is 0
# only when the clean run passed and every mutation was caught.
tool=${1:?usage: stress_selftest.sh TOOL}
root=$(dirname "$0")/..
secs=${SELFTEST_SECONDS:-6}
jobs=${SELFTEST_JOBS:-2}
args="--seconds $secs --workers 6 --leases 2 --ttl-ms 60 --kill-rate 3 --pause-rate 3
      --revoke-rate 2 --repair-rate 20 --seed ${SELFTEST_SEED:-3} --json"
names=$(sed -n 's/^ *X([A-Z_]*, *"\([a-z-]*\)".*/\1/p' "$root/lib/mutation.h")
[ -n "$names" ] || { echo "stress-selftest: no mutations found in lib/mutation.h" >&2; exit 1; }
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT

# One campaign: its exit status in $out/NAME.rc, its summary in $out/NAME.json.
run() {
    if [ "$1" = clean ]; then
        "$tool" stress $args >"$out/$1.json" 2>"$out/$1.err"
    else
        SHL_MUTATION=$1 "$tool" stress $args --fail-fast >"$out/$1.json" 2>"$out/$1.err"
    fi
    echo $? >"$out/$1.rc"
}

n=0
for m in clean $names; do
    run "$m" &
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
    # Caught: the campaign failed because of violations, not an error.
    if [ "$(cat "$out/$m.rc")" = 1 ] && grep -q '"fail":"violations found"' "$out/$m.json"; then
        echo "mutation $m: caught"
    else
        echo "mutation $m: MISSED (exit $(cat "$out/$m.rc"))"
        cat "$out/$m.json"
        fail=1
    fi
done
exit $fail
