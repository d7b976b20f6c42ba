#!/usr/bin/env bash
# Resident memory and prompt compute of `hearth serve` under N concurrent chat requests that
# share one system prompt: paged KV (the default) against one contiguous cache per request
# (--kv-block 0). Prints, per mode, anonymous memory (RssAnon) before the requests and at its
# peak while they run (sampled every 0.2 s), the KV blocks in use, the prompt tokens not
# computed because a cached sequence held them, and the wall time of the burst.
#
#   bench/serve/kv_memory.sh MODEL [N_REQUESTS] [SYSTEM_RULES] [-- extra serve flags]
#
# SYSTEM_RULES (default 60) sets the system prompt's length (about 12 tokens a rule). Each
# request asks for 16 greedy tokens. Needs curl.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
hearth=${HEARTH:-$here/build/bin/hearth}
model=${1:?usage: kv_memory.sh MODEL [N_REQUESTS] [SYSTEM_RULES] [-- serve flags]}
n=${2:-16}
rules=${3:-60}
shift $(( $# < 3 ? $# : 3 ))
[ "${1:-}" = "--" ] && shift
extra=("$@")

system="You are the assistant of one home."
for i in $(seq 1 "$rules"); do system+=" Rule $i: answer plainly and briefly."; done

rss_anon() { awk '/^RssAnon:/ {printf "%d\n", $2 * 1024}' "/proc/$1/status"; }
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m {print $2}'; }

run_mode() {
  local mode=$1; shift
  local log; log=$(mktemp)
  "$hearth" serve -m "$model" --port 0 --parallel "$n" -c 8192 "$@" "${extra[@]}" >"$log" 2>&1 &
  local pid=$!
  local port=""
  for _ in $(seq 1 600); do
    port=$(sed -n 's/^hearth serve: listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$log")
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { echo "server did not start:"; cat "$log"; kill "$pid"; return 1; }
  local base; base=$(rss_anon "$pid")
  local peak=$base peak_blocks=0
  local t0; t0=$(date +%s.%N)
  local pids=()
  for i in $(seq 1 "$n"); do
    curl -s -o /dev/null "http://127.0.0.1:$port/v1/chat/completions" \
      -H 'Content-Type: application/json' \
      -d "{\"messages\":[{\"role\":\"system\",\"content\":\"$system\"},{\"role\":\"user\",\"content\":\"question $i\"}],\"max_tokens\":16,\"temperature\":0,\"ignore_eos\":true}" &
    pids+=($!)
  done
  alive() { local p; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
  while alive; do
    local now; now=$(rss_anon "$pid"); [ "$now" -gt "$peak" ] && peak=$now
    local b; b=$(metric "$port" hearth_kv_blocks_in_use); b=${b:-0}
    [ "${b%.*}" -gt "$peak_blocks" ] && peak_blocks=${b%.*}
    sleep 0.2
  done
  wait "${pids[@]}"
  local t1; t1=$(date +%s.%N)
  local prompt cached
  prompt=$(metric "$port" hearth_prompt_tokens_total)
  cached=$(metric "$port" hearth_prompt_tokens_cached_total)
  printf '%-10s requests %d  RssAnon %7.1f -> %7.1f MB (+%.1f)  KV blocks in use (peak sampled) %s  prompt tokens %s, cached %s  burst %.2f s\n' \
    "$mode" "$n" "$(echo "$base / 1000000" | bc -l)" "$(echo "$peak / 1000000" | bc -l)" \
    "$(echo "($peak - $base) / 1000000" | bc -l)" "$peak_blocks" "$prompt" "$cached" \
    "$(echo "$t1 - $t0" | bc -l)"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -f "$log"
}

echo "hearth serve on $(basename "$model"), $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
run_mode paged
run_mode contiguous --kv-block 0
