#!/bin/sh
# tools/stress_crashpoint.sh TOOL N:HIT SECONDS [stress arguments...]
#
# One crash-point campaign of make stress: the test build's tool (TOOL,
# build/test/shmlease) with SHL_CRASHPOINT=N:HIT, so that every worker dies
# at the HIT-th time it reaches crash point N (lib/kind_shm/crashpoint.h),
# and is respawned. Prints the campaign's JSON summary. Fails when the
# campaign fails, and also when no worker died: a point that is never
# reached (its operation rare in SECONDS, or the point moved) would pass
# without testing the recovery it names.
set -eu
if [ $# -lt 3 ]; then
    echo "usage: stress_crashpoint.sh TOOL N:HIT SECONDS [stress arguments...]" >&2
    exit 2
fi
tool=$1 cp=$2 seconds=$3
shift 3
rc=0
out=$(SHL_CRASHPOINT=$cp "$tool" stress --seconds "$seconds" --json "$@") || rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || exit "$rc"
# The summary is one JSON line; the crash point's deaths are its "kills"
# (the campaigns run with --kill-rate 0).
case $(printf '%s\n' "$out" | tail -n 1) in
*'"kills":0,'*)
    echo "stress: crash point $cp: no worker died there in $seconds s, so nothing was tested" >&2
    exit 1
    ;;
*'"kills":'*) ;;
*)
    echo "stress: crash point $cp: no summary with a kill count" >&2
    exit 1
    ;;
esac
