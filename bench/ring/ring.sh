#!/usr/bin/env bash
# hearth ring benchmark (issue 4): see docs/residency.md.
#  (a) TPOT of 1..4 local processes (head + 0..3 workers, k = 1) with the model in RAM, and
#      the overhead per hop.
#  (b) memory-constrained: head + 2 workers, each worker in its own cgroup v1 memory limit of
#      about half its share of the layers (page cache counts against it; each worker has its
#      own copy of the file because the cache is charged to the first reader of an inode);
#      k = 1 (plain pipeline, nothing to prefetch) vs k = 2, 4 (PRP), prefetch on / off. Caches are dropped
#      before every measured run. Needs root for (b); skipped otherwise.
# Usage: bench/ring/ring.sh [--bin PATH] [--dir DIR] [--tokens N] [--limit-mb MB]
# Prints tables to stdout and, as the last line, a JSON summary.
set -euo pipefail

BIN=${HEARTH_BIN:-$(dirname "$0")/../../build/bin/hearth}
DIR=${TMPDIR:-/tmp}/hearth-bench-ring
TOKENS=16
LIMIT_MB=128
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --tokens) TOKENS=$2; shift 2 ;;
    --limit-mb) LIMIT_MB=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
BIN=$(readlink -f "$BIN")
mkdir -p "$DIR"
# shellcheck source=../lib/cluster_key.sh
source "$(dirname "$0")/../lib/cluster_key.sh"
use_cluster_key "$BIN" "$DIR"
CGROOT=/sys/fs/cgroup/memory
PIDS=()
CGS=()

cleanup() {
  for p in "${PIDS[@]:-}"; do [[ -n "$p" ]] && kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do [[ -n "$p" ]] && wait "$p" 2>/dev/null || true; done
  PIDS=()
  for c in "${CGS[@]:-}"; do
    [[ -n "$c" && -d "$c" ]] || continue
    # A cgroup can only go once it has no tasks; reparent any leftovers first.
    while read -r t; do echo "$t" > "$CGROOT/cgroup.procs" 2>/dev/null || true; done < "$c/cgroup.procs"
    rmdir "$c" 2>/dev/null || true
  done
  CGS=()
}
trap cleanup EXIT INT TERM

MODEL="$DIR/m0.gguf"
if [[ ! -f "$MODEL" ]]; then
  "$BIN" synth --preset llama3-8b --scale 0.25 --type q4_k_m -o "$MODEL" >&2
fi
for i in 1 2 3; do [[ -f "$DIR/m$i.gguf" ]] || cp "$MODEL" "$DIR/m$i.gguf"; done

# start_worker INDEX [CGROUP]: a worker on its own model copy, optionally in a memory cgroup;
# sets ADDR. Not called in a subshell, so PIDS keeps the pid for cleanup.
start_worker() {
  local i=$1 cg=${2:-} out="$DIR/w$1.out"
  : > "$out"
  if [[ -n "$cg" ]]; then
    sh -c "echo \$\$ > $cg/cgroup.procs && exec '$BIN' worker --listen tcp://127.0.0.1:0 -m '$DIR/m$i.gguf' -t 1 --name w$i" \
      > "$out" 2> "$DIR/w$i.err" &
  else
    "$BIN" worker --listen tcp://127.0.0.1:0 -m "$DIR/m$i.gguf" -t 1 --name "w$i" > "$out" 2> "$DIR/w$i.err" &
  fi
  PIDS+=($!)
  for _ in $(seq 100); do grep -q listening "$out" && break; sleep 0.1; done
  ADDR=$(awk '/listening/ {print $3}' "$out")
}

run_head() {  # run_head WORKERS PLAN PREFETCH -> JSON line
  "$BIN" run -m "$MODEL" -p "the ring" -n "$TOKENS" -t 1 -c 512 --ignore-eos --json \
    ${1:+--workers "$1"} ${2:+--plan "$2"} ${3:+--prefetch "$3"} 2> "$DIR/head.err" | tail -1
}

