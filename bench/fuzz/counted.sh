#!/usr/bin/env bash
# Runs each fuzz target for a fixed number of executions from its committed seeds and prints
# executions, rate, coverage and crashes. Usage: bench/fuzz/counted.sh BIN_DIR [SCALE]
# SCALE divides the counts (SCALE=100 for a quick look). TARGETS="gguf_fuzz http_fuzz" runs
# only those (two lanes on two cores: run two such invocations). New inputs go to a scratch
# corpus under /tmp, never into the committed seeds.
set -euo pipefail
bin=$(cd "${1:?usage: counted.sh BIN_DIR [SCALE]}" && pwd)
scale=${2:-1}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/hearth-fuzz-counted.XXXXXX)
# target  runs  max_len  seeds
# The tokenizer's inputs are capped at 2 KiB: its work is linear in the text (about 2 us per
# byte under ASan), so 8 KiB inputs held it near 360 runs/s and 10^7 runs out of reach, while
# 2 KiB already holds many pre-token words and one long word.
targets=(
  "gguf_fuzz 10000000 65536 tests/fixtures/gguf_seeds"
  "model_fuzz 10000000 65536 tests/fixtures/fuzz/model"
  "wire_fuzz 10000000 65536 tests/fixtures/wire"
  "http_fuzz 10000000 8192 tests/fixtures/fuzz/http"
  "openai_fuzz 10000000 8192 tests/fixtures/fuzz/openai"
  "tokenizer_fuzz 10000000 2048 tests/fixtures/fuzz/tokenizer"
  "grammar_fuzz 10000000 8192 tests/fixtures/fuzz/grammar"
  "jinja_fuzz 1000000 8192 tests/fixtures/fuzz/jinja"
)
printf '%-16s %12s %10s %8s %8s %s\n' target executions exec/s cov crashes seconds
for line in "${targets[@]}"; do
  read -r name runs max_len seeds <<<"$line"
  if [[ -n "${TARGETS:-}" && " $TARGETS " != *" $name "* ]]; then continue; fi
  runs=$((runs / scale))
  mkdir -p "$work/$name"
  start=$(date +%s)
  status=0
  "$bin/$name" -runs="$runs" -max_len="$max_len" -artifact_prefix="$work/$name-" \
    -print_final_stats=1 "$work/$name" "$root/$seeds" >"$work/$name.log" 2>&1 || status=$?
  secs=$(( $(date +%s) - start ))
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$name.log" | grep -o '[0-9]*$' || echo 0)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$work/$name.log" | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -o 'cov: [0-9]*' "$work/$name.log" | tail -1 | grep -o '[0-9]*' || echo 0)
  crashes=$( (ls "$work/$name"-crash-* "$work/$name"-leak-* "$work/$name"-timeout-* "$work/$name"-oom-* 2>/dev/null || true) | wc -l)
  [[ $status -ne 0 && $crashes -eq 0 ]] && crashes="exit$status"
  printf '%-16s %12s %10s %8s %8s %s\n' "$name" "$execs" "$rate" "$cov" "$crashes" "$secs"
done
echo "logs and any crash inputs: $work"
