#!/bin/sh
# tools/stress_selftest.sh TOOL - the stress campaign's self-test.
#
# Runs a short campaign with the test build's tool (TOOL, build/test/shmlease)
# once on a clean library, which must pass, and once per deliberate bug in
# lib/mutation.h (SHL_MUTATION=<name>), which the campaign's own checks must
# catch. Two campaigns at a time (SELFTEST_JOBS). A campaign is random
# (faults land where the scheduler lets them): a mutation its first campaign
# did not catch gets up to SELFTEST_TRIES - 1 more (8 campaigns in all by
# default), each with another seed, and is MISSED only when none catches it.
# Eight, because some faults are rare: on a loaded two-core machine about one
# campaign in five of clock-before-lock saw no stop inside a lock behind
# which a holder's lease ran out, and three campaigns all missed it now and
# then; a caught mutation costs no more campaigns. The retries run on more leases
# than the first campaign (SELFTEST_RETRY_ARGS): a lease left expired and
# untaken is what an expired holder's accepted write needs to be seen, and
# two leases under six workers are taken over too soon on a loaded machine. One line per mutation:
# "mutation NAME: caught" or "mutation NAME: MISSED"; the exit status is 0
# only when the clean runs passed and every mutation was caught.
#
# With SELFTEST_ETCD=1 (a build with etcd support) the same on etcd tables:
# a clean campaign on a throwaway three-member cluster whose members are
# killed, stopped and restarted (--member-chaos, SELFTEST_ETCD_SECONDS long),
# and each "etcd-..." mutation on a one-member cluster. The other mutations
# break the segment's enforcement and run on a segment only.
# Both etcd runs delete holder and token records under their holders
# (--admin-chaos): the clean one shows that this raises no false alarm,
# etcd-renew-blind and etcd-token-missing-ok need it to be seen, and
# etcd-incarnation-ignored its deletes of the table's whole prefix.
#
# The clean segment campaign and the mutations named "removed-..." also
# remove the table's name under the workers (rm_args): the clean one shows
# that removals raise no false alarm, the others need them to be seen.
# The mutations named "pool-..." run with a reader pool too small for the
# readers (pool_args): a lease keeps its first group, so groups go back
# mostly when a short pool takes kept ones back. The mutations named
# "value-..." run with one spare value buffer for two leases (value_args):
# a lease keeps its spare, so spares are taken back only from a short pool.
tool=${1:?usage: stress_selftest.sh TOOL}
root=$(dirname "$0")/..
secs=${SELFTEST_SECONDS:-6}
jobs=${SELFTEST_JOBS:-2}
tries=${SELFTEST_TRIES:-8}
seed=${SELFTEST_SEED:-3}
etcd=${SELFTEST_ETCD:-0}
esecs=${SELFTEST_ETCD_SECONDS:-25}
retry_args=${SELFTEST_RETRY_ARGS:---leases 6 --pause-rate 6}
args="--seconds $secs --workers 6 --leases 2 --ttl-ms 60 --kill-rate 3 --pause-rate 3
      --revoke-rate 2 --repair-rate 20 --json"
rm_args=${SELFTEST_REMOVE_ARGS:---remove-rate 2}
pool_args="--leases 6 --readers 3 --max-shared 8"
value_args="--spare-values 1"
eargs="--workers 4 --leases 2 --readers 2 --kill-rate 1 --pause-rate 1 --revoke-rate 1
       --admin-chaos --json"
all=$(sed -n 's/^ *X([A-Z_]*, *"\([a-z-]*\)".*/\1/p' "$root/lib/mutation.h")
[ -n "$all" ] || { echo "stress-selftest: no mutations found in lib/mutation.h" >&2; exit 1; }
names=$(echo "$all" | grep -v '^etcd-')
cleans=clean
if [ "$etcd" = 1 ]; then
    names="$names $(echo "$all" | grep '^etcd-')"
    cleans="clean etcd-clean"
fi
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT

# One campaign: its exit status in $out/NAME.rc, its summary in $out/NAME.json.
# $2: the seed; $3: more arguments (they override the ones before).
run() {
    case $1 in
    clean) "$tool" stress $args $rm_args --seed "$2" >"$out/$1.json" 2>"$out/$1.err" ;;
    etcd-clean)
        "$tool" stress $eargs --etcd-cluster 3 --member-chaos --seconds "$esecs" --seed "$2" \
            >"$out/$1.json" 2>"$out/$1.err" ;;
    etcd-*)
        SHL_MUTATION=$1 "$tool" stress $eargs --etcd-cluster 1 --seconds 12 --seed "$2" \
            --fail-fast >"$out/$1.json" 2>"$out/$1.err" ;;
    removed-*)
        SHL_MUTATION=$1 "$tool" stress $args $rm_args $3 --seed "$2" --fail-fast \
            >"$out/$1.json" 2>"$out/$1.err" ;;
    pool-*) # a lease keeps its first group: groups go back mostly from a short pool
        SHL_MUTATION=$1 "$tool" stress $args $pool_args $3 --seed "$2" --fail-fast \
            >"$out/$1.json" 2>"$out/$1.err" ;;
    value-*) # a lease keeps its spare: spares are taken back only from a short pool
        SHL_MUTATION=$1 "$tool" stress $args $value_args $3 --seed "$2" --fail-fast \
            >"$out/$1.json" 2>"$out/$1.err" ;;
    *)
        SHL_MUTATION=$1 "$tool" stress $args $3 --seed "$2" --fail-fast >"$out/$1.json" \
            2>"$out/$1.err" ;;
    esac
    echo $? >"$out/$1.rc"
}

# Caught: the campaign failed because of violations, not an error.
caught() {
    [ "$(cat "$out/$1.rc")" = 1 ] && grep -q '"fail":"violations found"' "$out/$1.json"
}

n=0
for m in $cleans $names; do
    run "$m" "$seed" &
    n=$((n + 1))
    [ $((n % jobs)) -eq 0 ] && wait
done
wait

fail=0
for c in $cleans; do
    if [ "$(cat "$out/$c.rc")" = 0 ]; then
        if [ "$c" = clean ]; then
            echo "clean library: pass"
        else
            echo "clean library on etcd (3 members, member and admin chaos): pass"
            tr ',' '\n' <"$out/$c.json" |
                grep -E '"(ops|acquisitions|acked|stale_refused|stale_refused_paused|kills|member_kills|member_pauses|leader_hits|unavailable|shared_checked|ttl_renewals|admin_deletes)"' |
                tr -d '"{' | tr '\n' ' '
            echo
        fi
    else
        echo "$c library: FAIL (exit $(cat "$out/$c.rc"))"
        cat "$out/$c.json" "$out/$c.err"
        fail=1
    fi
done
for m in $names; do
    t=1
    while ! caught "$m" && [ "$t" -lt "$tries" ]; do
        run "$m" $((seed + t)) "$retry_args"
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
