#!/bin/sh
# examples/leader_etcd.sh - two hosts elect a leader on an etcd table.
#
# Host A and host B each run `shmlease elect`: the scheduler (here a
# `sleep`) runs only on the host that leads, with the term's fencing token
# in SHMLEASE_TOKEN, and each proclaims its address for clients to find. An
# observer (`shmlease observe --json`) prints each leader as it comes. Host
# A's shmlease elect is then SIGKILLed (a crashed host): its term ends when
# its ttl runs out (etcd's lease clock: no other host can prove it dead),
# and host B leads, with a higher token.
#
#   usage: leader_etcd.sh URL_A [URL_B]
#
# URL_A and URL_B name the same table as the two hosts reach it (e.g.
# etcd://10.0.0.1:2379/jobs and etcd://10.0.0.2:2379/jobs); on one machine,
# two processes stand in for the two hosts. $SHMLEASE is the tool (default:
# shmlease on PATH). Exit status 0 when B took over from A with a higher
# token and the observer saw both in token order.
set -eu
A=$1
B=${2:-$1}
SHL=${SHMLEASE:-shmlease}
TTL=3s
dir=$(mktemp -d /tmp/leader-etcd-XXXXXX)
pids=
cleanup() {
    for p in $pids; do kill -9 "$p" 2>/dev/null || :; done
    rm -rf "$dir"
}
trap cleanup EXIT

# Waits up to $2 seconds for file $1.
await() {
    i=0
    while [ ! -s "$1" ]; do
        i=$((i + 1))
        [ "$i" -le "$(($2 * 20))" ] || { echo "FAIL: no $1 within $2 s" >&2; exit 1; }
        sleep 0.05
    done
}

# One host: runs its service while it leads; writes its token once leading.
host() { # NAME URL
    "$SHL" elect "$2" scheduler --id "$1" --ttl $TTL --value "$1:8080" \
        -- sh -c 'echo "$SHMLEASE_TOKEN" > '"$dir/$1"'; exec sleep 600' &
    pids="$pids $!"
    last=$!
}

host host-a "$A" # creates the table if missing
a=$last
await "$dir/host-a" 30
# The current leader first, then each new one.
"$SHL" observe "$A" scheduler --json --count 2 --timeout 60 > "$dir/leaders" &
observer=$!
pids="$pids $observer"
host host-b "$B"
echo "host-a leads with token $(cat "$dir/host-a"); host-b campaigns"
sleep 1
killed=$(date +%s%N)
kill -9 "$a" # host A crashes
echo "host-a killed"
await "$dir/host-b" 60
ms=$((($(date +%s%N) - killed) / 1000000))
ta=$(cat "$dir/host-a")
tb=$(cat "$dir/host-b")
echo "host-b leads with token $tb, about $ms ms after host-a's kill (ttl $TTL)"
wait "$observer"
cat "$dir/leaders"
[ "$tb" -gt "$ta" ] || { echo "FAIL: token $tb is not above $ta" >&2; exit 1; }
[ "$(grep -c '"id": "host-a", "token": '"$ta"',' "$dir/leaders")" = 1 ] &&
    [ "$(grep -c '"id": "host-b", "token": '"$tb"',' "$dir/leaders")" = 1 ] || {
    echo "FAIL: the observer did not see both leaders" >&2
    exit 1
}
echo "ok: host-b took over from host-a (token $ta, then $tb)"
