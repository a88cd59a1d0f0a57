#!/bin/sh
# tools/bench/ab.sh - alternating runs of two builds of the benchmark, and
# which of them gives the steadier rows.
#
#   ab.sh A_BENCH B_BENCH TOOL OUT RUNS [shmlease-bench arguments...]
#
# Runs A, B, A, B, ... RUNS times each (OUT/a1, OUT/b1, ...), so that
# whatever else the machine does meets both builds alike, then prints per
# row: each build's median of the runs' medians, and its spread between
# runs, (max - min) / median of the runs' medians. A build that steadies the
# rows has the smaller spreads; on a machine others use, only runs repeated
# when it is quiet say so (the summary's last line counts the rows each
# build was steadier on). make bench-align runs it for -falign-functions=64.
set -eu
if [ $# -lt 5 ]; then
    echo "usage: ab.sh A_BENCH B_BENCH TOOL OUT RUNS [bench arguments...]" >&2
    exit 2
fi
a=$1 b=$2 tool=$3 out=$4 runs=$5
shift 5
mkdir -p "$out"
i=1
while [ "$i" -le "$runs" ]; do
    for side in a b; do
        bin=$a
        [ "$side" = b ] && bin=$b
        echo "run $i/$runs: $side ($bin)"
        "$bin" --tool "$tool" --out "$out/$side$i" "$@" >"$out/$side$i.txt"
    done
    i=$((i + 1))
done
# group,row,metric,unit,rounds,min,median,max,skipped: the ns_op medians.
for side in a b; do
    i=1
    while [ "$i" -le "$runs" ]; do
        # Row names have commas: the fields are counted from the end.
        awk -v side="$side" 'NR > 1 && index($0, ",ns_op,") {
            n = split($0, f, ","); if (f[n - 2] == "") next
            print side "\t" substr($0, 1, index($0, ",ns_op,") - 1) "\t" f[n - 2] }' \
            "$out/$side$i/results.csv"
        i=$((i + 1))
    done
done | sort -t '	' -k2,2 -k1,1 -k3,3g | awk -F '\t' '
    function flush(   m, s) {
        if (key == "") return
        for (s = 0; s < 2; s++) {
            m[s] = n[s] ? v[s, int((n[s] + 1) / 2)] : 0
            sp[s] = m[s] > 0 ? (v[s, n[s]] - v[s, 1]) / m[s] : 0
        }
        printf "%-58s %9.1f %6.1f%% %9.1f %6.1f%%\n", key, m[0], 100 * sp[0], m[1], 100 * sp[1]
        if (n[0] && n[1]) { if (sp[1] < sp[0]) bwins++; else if (sp[0] < sp[1]) awins++ }
        delete v; n[0] = n[1] = 0
    }
    BEGIN { printf "%-58s %9s %7s %9s %7s\n", "row", "A ns", "spread", "B ns", "spread" }
    { if ($2 != key) { flush(); key = $2 } s = ($1 == "b"); v[s, ++n[s]] = $3 }
    END { flush(); printf "steadier rows (smaller spread): A %d, B %d\n", awins, bwins }'
