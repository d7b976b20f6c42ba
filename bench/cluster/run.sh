#!/usr/bin/env bash
# bench/cluster/run.sh — one generation on an emulated home cluster (docs/cluster-bench.md).
# Brings the testbed's devices up (netns + veth + bridge, cgroup v1 memory/cpu/blkio limits,
# link relays), drops the page cache, runs real `hearth worker`s and the head, prints one JSON
# line with the head's figures and each device's kernel accounting, and tears everything
# down — on success, failure, and SIGINT/SIGTERM alike.
#
# Usage: run.sh --testbed FILE --model FILE --system SYSTEM [options]
#   SYSTEM: single          the engine alone on the strongest device (mmap, as llama.cpp does)
#           pipeline        every device, windows proportional to memory, k = 1 (exo/MemSched)
#           ring-k2         the same proportions halved: k = 2 rounds, prefetch on
#           ring-k2-off     the same, prefetch off
#           halda           --plan auto (Halda on measured profiles), prefetch off
#           halda-prefetch  --plan auto, prefetch on
#           halda-paper     --plan auto --cost-model paper, prefetch off
#           single-mmap     as single, every matrix paged in through the mapping (--residency
#                           mmap: the scheme before streaming)
#           halda-mmap      --plan auto --cost-model paper, prefetch on, every device
#                           --residency mmap (the ring before streaming)
#           halda-k1        --plan auto --rounds 1 (Halda's best plan with one round)
#           halda-cache     --plan auto, every device --stream-io cache (the streamed part
#                           read through the page cache instead of direct I/O)
#           llamacpp        llama-bench (LLAMA_CPP_BIN=DIR) alone on the strongest device
#   --layers L         the model's layer count (pipeline, ring-k2)
#   --memory-scale S   device memory = ram_available_gib * S + emulation.overhead_mib
#                      (ignored for devices with emulate.memory_mib)
#   --tokens N (8) --ctx N (256) --bin PATH --work DIR --keep-going-secs S (0)
#   --copies DIR       where per-device copies of the model live (default: next to it)
# Environment: HEARTH_CLUSTER_ID names the namespaces/cgroups (hc<ID>*, hearth-cluster-<ID>),
# default the pid. HEARTH_CLUSTER_DEVICE_ARGS="--stream-io direct ...": extra flags for every
# hearth worker and the head (A/B runs of device options; not for llamacpp).
# HEARTH_CLUSTER_HEAD_ARGS="--rounds 5 ...": extra flags for the head alone.
# HEARTH_CLUSTER_PROMPT_FILE=FILE: the prompt (default: a five-word one).
# HEARTH_CLUSTER_PLAN="1,6,7,2": the pipeline system's windows instead of memory-proportional
# ones (replaying a plan Halda chose, with its k = L / sum).
set -Eeuo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

TESTBED="" MODEL="" SYSTEM="" LAYERS=0 MEMSCALE=0 TOKENS=8 CTX=256 COPIES=""
HC_BIN=${HEARTH_BIN:-$HERE/../../build/bin/hearth}
HC_WORK=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --testbed) TESTBED=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --system) SYSTEM=$2; shift 2 ;;
    --layers) LAYERS=$2; shift 2 ;;
    --memory-scale) MEMSCALE=$2; shift 2 ;;
    --tokens) TOKENS=$2; shift 2 ;;
    --ctx) CTX=$2; shift 2 ;;
    --bin) HC_BIN=$2; shift 2 ;;
    --work) HC_WORK=$2; shift 2 ;;
    --copies) COPIES=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -E/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
hc_require_root "$@"
[[ -f "$TESTBED" ]] || { echo "run.sh: --testbed FILE is required (got '$TESTBED')" >&2; exit 2; }
[[ -f "$MODEL" ]] || { echo "run.sh: --model FILE is required (got '$MODEL')" >&2; exit 2; }
case "$SYSTEM" in
  single | pipeline | ring-k2 | ring-k2-off | halda | halda-prefetch | halda-paper | single-mmap | halda-mmap | halda-k1 | halda-cache) ;;
  llamacpp)
    [[ -x "${LLAMA_CPP_BIN:-}/llama-bench" ]] || {
      echo "run.sh: --system llamacpp needs LLAMA_CPP_BIN=DIR holding llama-bench" >&2
      exit 2
    } ;;
  *) echo "run.sh: --system single|pipeline|ring-k2|ring-k2-off|halda|halda-prefetch|halda-paper|single-mmap|halda-mmap|halda-k1|halda-cache|llamacpp (got '$SYSTEM')" >&2; exit 2 ;;
esac
if [[ "$SYSTEM" == pipeline || "$SYSTEM" == ring-k2* ]] && ((LAYERS <= 0)); then
  echo "run.sh: --system $SYSTEM needs --layers" >&2
  exit 2
