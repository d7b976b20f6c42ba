#!/usr/bin/env bash
# Issue 19's kernel bar, checked: runs `hearth bench kernels --threads THREADS --json` ROUNDS
# times and prints, per type, layout and shape, the median over the rounds of
#   matvec: the ratio to the read bandwidth measured beside it (bar 0.9, both layouts), and
#           beside it the same ratio for the weights in cache ("cached": near 1, the kernel's
#           arithmetic bounds it; well above 1, its streaming does),
#   matmul: the fraction of the int8 multiply-add peak measured in the same run (bar 0.7,
#           the layout the engine uses: rows16 where the type has it), and beside it the
#           same fraction for the kernel alone (weights and tokens in L2),
#   amx:    where matmul runs a type on AMX tiles, the tile kernel alone over the AVX-512 VNNI
#           pair kernel alone (bar 2.0), and the tile unit's own rate; "not run" without AMX,
# each with "ok" or "below". Exits 0 whatever the figures (it reports, it does not gate).
#
#   bench/check_kernels.sh [-r ROUNDS] [-t TYPES] [-j THREADS] [HEARTH]
#
# Needs python3. Run it on a quiet machine: one run moves by +-0.03 (matvec) and more on a
# shared host; the median of several rounds is what to quote.
set -euo pipefail

rounds=3 types=q4_k,q5_k,q6_k,q8_0,q4_0 threads=2
while getopts "r:t:j:" opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    t) types=$OPTARG ;;
    j) threads=$OPTARG ;;
    *) echo "usage: $0 [-r ROUNDS] [-t TYPES] [-j THREADS] [HEARTH]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
hearth=${1:-$(dirname "$0")/../build/bin/hearth}
[ -x "$hearth" ] || { echo "$0: $hearth is not an executable" >&2; exit 2; }

for ((i = 1; i <= rounds; i++)); do
  "$hearth" bench kernels --types "$types" --threads "$threads" --json 2>/dev/null | tail -n 1
done | python3 -c '
import json, statistics, sys
runs = {}
kernels = {}  # matmul rows: the kernel alone (rows16), beside the matmul
amx = {}      # rows16 matmul rows on AMX tiles: the tiles over the VNNI pair kernel, both alone
amx_state, tile_peaks, int8_peaks = "none", [], []
for line in sys.stdin:
    run = json.loads(line)
    amx_state = run.get("amx", "none")
    top = str(max(int(t) for t in run["int8_peak_gmacs_by_threads"]))
    int8_peaks.append(run["int8_peak_gmacs_by_threads"][top])
    if "amx_peak_gmacs_by_threads" in run:
        tile_peaks.append(run["amx_peak_gmacs_by_threads"][top])
    for r in run["rows"]:
        if "amx_over_vnni" in r:
            amx.setdefault((r["type"], "x".join(str(d) for d in r["shape"]) + "x" + str(r["tokens"])),
                           []).append(r["amx_over_vnni"])
        layout = r.get("layout", "gguf")
        shape = "x".join(str(d) for d in r["shape"])
        if r["op"] == "matvec":
            key, value, bar = ("matvec", r["type"], layout, shape), r["ratio"], 0.9
        else:
            key, value, bar = ("matmul", r["type"], layout, shape + "x" + str(r["tokens"])), \
                r["peak_fraction"], 0.7
        runs.setdefault(key, (bar, []))[1].append(value)
        if "kernel_peak_fraction" in r:
            kernels.setdefault(key, []).append(r["kernel_peak_fraction"])
        if "cached_ratio" in r:
            kernels.setdefault(key, []).append(r["cached_ratio"])
# Matmul is held to the bar in the layout the engine prefills with: rows16 where it exists.
has_rows16 = {k[1] for k in runs if k[2] == "rows16"}
for key in sorted(runs):
    op, typ, layout, shape = key
    bar, values = runs[key]
    if op == "matmul" and layout == "gguf" and typ in has_rows16:
        continue
    m = statistics.median(values)
    alone = ""
    if key in kernels:
        alone = "  {} {:.3f}".format("kernel alone" if op == "matmul" else "cached",
                                     statistics.median(kernels[key]))
    print("{:<6} {:<5} {:<6} {:<16} median {:.3f}  bar {:.1f}  {:<5}  runs {}{}".format(
        op, typ, layout, shape, m, bar, "ok" if m >= bar else "below",
        " ".join("{:.2f}".format(v) for v in values), alone))
# The AMX bar (tiles >= 2x the VNNI path): the two kernels alone, side by side in one run.
if amx_state == "on":
    print("amx    tile unit {:.0f} GMAC/s = {:.1f}x the int8 peak (medians: the rate of the unit alone, "
          "which falls while other work on the host takes it)".format(
              statistics.median(tile_peaks), statistics.median(tile_peaks) / statistics.median(int8_peaks)))
    for key in sorted(amx):
        m = statistics.median(amx[key])
        print("amx    {:<5} rows16 {:<16} median {:.3f}  bar 2.0  {:<5}  runs {}  (tiles / VNNI, "
              "kernels alone)".format(key[0], key[1], m, "ok" if m >= 2 else "below",
                                      " ".join("{:.2f}".format(v) for v in amx[key])))
else:
    print("amx    not run: AMX is {} here ({})".format(
        amx_state, "HEARTH_AMX=0, or an ISA other than avx512" if amx_state == "off"
        else "no usable AMX-INT8 on this CPU"))
'
