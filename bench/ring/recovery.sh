#!/usr/bin/env bash
# bench/ring/recovery.sh — what losing a worker mid-generation costs.
# A 3-process ring on 127.0.0.1 (head + 2 `hearth worker`s, plan 10,11,11 of 32 layers, k = 1,
# or --plan auto: Halda on measured profiles, and Halda again over the devices left),
# generating N tokens greedily; DELAY seconds into the generation the second worker is killed (SIGKILL) or
# frozen (SIGSTOP). The head re-forms the ring without it and goes on; this prints, per run,
# the recovery's figures from `hearth run --json` (detection: from the failed step's start to
# the failure; re-plan: choosing the new windows; new ring: stop, handshakes and loads;
# replay: the tokens so far re-evaluated on the new ring; stall: their sum) and whether the ids
# equal an undisturbed run.
#
# Usage: recovery.sh [--bin PATH] [--dir DIR] [--runs N (3)] [--tokens N (160)] [--delay S (1)]
#                    [--signal KILL|STOP (KILL)] [--plan W0,W1,W2|auto (10,11,11)]
set -euo pipefail
BIN=${HEARTH_BIN:-$(dirname "$0")/../../build/bin/hearth}
DIR=${TMPDIR:-/tmp}/hearth-recovery-bench
RUNS=3
TOKENS=160
DELAY=1
SIG=KILL
PLAN=10,11,11
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --tokens) TOKENS=$2; shift 2 ;;
    --delay) DELAY=$2; shift 2 ;;
    --signal) SIG=$2; shift 2 ;;
    --plan) PLAN=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "recovery.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done
BIN=$(readlink -f "$BIN")
mkdir -p "$DIR"
# shellcheck source=../lib/cluster_key.sh
source "$(dirname "$0")/../lib/cluster_key.sh"
use_cluster_key "$BIN" "$DIR"
MODEL="$DIR/llama3-8b-x0.25.gguf"
[[ -f "$MODEL" ]] || "$BIN" synth --preset llama3-8b --scale 0.25 --type q4_k_m -o "$MODEL" >&2
GEN=(-m "$MODEL" -p "the fire in the hearth" -n "$TOKENS" -t 1 --temp 0 --ignore-eos --json --repack off)
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [[ -n "$p" ]] && kill -9 "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do [[ -n "$p" ]] && wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

echo "model $MODEL, plan $PLAN, $TOKENS tokens, worker 2 gets SIG$SIG after ${DELAY}s, CPU: $(lscpu | sed -n 's/^Model name: *//p')"
BASE=$("$BIN" run "${GEN[@]}" 2>/dev/null | tail -1 | jq -c .ids)
for ((r = 1; r <= RUNS; r++)); do
  addrs=""
  PIDS=()
  for i in 1 2; do
    "$BIN" worker --listen tcp://127.0.0.1:0 "${GEN[@]:0:2}" -t 1 --repack off > "$DIR/w$i.out" 2> "$DIR/w$i.err" &
    PIDS+=($!)
    for _ in $(seq 100); do grep -q listening "$DIR/w$i.out" && break; sleep 0.1; done
    addrs+="${addrs:+,}$(sed -n 's/^listening on //p' "$DIR/w$i.out")"
  done
  extra=()
  [[ "$PLAN" == auto ]] && extra=(--no-select)  # every device in the first ring
  "$BIN" run "${GEN[@]}" --workers "$addrs" --plan "$PLAN" "${extra[@]}" > "$DIR/head.out" 2> "$DIR/head.err" &
  head=$!
  # DELAY counts from the ring's start (a --plan auto head first profiles the devices).
  for _ in $(seq 600); do grep -q "ring of" "$DIR/head.err" && break; sleep 0.1; done
  sleep "$DELAY"
  kill -"$SIG" "${PIDS[1]}"
  wait "$head" || { echo "run $r: the head failed:"; tail -3 "$DIR/head.err"; continue; }
  tail -1 "$DIR/head.out" | jq -r --argjson base "$BASE" --arg r "$r" '
    (.recoveries[0] // {}) as $x |
    "run \($r): detection \($x.detect_ms // 0 | floor) ms, re-plan \(($x.replan_ms // 0) * 100 | floor / 100) ms to \($x.plan // [] | map(tostring) | join(",")), new ring \($x.rebuild_ms // 0 | floor) ms, replay of \($x.replayed_tokens // 0) tokens \($x.replay_ms // 0 | floor) ms, stall \($x.stall_ms // 0 | floor) ms; \(.recoveries | length) recoveries, TPOT \(.tpot_ms * 100 | floor / 100) ms, ids \(if .ids == $base then "equal" else "DIFFER" end)"'
  cleanup
done
