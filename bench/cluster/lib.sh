# bench/cluster/lib.sh — set-up and tear-down of an emulated home cluster on one Linux host.
# Sourced by run.sh. Needs root, cgroup v1 (memory, cpu, blkio), iproute2 and nft.
#
# Per device d (index i, ring order with the head first):
#   netns   ${HC_PREFIX}d$i        eth0 = 10.77.0.(i+1)/24, veth to a bridge that lives in its own
#                                  netns ${HC_PREFIX}br, so nothing touches the host's network
#   cgroups memory|cpu|blkio:/hearth-cluster-$HC_ID/d$i   the device's processes
#           memory:/hearth-cluster-$HC_ID/net$i           its link relay (not the device's RAM)
#   relay   `hearth relay --transparent` on 127.0.0.1:15000 in the device's netns, and an nftables
#           rule that redirects every TCP connection the device opens to the cluster subnet into
#           it: one-way delay rtt/2 and the bandwidth cap on every link the device initiates
#           (its ring successor's inbox, and for the head the control links). The relay marks its
#           own connections so the rule lets them out.
# Everything created is recorded in the HC_* arrays; hc_teardown removes all of it and is
# idempotent, so traps on EXIT/INT/TERM/ERR may all call it.

HC_ID=${HEARTH_CLUSTER_ID:-$$}
HC_PREFIX="hc${HC_ID}"
HC_CG="hearth-cluster-${HC_ID}"
HC_CGROOT=/sys/fs/cgroup
HC_SUBNET=10.77.0
HC_RELAY_PORT=15000
HC_MARK=0x4854
HC_NETNS=()   # namespaces created
HC_CGDIRS=()  # cgroup directories created (deepest last)
HC_PIDS=()    # processes started (by pid)

hc_log() { echo "[cluster] $*" >&2; }

hc_require_root() {
  if [[ $(id -u) -ne 0 ]]; then
    echo "bench/cluster: must run as root (it creates network namespaces, cgroups and blkio" \
      "limits); try: sudo $0 $*" >&2
    exit 2
  fi
  local c
  for c in memory cpu blkio; do
    if [[ ! -w "$HC_CGROOT/$c" ]]; then
      echo "bench/cluster: cgroup v1 controller '$c' is not mounted writable at $HC_CGROOT/$c" >&2
      exit 2
    fi
  done
  for c in ip jq; do
    command -v "$c" > /dev/null || {
      echo "bench/cluster: '$c' not found (scripts/install-deps installs it)" >&2
      exit 2
    }
  done
}

# The whole disk holding PATH, as MAJ:MIN for blkio.throttle.read_bps_device.
hc_block_device() {
  local mm
  mm=$(stat -c '%Hd:%Ld' "$1")
  if [[ -f /sys/dev/block/$mm/partition ]]; then mm=$(cat "/sys/dev/block/$mm/../dev"); fi
  echo "$mm"
}

hc_mkcg() {  # hc_mkcg CONTROLLER REL -> creates $HC_CGROOT/CONTROLLER/REL (and the parent)
  local dir="$HC_CGROOT/$1/$HC_CG"
  if [[ ! -d "$dir" ]]; then
    mkdir "$dir"
    HC_CGDIRS+=("$dir")
  fi
  dir="$dir/$2"
  mkdir "$dir"
  HC_CGDIRS+=("$dir")
}

