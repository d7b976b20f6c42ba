#!/usr/bin/env bash
# bench/ring/trip.sh — fewer trips around the ring: pipelined prefill and speculative decoding.
#
# Loopback (default): a ring of DEVICES real processes on 127.0.0.1 (the head and DEVICES - 1
# `hearth worker`s, one thread each, an even plan, k = 1), a llama3-8b-shaped model scaled by
# 0.125 (Q4_K_M, 32 layers). Every process shares this machine's cores, so pipelined chunks
# cannot overlap here: the loopback TTFT shows the cost of chunking, not its gain.
#   1. TTFT of a ~512- and a ~2048-token prompt, serial (--pipeline-chunk 0) and pipelined
#      (--pipeline-chunk CHUNK), alternating, REPS runs each; medians.
#   2. TPOT, drafts, acceptance and tokens per trip of plain decoding and of (a) the target
#      drafting for itself (the upper bound), (b) a 4-layer model of the same synthetic family,
#      (c) prompt lookup on a prompt that repeats itself; ids checked equal to plain decoding.
# --cluster: the same figures on the emulated home cluster (bench/cluster/run.sh, testbed
#   home4, --plan auto, the l8 model bench/cluster/bench.sh writes; needs root), where each
#   device has its own CPU share and the chunk is the one the cost model picks.
#
# Usage: trip.sh [--bin PATH] [--dir DIR] [--devices N (4)] [--reps N (3)] [--chunk N (128)]
#                [--tokens N (48)] [--cluster] [--testbed FILE (home4)] [--head NAME]
#                [--part ttft|spec|all]
# --head NAME: the testbed with device NAME as the head (home4's D1 has no room for a draft).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${HEARTH_BIN:-$HERE/../../build/bin/hearth}
DIR=${TMPDIR:-/tmp}/hearth-trip-bench
DEVICES=4 REPS=3 CHUNK=128 TOKENS=48 CLUSTER=0 PART=all TESTBED=$HERE/../cluster/testbeds/home4.json
HEAD_NAME=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --devices) DEVICES=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --chunk) CHUNK=$2; shift 2 ;;
    --tokens) TOKENS=$2; shift 2 ;;
    --cluster) CLUSTER=1; shift ;;
    --part) PART=$2; shift 2 ;;
    --testbed) TESTBED=$(readlink -f "$2"); shift 2 ;;
    --head) HEAD_NAME=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "trip.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done
BIN=$(readlink -f "$BIN")
mkdir -p "$DIR"
# shellcheck source=../lib/cluster_key.sh
source "$HERE/../lib/cluster_key.sh"
use_cluster_key "$BIN" "$DIR"
if [[ -n "$HEAD_NAME" ]]; then
  jq -e --arg h "$HEAD_NAME" 'any(.devices[]; .name == $h)' "$TESTBED" > /dev/null || {
    echo "trip.sh: no device $HEAD_NAME in $TESTBED" >&2
    exit 2
  }
  jq --arg h "$HEAD_NAME" '.devices |= map(if .name == $h then . + {head: true} else del(.head) end)
    | .title += " (\($h) as the head)"' "$TESTBED" > "$DIR/testbed-head-$HEAD_NAME.json"
  TESTBED="$DIR/testbed-head-$HEAD_NAME.json"
fi

MODEL="$DIR/l8.gguf" DRAFT="$DIR/l8-4layers.gguf"
if ((CLUSTER)); then
  MODEL=/tmp/hearth-cluster-bench/l8.gguf
  [[ -f "$MODEL" ]] || { echo "trip.sh: $MODEL missing: run bench/cluster/bench.sh once" >&2; exit 2; }
fi
SYNTH=(--preset llama3-8b --scale 0.125 --vocab 32000 --type q4_k_m -t 2)
[[ -f "$MODEL" ]] || "$BIN" synth "${SYNTH[@]}" -o "$MODEL" >&2
[[ -f "$DRAFT" ]] || "$BIN" synth "${SYNTH[@]}" --layers 4 -o "$DRAFT" >&2