fi
HC_BIN=$(readlink -f "$HC_BIN")
[[ -x "$HC_BIN" ]] || { echo "run.sh: hearth binary not found: $HC_BIN (--bin)" >&2; exit 2; }
MODEL=$(readlink -f "$MODEL")
COPIES=${COPIES:-$(dirname "$MODEL")}
if [[ -z "$HC_WORK" ]]; then HC_WORK=$(mktemp -d "${TMPDIR:-/tmp}/hearth-cluster.XXXXXX"); fi
mkdir -p "$HC_WORK"
# shellcheck source=../lib/cluster_key.sh
source "$HERE/../lib/cluster_key.sh"
use_cluster_key "$HC_BIN" "$HC_WORK"
HC_BLOCKDEV=$(hc_block_device "$COPIES")

on_exit() {
  local rc=$?
  hc_teardown
  exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'hc_log "failed at line $LINENO: $BASH_COMMAND"' ERR

# Devices in ring order, the head first (the file order, rotated).
TB=$(jq -c --argjson ms "$MEMSCALE" '
  (.emulation.overhead_mib // 0) as $ov
  | (.devices | map(.head == true) | index(true) // 0) as $h
  | .devices | (.[$h:] + .[:$h])
  | map({name, ram: .ram_available_gib,
         mem: (.emulate.memory_mib // ((.ram_available_gib * 1024 * $ms) + $ov | floor)),
         share: (.emulate.cpu_share // 1), disk: (.emulate.disk_read_mbps // 0),
         rtt: (.link.rtt_ms // 0), mbps: (.link.bandwidth_mbps // 0)})' "$TESTBED")
N=$(jq length <<< "$TB")
dev() { jq -r ".[$1].$2" <<< "$TB"; }
for ((i = 0; i < N; i++)); do
  if (($(dev "$i" mem) < 16)); then
    echo "run.sh: device $(dev "$i" name) would get $(dev "$i" mem) MiB; raise --memory-scale" >&2
    exit 2
  fi
done

# The devices taking part: all, or the strongest alone (highest cpu share, then memory).
if [[ "$SYSTEM" == single* || "$SYSTEM" == llamacpp ]]; then
  USE=($(jq -r 'to_entries | max_by([.value.share, .value.mem]) | .key' <<< "$TB"))
else
  USE=($(seq 0 $((N - 1))))
fi

copy_for() {  # each device maps its own copy: page cache is charged to the first reader
  local c
  c="$COPIES/$(basename "$MODEL" .gguf).$(dev "$1" name).gguf"
  if [[ ! -f "$c" || $(stat -c %s "$c") != $(stat -c %s "$MODEL") ]]; then cp "$MODEL" "$c"; fi
  echo "$c"
}

# Windows proportional to device memory (exo's rule), k = 1 or halved for k = 2.
# shellcheck disable=SC2016
memory_plan() {  # memory_plan K
  jq -r --argjson L "$LAYERS" --argjson k "$1" '
    (($L / $k) | ceil) as $W | (map(.mem) | add) as $tot
    | [.[] | .mem * $W / $tot] as $x
    | [$x[] | floor | if . < 1 then 1 else . end] as $w0
    | ($W - ($w0 | add)) as $rest
    | ([range($x | length)] | sort_by(-($x[.] - ($x[.] | floor)))) as $order
    | reduce range(0; ([$rest, 0] | max)) as $j ($w0; .[$order[$j % ($order | length)]] += 1)
    | map(tostring) | join(",")' <<< "$TB"
}

hc_log "testbed $(basename "$TESTBED"), model $(basename "$MODEL"), system $SYSTEM, devices: $(for i in "${USE[@]}"; do
  printf '%s(%sMiB cpu%s disk%sMB/s rtt%sms %sMbps) ' "$(dev "$i" name)" "$(dev "$i" mem)" \
    "$(dev "$i" share)" "$(dev "$i" disk)" "$(dev "$i" rtt)" "$(dev "$i" mbps)"
done)"

declare -A FILE
for i in "${USE[@]}"; do FILE[$i]=$(copy_for "$i"); done
for i in "${USE[@]}"; do
  hc_device_up "$i" "$(dev "$i" mem)" "$(dev "$i" share)" "$(dev "$i" disk)" "$(dev "$i" rtt)" "$(dev "$i" mbps)"
done
# --plan auto: every device's profile, measured in its own namespace and cgroups (CPU quota,
# disk throttle) but with room for the profiler's buffers, which do not shrink with the
# emulated memory; its available memory is then set to the device's limit minus the
# process's own allowance (emulation.overhead_mib). Cached per device and model file.
if [[ "$SYSTEM" == halda* ]]; then
  OV=$(jq '.emulation.overhead_mib // 0' "$TESTBED")
  mkdir -p "$COPIES/profiles"
  for i in "${USE[@]}"; do
    pf="$COPIES/profiles/$(basename "${FILE[$i]}" .gguf).$(dev "$i" mem)MiB.json"
    if [[ ! -s "$pf" ]]; then
      lim="$HC_CGROOT/memory/$HC_CG/d$i/memory.limit_in_bytes"
      echo $((($(dev "$i" mem) + 1024) << 20)) > "$lim"
      hc_spawn "$i" "d$i" "$HC_WORK/profile$i.out" "$HC_WORK/profile$i.err" -- "$HC_BIN" profile \
        -m "${FILE[$i]}" -t 1 --no-cache --json --name "$(dev "$i" name)"
      wait "$HC_LASTPID"
      echo $(($(dev "$i" mem) << 20)) > "$lim"
      tail -1 "$HC_WORK/profile$i.out" | jq -c --argjson mem "$(dev "$i" mem)" --argjson ov "$OV" \
        '.ram_available_gib = (($mem - $ov) / 1024) | .ram_total_gib = ($mem / 1024)
         | .notes = ((.notes // "") + " ram_available = cgroup limit minus the process allowance")' > "$pf.tmp"
      mv "$pf.tmp" "$pf"
    fi
    cp "$pf" "$HC_WORK/profile-d$i.json"
  done
fi
for i in "${USE[@]}"; do  # the figures below are the run's alone
  echo 0 > "$HC_CGROOT/memory/$HC_CG/d$i/memory.max_usage_in_bytes"
  echo 0 > "$HC_CGROOT/memory/$HC_CG/d$i/memory.failcnt"
  echo 1 > "$HC_CGROOT/blkio/$HC_CG/d$i/blkio.reset_stats"
done
hc_drop_caches

HEAD=${USE[0]}
read -r -a DEVICE_ARGS <<< "${HEARTH_CLUSTER_DEVICE_ARGS:-}"
WORKERS=""
for i in "${USE[@]:1}"; do
  hc_spawn "$i" "d$i" "$HC_WORK/w$i.out" "$HC_WORK/w$i.err" -- "$HC_BIN" worker \
    --listen "tcp://$HC_SUBNET.$((i + 1)):9100" -m "${FILE[$i]}" -t 1 --name "$(dev "$i" name)" \
    $([[ "$SYSTEM" == halda* ]] && echo --profile "$HC_WORK/profile-d$i.json") \
    $([[ "$SYSTEM" == *-mmap ]] && echo --residency mmap) \
    $([[ "$SYSTEM" == *-cache ]] && echo --stream-io cache) "${DEVICE_ARGS[@]}"
  hc_wait_line "$HC_WORK/w$i.out" listening 30
  WORKERS+="${WORKERS:+,}tcp://$HC_SUBNET.$((i + 1)):9100"
done
hc_log "cluster up"

PROMPT=(-p "the fire in the hearth")
if [[ -n "${HEARTH_CLUSTER_PROMPT_FILE:-}" ]]; then PROMPT=(-f "$(readlink -f "$HEARTH_CLUSTER_PROMPT_FILE")"); fi
ARGS=(run -m "${FILE[$HEAD]}" "${PROMPT[@]}" -n "$TOKENS" -t 1 -c "$CTX" --temp 0
  --ignore-eos --json)
case "$SYSTEM" in
  pipeline) ARGS+=(--workers "$WORKERS" --plan "${HEARTH_CLUSTER_PLAN:-$(memory_plan 1)}" --prefetch off) ;;
  ring-k2) ARGS+=(--workers "$WORKERS" --plan "$(memory_plan 2)" --prefetch on) ;;
  ring-k2-off) ARGS+=(--workers "$WORKERS" --plan "$(memory_plan 2)" --prefetch off) ;;
  halda) ARGS+=(--workers "$WORKERS" --plan auto --prefetch off --profile "$HC_WORK/profile-d$HEAD.json") ;;
  halda-prefetch) ARGS+=(--workers "$WORKERS" --plan auto --prefetch on --profile "$HC_WORK/profile-d$HEAD.json") ;;
  halda-paper) ARGS+=(--workers "$WORKERS" --plan auto --cost-model paper --prefetch off --profile "$HC_WORK/profile-d$HEAD.json") ;;
  halda-mmap) ARGS+=(--workers "$WORKERS" --plan auto --cost-model paper --prefetch on --residency mmap --profile "$HC_WORK/profile-d$HEAD.json") ;;
  halda-k1) ARGS+=(--workers "$WORKERS" --plan auto --rounds 1 --prefetch off --profile "$HC_WORK/profile-d$HEAD.json") ;;
  halda-cache) ARGS+=(--workers "$WORKERS" --plan auto --prefetch off --stream-io cache --profile "$HC_WORK/profile-d$HEAD.json") ;;
  single-mmap) ARGS+=(--residency mmap) ;;
