#!/usr/bin/env bash
# bench/cluster/bench.sh — the end-to-end home-cluster benchmark (`make bench-cluster`).
# Synthesizes Llama-shaped models (8B, 30B, 70B shapes with dims shrunk 8x), sizes each
# emulated device's memory so that model size over cluster memory mirrors the paper's
# testbed, runs every system of run.sh on every model, and writes bench/results/REPORT.md and
# PNG plots (report.sh). See docs/cluster-bench.md.
#
# Usage: bench.sh [--profile small|full] [--bin PATH] [--data DIR] [--out DIR] [--testbed FILE]
#   small: 8B and 70B shapes, 6 tokens per run, once (about 3 minutes)
#   full:  8B, 30B and 70B shapes, 16 tokens per run, 3 repetitions (about 20 minutes)
#   moe:   a Qwen3-30B-A3B-like mixture of experts larger than the cluster's memory, 16 tokens
#   --reps N: repetitions (the report takes each system's median run)
# Environment: LLAMA_CPP_BIN=DIR with llama-bench: also run llama.cpp alone on the strongest
# device, same files and limits (optional). HEARTH_CLUSTER_SYSTEMS="halda halda-paper ...":
# run only these systems of run.sh (default: all but llamacpp, which LLAMA_CPP_BIN adds).
set -Eeuo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CMDLINE="bench/cluster/bench.sh $*"
PROFILE=small
REPS=""
BIN=${HEARTH_BIN:-$ROOT/build/bin/hearth}
DATA=${TMPDIR:-/tmp}/hearth-cluster-bench
OUT=$ROOT/bench/results
TESTBED=$HERE/testbeds/home4.json
while [[ $# -gt 0 ]]; do
  case "$1" in
    --profile) PROFILE=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --testbed) TESTBED=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -E/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if [[ $(id -u) -ne 0 ]]; then
  echo "bench/cluster: must run as root (namespaces, cgroups, blkio limits); try: sudo make bench-cluster" >&2
  exit 2
fi
BIN=$(readlink -f "$BIN")
case "$PROFILE" in
  small) MODELS=(l8 l70); TOKENS=6; REPS=${REPS:-1} ;;
  full) MODELS=(l8 l30 l70); TOKENS=16; REPS=${REPS:-3} ;;
  moe) MODELS=(m30); TOKENS=16; REPS=${REPS:-1} ;;
  *) echo "bench.sh: --profile small|full|moe" >&2; exit 2 ;;
esac
# shellcheck disable=SC2206
SYSTEMS=(${HEARTH_CLUSTER_SYSTEMS:-single single-mmap pipeline ring-k2-off ring-k2 halda halda-prefetch halda-paper halda-mmap halda-k1 halda-cache})
for s in "${SYSTEMS[@]}"; do
  case "$s" in
    single | pipeline | ring-k2 | ring-k2-off | halda | halda-prefetch | halda-paper | single-mmap | halda-mmap | halda-k1 | halda-cache | llamacpp) ;;
    *) echo "bench.sh: HEARTH_CLUSTER_SYSTEMS: unknown system '$s' (run.sh --help lists them)" >&2; exit 2 ;;
  esac
done
mkdir -p "$DATA" "$OUT"

# name -> synth arguments, layers, size of the real Q4_K_M model in bytes (what the scaled
# file stands for). Vocab 32000 so that the scaled-down embedding does not dominate.
declare -A SYNTH LAYERS REAL
SYNTH[l8]="--preset llama3-8b --scale 0.125"
LAYERS[l8]=32
REAL[l8]=4920000000
SYNTH[l30]="--arch llama --layers 60 --dim 768 --heads 6 --kv-heads 6 --ffn 2304"
LAYERS[l30]=60
REAL[l30]=19600000000
SYNTH[l70]="--preset llama3-70b --scale 0.125"
LAYERS[l70]=80
REAL[l70]=42500000000
# A mixture shaped as Qwen3-30B-A3B (48 layers, qwen3moe, a token reads 1/16 of the experts),
# with 64 experts of width 256 (4 per token) so that the file is as much larger than the
# cluster's emulated memory as the real model (18.6 GB) is than the paper cluster's 18.1 GiB;
# its real size is what the file stands for at the run's memory scale (computed below).
SYNTH[m30]="--arch qwen3moe --layers 48 --dim 256 --heads 2 --kv-heads 1 --head-dim 128 --ffn 768 --experts 64 --experts-used 4 --expert-ffn 256"
LAYERS[m30]=48
for m in "${MODELS[@]}" l70; do
  f="$DATA/$m.gguf"
  if [[ ! -f "$f" ]]; then
    # shellcheck disable=SC2086
    "$BIN" synth ${SYNTH[$m]} --vocab 32000 --type q4_k_m -t 2 -o "$f" >&2
  fi
