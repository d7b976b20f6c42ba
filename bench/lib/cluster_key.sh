# shellcheck shell=bash
# use_cluster_key BIN DIR: ring links are encrypted as on a real LAN; use the caller's key
# ($HEARTH_KEY_FILE), else export one made in DIR (kept for later runs there).
use_cluster_key() {
  local bin=$1 dir=$2
  [[ -n "${HEARTH_KEY_FILE:-}" ]] && return 0
  export HEARTH_KEY_FILE="$dir/cluster.key"
  [[ -f "$HEARTH_KEY_FILE" ]] || "$bin" keygen "$HEARTH_KEY_FILE" > /dev/null
}
