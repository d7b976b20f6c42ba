#!/bin/sh
# hearth vs llama.cpp-family engines on the same GGUF files, same machine: for each file and
# each repetition, llama-bench of every engine then `hearth bench e2e`, alternating so all see
# the same machine state. Prints one line per (file, run, threads): hearth against each engine
# and against the faster of them. Needs existing builds (this script does not fetch or build
# one) and python3 for the JSON.
#
#   LLAMA_CPP_BIN=DIR[:DIR...] bench/compare_llama.sh F.gguf [G.gguf ...]
#     each DIR holds a llama-bench (e.g. ik_llama.cpp's and llama.cpp's build/bin); shared
#     libraries beside it are found through LD_LIBRARY_PATH
#   PROMPT=512 GEN=128 THREADS=2 RUNS=1 ...   (defaults: PROMPT=64 GEN=64 THREADS=1,2 RUNS=2)
set -eu
HEARTH=${HEARTH:-$(dirname "$0")/../build/bin/hearth}
: "${LLAMA_CPP_BIN:?set LLAMA_CPP_BIN to directories holding llama-bench, colon-separated}"
old_ifs=$IFS; IFS=:
for d in $LLAMA_CPP_BIN; do
  [ -x "$d/llama-bench" ] || { echo "$0: no llama-bench in '$d'" >&2; exit 2; }
done
IFS=$old_ifs
PROMPT=${PROMPT:-64}; GEN=${GEN:-64}; THREADS=${THREADS:-1,2}; RUNS=${RUNS:-2}; REPS=${REPS:-3}
[ $# -ge 1 ] || { echo "usage: $0 MODEL.gguf [MODEL.gguf ...]" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for m in "$@"; do
  i=1
  while [ "$i" -le "$RUNS" ]; do
    k=0; old_ifs=$IFS; IFS=:
    for d in $LLAMA_CPP_BIN; do
      IFS=$old_ifs
      LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$d/llama-bench" -m "$m" \
        -p "$PROMPT" -n "$GEN" -t "$THREADS" -r "$REPS" -o json > "$tmp/lb$k.json" 2>/dev/null
      echo "$d" > "$tmp/lb$k.name"
      k=$((k + 1))
    done
    IFS=$old_ifs
    "$HEARTH" bench e2e -m "$m" --threads "$THREADS" --prompt-tokens "$PROMPT" \
      --gen-tokens "$GEN" --reps "$REPS" --json > "$tmp/he.txt" 2>&1
    python3 - "$m" "$i" "$tmp" "$k" <<'PY'
import json, sys
model, run, tmp, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
engines = []
for k in range(n):
    name = open(f"{tmp}/lb{k}.name").read().strip()
    engines.append((name, json.load(open(f"{tmp}/lb{k}.json"))))
he = json.loads([l for l in open(f"{tmp}/he.txt") if l.startswith('{')][-1])
def part(label, ours, theirs):
    if not theirs:
        return ""
    vs = " / ".join(f"{v:.1f} ({ours / v:.2f}x)" for v in theirs)
    best = max(theirs)
    return f" {label} {ours:.1f} vs {vs}, vs faster {ours / best:.2f}x;"
for row in he['rows']:
    t = row['threads']
    pp = [x['avg_ts'] for _, lb in engines for x in lb if x['n_threads'] == t and x['n_prompt'] > 0]
    tg = [x['avg_ts'] for _, lb in engines for x in lb if x['n_threads'] == t and x['n_gen'] > 0]
    line = f"{model} run {run} threads {t}:"
    line += part("prefill", row['prefill_tok_s'], pp)
    line += part("decode", row['decode_tok_s'], tg)
    line += f" roofline {row['decode_roofline_ratio']:.3f}, repacked {he.get('repacked_bytes', 0) >> 20} MiB"
    print(line)
print(f"{model} run {run}: engines in order: " + ", ".join(name for name, _ in engines))
PY
    i=$((i + 1))
  done
done
