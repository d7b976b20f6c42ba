#!/usr/bin/env bash
# Side-by-side comparison of kernel variants: runs `hearth bench kernels` for each given
# hearth binary in turn, ROUNDS times (alternating, so all variants see the same machine
# drift), and prints per binary, type and shape the median of the per-run matvec/read ratios
# at the given thread count, or with -o matmul the matmul rows' fractions of the int8 peak
# (keyed by token count; -l picks the layout as for matvec). Use it to decide between two
# builds (e.g. a prefetch distance): one run of one binary moves by +-0.03 on this shared
# machine, six alternating rounds resolve ~0.02.
#
#   bench/ab_kernels.sh [-r ROUNDS] [-t TYPES] [-j THREADS] [-l gguf|rows16|all]
#                       [-o matvec|matmul] BIN1 BIN2 ...
#
# Needs python3 for the medians. Environment (HEARTH_ISA, ...) passes through to hearth.
set -euo pipefail

rounds=6 types=q4_k,q6_k,q8_0 threads=2 layout=rows16 op=matvec
while getopts "r:t:j:l:o:" opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    t) types=$OPTARG ;;
    j) threads=$OPTARG ;;
    l) layout=$OPTARG ;;
    o) op=$OPTARG ;;
    *) echo "usage: $0 [-r ROUNDS] [-t TYPES] [-j THREADS] [-l gguf|rows16|all] [-o matvec|matmul] BIN..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [ $# -lt 1 ]; then
  echo "usage: $0 [-r ROUNDS] [-t TYPES] [-j THREADS] [-l gguf|rows16|all] [-o matvec|matmul] BIN..." >&2
  exit 2
fi
case $op in
  matvec | matmul) ;;
  *) echo "$0: -o takes matvec or matmul, not '$op'" >&2; exit 2 ;;
esac
for bin in "$@"; do
  [ -x "$bin" ] || { echo "$0: $bin is not an executable" >&2; exit 2; }
done

for ((i = 1; i <= rounds; i++)); do
  for bin in "$@"; do
    "$bin" bench kernels --types "$types" --threads "$threads" --json 2>/dev/null | tail -n 1 |
      python3 -c '
import json, sys
bin, layout, op = sys.argv[1], sys.argv[2], sys.argv[3]
for r in json.load(sys.stdin)["rows"]:
    if r["op"] != op or (layout != "all" and r.get("layout", "gguf") != layout):
        continue
    key = "{}/{}@{}x{}".format(r["type"], r.get("layout", "gguf"), *r["shape"])
    if op == "matmul":
        print(bin, "{}x{}".format(key, r["tokens"]), r["peak_fraction"])
    else:
        print(bin, key, r["ratio"])
' "$bin" "$layout" "$op"
  done
done | python3 -c '
import statistics, sys
runs = {}
for line in sys.stdin:
    bin, key, ratio = line.split()
    runs.setdefault((key, bin), []).append(float(ratio))
for (key, bin), v in sorted(runs.items()):
    print("{:<26} {:<40} median {:.3f}  runs {}".format(key, bin, statistics.median(v),
          " ".join("{:.2f}".format(x) for x in v)))
'