# A prompt of about N tokens of this vocabulary: words from a fixed list in a seeded order.
make_prompt() {
  local n=$1 out=$2
  local words=$n got=0
  for _ in 1 2 3 4 5 6; do
    awk -v n="$words" 'BEGIN { srand(7); split("the fire hearth smoke house night warm stone river light wood door window bread winter garden story morning kettle lamp", w, " ");
      for (i = 0; i < n; i++) printf "%s ", w[int(rand() * 20) + 1]; }' > "$out"
    got=$("$BIN" tokenize -m "$MODEL" --ids-only --stdin < "$out" | jq length)
    ((got >= n - n / 50 && got <= n + n / 50)) && return 0
    words=$((words * n / got))
  done
}
make_prompt 512 "$DIR/p512.txt"
make_prompt 2048 "$DIR/p2048.txt"
# A prompt that repeats itself: one paragraph three times.
make_prompt 60 "$DIR/para.txt"
{ cat "$DIR/para.txt" "$DIR/para.txt" "$DIR/para.txt"; } > "$DIR/repeat.txt"

CPU=$(lscpu | sed -n 's/^Model name: *//p')
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

if ((CLUSTER)); then
  RUN=("$HERE/../cluster/run.sh" --testbed "$TESTBED" --model "$MODEL"
    --layers 32 --memory-scale 0.016188 --bin "$BIN" --copies /tmp/hearth-cluster-bench)
  # One emulated run: prompt file, tokens, head flags, system (default pipeline: every device,
  # windows in proportion to memory); prints the run's JSON line.
  one() {
    HEARTH_CLUSTER_PROMPT_FILE=$1 HEARTH_CLUSTER_HEAD_ARGS=$3 \
      "${RUN[@]}" --system "${4:-pipeline}" --tokens "$2" --ctx 2400 --work "$DIR/cluster-work" \
      2> "$DIR/cluster.err" | tail -1
  }
  where="emulated cluster $(basename "$TESTBED") (bench/cluster/run.sh; memory-proportional windows on the 4 devices unless said)"
else
  PIDS=()
  cleanup() {
    for p in "${PIDS[@]:-}"; do [[ -n "$p" ]] && kill -9 "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]:-}"; do [[ -n "$p" ]] && wait "$p" 2>/dev/null || true; done
  }
  trap cleanup EXIT
  ADDRS=""
  for ((i = 1; i < DEVICES; i++)); do
    "$BIN" worker --listen tcp://127.0.0.1:0 -m "$MODEL" -t 1 > "$DIR/w$i.out" 2> "$DIR/w$i.err" &
    PIDS+=($!)
    for _ in $(seq 100); do grep -q listening "$DIR/w$i.out" && break; sleep 0.1; done
    ADDRS+="${ADDRS:+,}$(sed -n 's/^listening on //p' "$DIR/w$i.out")"
  done
  one() {
    # shellcheck disable=SC2086
    "$BIN" run -m "$MODEL" -f "$1" -n "$2" -t 1 -c 2400 --temp 0 --ignore-eos --json \
      --workers "$ADDRS" $3 2> "$DIR/head.err" | tail -1
  }
  where="loopback ring of $DEVICES processes, one thread each"
fi