done
# One memory scale for the whole run: the 70B file over the real 70B model, so the largest
# model overflows the cluster exactly as in the paper.
MEMSCALE=$(awk -v a="$(stat -c %s "$DATA/l70.gguf")" -v b="${REAL[l70]}" 'BEGIN { printf "%.6f", a / b }')
for m in "${MODELS[@]}"; do
  [[ -n "${REAL[$m]:-}" ]] || REAL[$m]=$(awk -v a="$(stat -c %s "$DATA/$m.gguf")" -v s="$MEMSCALE" 'BEGIN { printf "%.0f", a / s }')
done

RES="$OUT/results-$PROFILE.jsonl"
: > "$RES"
START=$(date -u +%FT%TZ)
UPTIME_BEFORE=$(uptime)
# Repetitions interleave the systems (every system, then again), so slow phases of the shared
# machine spread over all of them.
if [[ -n "${LLAMA_CPP_BIN:-}" && -z "${HEARTH_CLUSTER_SYSTEMS:-}" ]]; then SYSTEMS+=(llamacpp); fi
for ((rep = 1; rep <= REPS; rep++)); do
  for m in "${MODELS[@]}"; do
    for s in "${SYSTEMS[@]}"; do
      echo "== $m $s (run $rep of $REPS)" >&2
      line=$("$HERE/run.sh" --testbed "$TESTBED" --model "$DATA/$m.gguf" --system "$s" \
        --layers "${LAYERS[$m]}" --memory-scale "$MEMSCALE" --tokens "$TOKENS" --bin "$BIN" \
        --work "$DATA/work-$m-$s") || {
        echo "bench.sh: $m $s failed (see $DATA/work-$m-$s)" >&2
        line=$(jq -cn --arg s "$s" --arg m "$m.gguf" '{system: $s, model: $m, failed: true}')
      }
      jq -c --arg name "$m" --argjson real "${REAL[$m]}" --argjson L "${LAYERS[$m]}" --argjson rep "$rep" \
        '. + {name: $name, real_bytes: $real, layers: $L, rep: $rep}' <<< "$line" >> "$RES"
      jq -c '{system, name, tpot_ms, ttft_ms, k: .plan.k, pred: .plan.predicted_tpot_run_ctx_ms, predicted: .predicted_tpot_ms}' "$RES" | tail -1 >&2
    done
  done
done
jq -cn --arg profile "$PROFILE" --arg start "$START" --arg finish "$(date -u +%FT%TZ)" \
  --arg before "$UPTIME_BEFORE" --arg after "$(uptime)" --arg memscale "$MEMSCALE" \
  --arg testbed "$(basename "$TESTBED")" --argjson tokens "$TOKENS" --argjson reps "$REPS" \
  --arg cmd "$CMDLINE" --arg commit "$(git -C "$ROOT" rev-parse --short HEAD 2> /dev/null || echo unknown)" \
  '{profile: $profile, start: $start, finish: $finish, uptime_before: $before, uptime_after: $after,
    memory_scale: ($memscale | tonumber), testbed: $testbed, tokens: $tokens, reps: $reps, command: $cmd, commit: $commit}' \
  > "$OUT/run-$PROFILE.json"
"$HERE/report.sh" --results "$RES" --meta "$OUT/run-$PROFILE.json" --testbed "$TESTBED" --out "$OUT"