esac
ARGS+=("${DEVICE_ARGS[@]}")
read -r -a HEAD_ARGS <<< "${HEARTH_CLUSTER_HEAD_ARGS:-}"
ARGS+=("${HEAD_ARGS[@]}")
if [[ "$SYSTEM" == llamacpp ]]; then
  # Small batches: llama-bench sizes its compute buffers for -ub (default 512), which would not
  # fit the emulated memory of the larger models next to the weights it maps.
  ARGS=(-m "${FILE[$HEAD]}" -p 0 -n "$TOKENS" -t 1 -r 1 -b 32 -ub 32 -o json)
  CMD=("$LLAMA_CPP_BIN/llama-bench")
else
  CMD=("$HC_BIN")
fi
T0=$(date +%s.%N)
hc_spawn "$HEAD" "d$HEAD" "$HC_WORK/head.out" "$HC_WORK/head.err" -- "${CMD[@]}" "${ARGS[@]}"
HEADPID=$HC_LASTPID
# wait (not a foreground command), so INT/TERM reach the trap at once.
RC=0
wait "$HEADPID" || RC=$?
T1=$(date +%s.%N)
if ((RC != 0)); then
  hc_log "head exited $RC; its stderr:"
  tail -20 "$HC_WORK/head.err" >&2
  for i in "${USE[@]}"; do
    hc_log "device $(dev "$i" name): $(hc_device_stats "$i")"
  done
  exit 1