echo "# $where; model $(basename "$MODEL"); CPU: $CPU"
echo
if [[ $PART != spec ]]; then
echo "## TTFT: chunks one after another (--prefill-serial) vs following each other ($REPS runs each, alternating; median ms)"
echo
echo "| plan | prompt tokens | chunk | serial | pipelined | ratio | predicted serial | predicted pipelined |"
echo "|---|---|---|---|---|---|---|---|"
# ttft_row LABEL PROMPT CHUNK [SYSTEM EXTRA]: REPS alternating serial / pipelined runs.
ttft_row() {
  local label=$1 prompt=$2 chunk=$3 system=${4:-} extra=${5:-}
  local serial=() piped=() s q
  for ((r = 0; r < REPS; r++)); do
    s=$(one "$DIR/$prompt.txt" 1 "$extra --pipeline-chunk $chunk --prefill-serial" "$system")
    q=$(one "$DIR/$prompt.txt" 1 "$extra --pipeline-chunk $chunk" "$system")
    serial+=("$(jq .ttft_ms <<< "$s")")
    piped+=("$(jq .ttft_ms <<< "$q")")
  done
  local ms mp
  ms=$(printf '%s\n' "${serial[@]}" | median)
  mp=$(printf '%s\n' "${piped[@]}" | median)
  jq -r --arg name "$label" --argjson ms "$ms" --argjson mp "$mp" --argjson s "$s" '
    def num: if type == "number" then floor else "-" end;
    "| \($name) | \(.prompt_tokens) | \(.prefill.chunk) | \($ms | floor) | \($mp | floor) | \(($mp / $ms) * 100 | floor / 100) | \($s.prefill.predicted_ttft_ms | num) | \(.prefill.predicted_ttft_ms | num) |"' <<< "$q"
}
for p in 512 2048; do
  if ((CLUSTER)); then
    ttft_row "4 devices, memory-proportional" "p$p" "$CHUNK"
    # Halda over every device, the chunk its cost model picks for this prompt.
    c=$(one "$DIR/p$p.txt" 1 "--no-select" halda | jq .prefill.chunk)
    ttft_row "Halda --no-select, chunk from the plan" "p$p" "$c" halda "--no-select"
  else
    ttft_row "$DEVICES devices, even" "p$p" "$CHUNK"
  fi
done
fi
[[ $PART == ttft ]] && exit 0
echo
echo "## Speculative decoding ($TOKENS tokens, greedy; median of $REPS runs)"
echo
echo "TPOT counts everything after the first token; a trip is one verification around the ring"
echo "(TPOT x tokens less the drafter's time, over the trips); 'free drafts' is the TPOT the trips"
echo "alone would give: plain TPOT over it is the gain of a drafter that costs nothing."
echo
echo "| drafts | prompt | TPOT ms | vs plain | drafted | accepted | acceptance | tokens per trip | trip ms | draft ms per trip | free drafts TPOT ms | ids |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for prompt in p512 repeat; do
  base=""
  for kind in plain self small lookup; do
    case $kind in
      plain) flags="" ;;
      self) flags="-md $MODEL --draft-p-min 0 --draft-max 8" ;;
      small) flags="-md $DRAFT --draft-p-min 0 --draft-max 4" ;;
      lookup) flags="--draft-lookup" ;;
    esac
    tpots=()
    last=""
    for ((r = 0; r < REPS; r++)); do
      last=$(one "$DIR/$prompt.txt" "$TOKENS" "$flags") || last=""
      [[ -n "$last" ]] || break
      tpots+=("$(jq .tpot_ms <<< "$last")")
    done
    if [[ -z "$last" ]]; then
      echo "| $kind | $prompt | failed: $(tail -1 "$DIR/cluster.err" 2> /dev/null || tail -1 "$DIR/head.err") |"
      continue
    fi
    t=$(printf '%s\n' "${tpots[@]}" | median)
    [[ $kind == plain ]] && { base=$t; plain_ids=$(jq -c .ids <<< "$last"); }
    jq -r --arg kind "$kind" --arg prompt "$prompt" --argjson t "$t" --argjson base "$base" \
      --argjson plain "${plain_ids:-null}" '
      ((.ids | length) - 1) as $n | (.trips // $n) as $trips | (.draft_ms // 0) as $d
      | (if $trips > 0 then (.tpot_ms * $n - $d) / $trips else 0 end) as $trip
      | "| \($kind) | \($prompt) | \($t * 100 | floor / 100) | \(($t / $base) * 100 | floor / 100) | \(.drafted // 0) | \(.accepted // 0) | \(if (.drafted // 0) > 0 then (.accepted / .drafted * 100 | floor | tostring) + "%" else "-" end) | \(.tokens_per_trip * 100 | floor / 100) | \($trip * 100 | floor / 100) | \(if $trips > 0 then ($d / $trips * 100 | floor / 100) else 0 end) | \(if $n > 0 then ($trip * $trips / $n * 100 | floor / 100) else 0 end) | \(if $plain == null or .ids == $plain then "equal" else "DIFFER" end) |"' <<< "$last"
  done
done