echo "== (a) model in RAM: TPOT for 1..4 processes (k = 1, one thread each)"
cat "$MODEL" "$DIR"/m[123].gguf > /dev/null
printf "%-8s %10s %14s\n" devices "TPOT ms" "ms per hop"
A_JSON="[]"
T1=""
for n in 1 2 3 4; do
  addrs=""
  for ((i = 1; i < n; i++)); do start_worker $i; addrs+="${addrs:+,}$ADDR"; done
  j=$(run_head "$addrs" "" "")
  cleanup
  tpot=$(jq .tpot_ms <<< "$j")
  [[ $n -eq 1 ]] && T1=$tpot
  hop=$(jq -n "if $n == 1 then null else ($tpot - $T1) / $n end")
  printf "%-8s %10.2f %14s\n" "$n" "$tpot" "$(jq -r 'if . == null then "-" else (.*100|round/100|tostring) end' <<< "$hop")"
  A_JSON=$(jq -c ". + [{devices: $n, tpot_ms: $tpot, hop_ms: $hop}]" <<< "$A_JSON")
done

B_JSON="[]"
if [[ $(id -u) -ne 0 || ! -d "$CGROOT" ]]; then
  echo "== (b) skipped: needs root and cgroup v1 memory at $CGROOT"
else
  echo "== (b) memory-constrained: head + 2 workers, each worker limited to ${LIMIT_MB} MiB (cgroup v1, page cache included)"
  printf "%-4s %-10s %-9s %9s %12s %10s %10s %10s %9s\n" k plan prefetch "TPOT ms" "reload MB/t" "majflt/t" \
    "comp ms" "wait ms" "press max"
  for cfg in "1 10,11,11 off" "2 6,5,5 off" "2 6,5,5 on" "4 3,3,2 off" "4 3,3,2 on"; do
    read -r k plan pf <<< "$cfg"
    sync
    echo 3 > /proc/sys/vm/drop_caches
    addrs=""
    for i in 1 2; do
      cg="$CGROOT/hearth-bench-$i"
      mkdir -p "$cg"
      CGS+=("$cg")
      echo $((LIMIT_MB << 20)) > "$cg/memory.limit_in_bytes"
      start_worker $i "$cg"
      addrs+="${addrs:+,}$ADDR"
    done
    j=$(run_head "$addrs" "$plan" "$pf")
    cleanup
    # Workers' per-token figures, averaged over the two constrained workers.
    row=$(jq -c --arg k "$k" --arg plan "$plan" --arg pf "$pf" '{k: ($k|tonumber), plan: $plan, prefetch: $pf,
        tpot_ms, workers: [.devices[1:][] | {reload_bytes, major_faults, compute_ms, wait_ms, pressure_max,
        prefetch_bytes, release_bytes}],
        head: .devices[0]}' <<< "$j")
    B_JSON=$(jq -c ". + [$row]" <<< "$B_JSON")
    jq -r '[.k, .plan, .prefetch, .tpot_ms, ([.workers[].reload_bytes] | add / length / 1e6),
        ([.workers[].major_faults] | add / length), ([.workers[].compute_ms] | add / length),
        ([.workers[].wait_ms] | add / length), ([.workers[].pressure_max] | max)] |
        @tsv' <<< "$row" | awk -F'\t' '{printf "%-4s %-10s %-9s %9.1f %12.1f %10.0f %10.1f %10.1f %8.0f%%\n",
        $1, $2, $3, $4, $5, $6, $7, $8, 100 * $9}'
  done
fi
jq -cn --argjson a "$A_JSON" --argjson b "$B_JSON" --arg limit "$LIMIT_MB" --arg tokens "$TOKENS" \
  '{bench: "ring", tokens: ($tokens|tonumber), in_ram: $a, constrained: {limit_mib: ($limit|tonumber), runs: $b}}'
