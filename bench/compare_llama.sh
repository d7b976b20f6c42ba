#!/bin/sh
# hearth vs llama.cpp on the same GGUF files, same machine: for each file and each repetition,
# llama-bench then `hearth bench e2e`, alternating so both see the same machine state.
# Prints one line per (file, run, threads). Needs an existing llama.cpp build (this script
# does not fetch or build one) and python3 for the JSON.
#
#   LLAMA_CPP_BIN=/path/to/llama.cpp/build/bin bench/compare_llama.sh F.gguf [G.gguf ...]
#   PROMPT=512 GEN=128 THREADS=2 RUNS=1 ...   (defaults: PROMPT=64 GEN=64 THREADS=1,2 RUNS=2)
set -eu
HEARTH=${HEARTH:-$(dirname "$0")/../build/bin/hearth}
: "${LLAMA_CPP_BIN:?set LLAMA_CPP_BIN to a directory holding llama-bench}"
PROMPT=${PROMPT:-64}; GEN=${GEN:-64}; THREADS=${THREADS:-1,2}; RUNS=${RUNS:-2}; REPS=${REPS:-3}
[ $# -ge 1 ] || { echo "usage: $0 MODEL.gguf [MODEL.gguf ...]" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for m in "$@"; do
  i=1
  while [ "$i" -le "$RUNS" ]; do
    "$LLAMA_CPP_BIN/llama-bench" -m "$m" -p "$PROMPT" -n "$GEN" -t "$THREADS" -r "$REPS" -o json \
      > "$tmp/lb.json" 2>/dev/null
    "$HEARTH" bench e2e -m "$m" --threads "$THREADS" --prompt-tokens "$PROMPT" \
      --gen-tokens "$GEN" --reps "$REPS" --json > "$tmp/he.txt" 2>&1
    python3 - "$m" "$i" "$tmp/lb.json" "$tmp/he.txt" <<'PY'
import json, sys
model, run, lb_path, he_path = sys.argv[1:]
lb = json.load(open(lb_path))
he = json.loads([l for l in open(he_path) if l.startswith('{')][-1])
for row in he['rows']:
    t = row['threads']
    pp = [x['avg_ts'] for x in lb if x['n_threads'] == t and x['n_prompt'] > 0]
    tg = [x['avg_ts'] for x in lb if x['n_threads'] == t and x['n_gen'] > 0]
    line = f"{model} run {run} threads {t}:"
    if pp:
        line += f" prefill {row['prefill_tok_s']:.1f} vs {pp[0]:.1f} ({row['prefill_tok_s'] / pp[0]:.2f}x)"
    if tg:
        line += f" decode {row['decode_tok_s']:.1f} vs {tg[0]:.1f} ({row['decode_tok_s'] / tg[0]:.2f}x)"
    line += f" roofline {row['decode_roofline_ratio']:.2f}, repacked {he.get('repacked_bytes', 0) >> 20} MiB"
    print(line)
PY
    i=$((i + 1))
  done
done