fi
if [[ "$SYSTEM" == llamacpp ]]; then
  # llama-bench prints a JSON array of tests; -p 0 leaves the one generation test.
  J=$(jq -c '.[0] | {tpot_ms: (1000 / .avg_ts), ttft_ms: null}' "$HC_WORK/head.out")
else
  J=$(tail -1 "$HC_WORK/head.out")
fi
jq -e . > /dev/null <<< "$J" || { hc_log "head printed no JSON"; exit 1; }

# Each device's entry in the head's devices[] and in the plan, found by name (the head is
# "head" there, "local" for a run on one device): Halda may drop devices, so ring positions of the testbed and of the run differ.
# The per-token disk and budget figures are carried explicitly (null when hearth has none).
# shellcheck disable=SC2016
DEVS="[]"
for ((u = 0; u < ${#USE[@]}; u++)); do
  i=${USE[$u]}
  s=$(hc_device_stats "$i")
  DEVS=$(jq -c --argjson s "$s" --argjson d "$(jq -c ".[$i]" <<< "$TB")" --argjson u "$u" \
    --argjson j "$J" '
    def find($list; $name; $u): ([($list // [])[] | select(.name == $name or ($u == 0 and (.name == "head" or .name == "local")))] | .[0]) // {};
    find($j.devices; $d.name; $u) as $h
    | ((find($j.plan.devices; $d.name; $u)) + (find($j.plan.halda.devices; $d.name; $u))) as $p
    | . + [$d + $s + ($h | with_entries(if .key == "name" then .key = "hearth_name" else . end))
      + {disk_bytes_per_token: ($h.disk_bytes_per_token // null),
         assigned_bytes: ($h.assigned_bytes // $p.assigned_bytes // null),
         weight_budget_bytes: ($h.weight_budget_bytes // $p.weight_budget_bytes // null),
         predicted_expert_read_bytes: ($p.expert_read_bytes // null)}]' <<< "$DEVS")
done
jq -c --arg system "$SYSTEM" --arg model "$(basename "$MODEL")" --arg testbed "$(basename "$TESTBED")" \
  --argjson size "$(stat -c %s "$MODEL")" --argjson devs "$DEVS" --argjson tokens "$TOKENS" \
  --argjson wall "$(awk -v a="$T0" -v b="$T1" 'BEGIN { print b - a }')" --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
  --arg cmd "${CMD[*]} ${ARGS[*]}" \
  '{system: $system, model: $model, model_bytes: $size, testbed: $testbed, tokens: $tokens,
    tpot_ms, ttft_ms, predicted_tpot_ms: (.predicted_tpot_ms // .plan.predicted_tpot_ms // null),
    prompt_tokens: (.prompt_tokens // null), prefill: (.prefill // null),
    draft: (.draft // null), drafted: (.drafted // null), accepted: (.accepted // null),
    trips: (.trips // null), tokens_per_trip: (.tokens_per_trip // null),
    draft_ms: (.draft_ms // null), ids: (.ids // null),
    plan: (.plan // null), prefetch: (.prefetch // null), wall_s: $wall,
    loadavg: $load, head_command: $cmd, devices: $devs}' <<< "$J"