# hc_device_up I MEM_MIB CPU_SHARE DISK_MBPS RTT_MS LINK_MBPS
hc_device_up() {
  local i=$1 mem=$2 share=$3 disk=$4 rtt=$5 mbps=$6
  local ns="${HC_PREFIX}d$i" br="${HC_PREFIX}br"
  if [[ ${#HC_NETNS[@]} -eq 0 ]]; then
    ip netns add "$br"
    HC_NETNS+=("$br")
    ip -n "$br" link add br0 type bridge
    ip -n "$br" link set br0 up
  fi
  ip netns add "$ns"
  HC_NETNS+=("$ns")
  ip -n "$ns" link set lo up
  ip -n "$br" link add "v$i" type veth peer name eth0 netns "$ns"
  ip -n "$br" link set "v$i" master br0 up
  ip -n "$ns" addr add "$HC_SUBNET.$((i + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up

  hc_mkcg memory "d$i"
  # Page cache counts against the limit, so mapped weights beyond it are evicted for real.
  echo $((mem << 20)) > "$HC_CGROOT/memory/$HC_CG/d$i/memory.limit_in_bytes"
  hc_mkcg cpu "d$i"
  # A short period, so the quota shapes even short kernels and profiler windows evenly.
  echo 10000 > "$HC_CGROOT/cpu/$HC_CG/d$i/cpu.cfs_period_us"
  echo "$(awk -v s="$share" 'BEGIN { q = int(s * 10000); if (q < 1000) q = 1000; print q }')" \
    > "$HC_CGROOT/cpu/$HC_CG/d$i/cpu.cfs_quota_us"
  hc_mkcg blkio "d$i"
  if awk -v d="$disk" 'BEGIN { exit !(d > 0) }'; then
    echo "$HC_BLOCKDEV $(awk -v d="$disk" 'BEGIN { printf "%d", d * 1e6 }')" \
      > "$HC_CGROOT/blkio/$HC_CG/d$i/blkio.throttle.read_bps_device"
  fi

  if awk -v r="$rtt" -v b="$mbps" 'BEGIN { exit !(r > 0 || b > 0) }'; then
    command -v nft > /dev/null || {
      echo "bench/cluster: 'nft' (nftables) is needed to emulate links" >&2
      exit 2
    }
    hc_mkcg memory "net$i"
    hc_spawn "$i" "net$i" "$HC_WORK/relay$i.out" "$HC_WORK/relay$i.err" -- \
      "$HC_BIN" relay --transparent --listen "tcp://127.0.0.1:$HC_RELAY_PORT" \
      --rtt-ms "$rtt" --mbps "$mbps" --mark "$((HC_MARK))"
    hc_wait_line "$HC_WORK/relay$i.out" relaying 10
    ip netns exec "$ns" nft -f - << EOF
table ip hearth_cluster {
  chain out {
    type nat hook output priority -100; policy accept;
    meta l4proto tcp meta mark != $HC_MARK ip daddr $HC_SUBNET.0/24 ip daddr != $HC_SUBNET.$((i + 1)) redirect to :$HC_RELAY_PORT
  }
}
EOF
  fi
}

# hc_spawn I CGNAME OUT ERR -- CMD...: runs CMD in device I's netns, inside the cgroups named
# CGNAME (memory, and cpu/blkio when they exist), in the background; records the pid.
# The process joins its cgroups before exec, so no page it touches is charged elsewhere.
hc_spawn() {
  local i=$1 cg=$2 out=$3 err=$4
  shift 5
  local join="" c
  for c in memory cpu blkio; do
    [[ -d "$HC_CGROOT/$c/$HC_CG/$cg" ]] && join+="echo \$\$ > $HC_CGROOT/$c/$HC_CG/$cg/cgroup.procs; "
  done
  # shellcheck disable=SC2016
  XDG_CACHE_HOME="$HC_WORK/cache-d$i" sh -c "${join}exec nsenter --net=/run/netns/${HC_PREFIX}d$i \"\$@\"" \
    hc-spawn "$@" > "$out" 2> "$err" &
  HC_LASTPID=$!
  HC_PIDS+=("$HC_LASTPID")
}

hc_wait_line() {  # hc_wait_line FILE WORD SECONDS: until FILE has WORD, else fail
  local n=$(($3 * 10))
  while ((n-- > 0)); do
    grep -q "$2" "$1" 2> /dev/null && return 0
    sleep 0.1
  done
  echo "bench/cluster: no '$2' in $1 after $3 s" >&2
  return 1
}

hc_drop_caches() {
  sync
  echo 3 > /proc/sys/vm/drop_caches
}

# Pids of every process in the cluster's cgroups and namespaces (ours and any children).
hc_all_pids() {
  local d ns
  for d in "${HC_CGDIRS[@]:-}"; do
    [[ -n "$d" && -f "$d/cgroup.procs" ]] && cat "$d/cgroup.procs" 2> /dev/null
  done
  for ns in "${HC_NETNS[@]:-}"; do
    [[ -n "$ns" ]] && ip netns pids "$ns" 2> /dev/null
  done
  for d in "${HC_PIDS[@]:-}"; do
    [[ -n "$d" ]] && kill -0 "$d" 2> /dev/null && echo "$d"
  done
  return 0
}

hc_teardown() {
  local pids p tries i
  trap '' INT TERM  # finish cleaning even if interrupted again
  pids=$(hc_all_pids | sort -u)
  for p in $pids; do kill -TERM "$p" 2> /dev/null || true; done
  for tries in $(seq 30); do
    pids=$(hc_all_pids | sort -u)
    [[ -z "$pids" ]] && break
    sleep 0.1
  done
  for p in $pids; do kill -KILL "$p" 2> /dev/null || true; done
  for p in "${HC_PIDS[@]:-}"; do [[ -n "$p" ]] && wait "$p" 2> /dev/null || true; done
  HC_PIDS=()
  for tries in $(seq 30); do
    [[ -z "$(hc_all_pids)" ]] && break
    sleep 0.1
  done
  # Namespaces: devices first, the bridge last (deleting a device netns removes its veth).
  for ((i = ${#HC_NETNS[@]} - 1; i >= 0; i--)); do
    ip netns del "${HC_NETNS[$i]}" 2> /dev/null || true
  done
  HC_NETNS=()
  # Cgroups: children before parents.
  for ((i = ${#HC_CGDIRS[@]} - 1; i >= 0; i--)); do
    for tries in $(seq 20); do
      rmdir "${HC_CGDIRS[$i]}" 2> /dev/null && break
      [[ -d "${HC_CGDIRS[$i]}" ]] || break
      sleep 0.1
    done
  done
  HC_CGDIRS=()
}

# Per-device figures from the kernel's own accounting: peak memory use (page cache included),
# how often the limit was hit, bytes read from the disk.
hc_device_stats() {  # hc_device_stats I -> JSON object
  local m="$HC_CGROOT/memory/$HC_CG/d$1" b="$HC_CGROOT/blkio/$HC_CG/d$1"
  local read oom
  oom=$(awk '$1 == "oom_kill" { print $2 }' "$m/memory.oom_control")
  read=$(awk -v dev="$HC_BLOCKDEV" '$1 == dev && $2 == "Read" { print $3 }' \
    "$b/blkio.throttle.io_service_bytes" 2> /dev/null | head -1)
  jq -cn --argjson limit "$(cat "$m/memory.limit_in_bytes")" \
    --argjson peak "$(cat "$m/memory.max_usage_in_bytes")" \
    --argjson failcnt "$(cat "$m/memory.failcnt")" \
    --argjson read "${read:-0}" --argjson oom "${oom:-0}" \
    '{cg_limit_bytes: $limit, cg_peak_bytes: $peak, cg_failcnt: $failcnt, disk_read_bytes: $read, cg_oom_kills: $oom}'
}
