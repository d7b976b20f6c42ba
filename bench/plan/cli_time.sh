#!/usr/bin/env bash
# Wall time of `hearth plan --devices FILE --json` (process start, profile, Halda, JSON out) on
# every generated fleet of 4-64 devices (the paper's Table 3 devices, +-30% jitter) and every
# testbed in bench/testbeds, for Llama-3-70B Q4_K_M. Prints per size the median and the
# largest, and the slowest file overall. Usage: bench/plan/cli_time.sh [BIN] [SEEDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-$root/build/bin/hearth}
seeds=${2:-20}
work=$(mktemp -d /tmp/hearth-plan-time.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$root"
"$bin" bench plan --seeds "$seeds" --write-fleets "$work" >/dev/null
ms_of() {  # wall milliseconds of one plan; a plan must be found
  local start end
  start=$(date +%s%N)
  "$bin" plan --preset llama3-70b --devices "$1" --json >"$work/out.txt" 2>&1 ||
    { echo "no plan for $1:"; tail -3 "$work/out.txt"; exit 1; }
  end=$(date +%s%N)
  echo $(((end - start) / 1000000))
}
printf '%-28s %8s %10s %10s\n' set files median_ms max_ms
worst=0
worst_file=
report() {  # name, files...
  local name=$1
  shift
  local times=()
  for f in "$@"; do
    t=$(ms_of "$f")
    times+=("$t")
    if ((t > worst)); then worst=$t; worst_file=$f; fi
  done
  sorted=$(printf '%s\n' "${times[@]}" | sort -n)
  median=$(echo "$sorted" | sed -n "$(((${#times[@]} + 1) / 2))p")
  printf '%-28s %8s %10s %10s\n' "$name" "${#times[@]}" "$median" "$(echo "$sorted" | tail -1)"
}
for M in 4 8 16 32 64; do
  report "fleets of $M" "$work"/fleet-"$M"-seed*.json
done
report "bench/testbeds" bench/testbeds/*.json
echo "slowest: $worst ms ($(basename "$worst_file"))"
