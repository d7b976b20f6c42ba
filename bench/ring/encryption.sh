#!/usr/bin/env bash
# bench/ring/encryption.sh — what encrypting the ring's links costs per hop.
# A 3-process ring on 127.0.0.1 (`hearth bench serve --ring 3 --levels 1`), one request at a
# time, with encrypted links (the default: CURVE, a key made for the run) and with --insecure
# (plain TCP), in alternating rounds so that both see the same machine. Prints each round's
# TPOT, the medians, and the difference per hop (a k = 1 ring of 3 devices makes 3 hops per
# token).
#
# Usage: encryption.sh [--bin PATH] [--dir DIR] [--rounds N (6)] [--tokens N (64)] [--scale S (0.25)]
set -euo pipefail
BIN=${HEARTH_BIN:-$(dirname "$0")/../../build/bin/hearth}
DIR=${TMPDIR:-/tmp}/hearth-encryption-bench
ROUNDS=6
TOKENS=64
SCALE=0.25
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --tokens) TOKENS=$2; shift 2 ;;
    --scale) SCALE=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "encryption.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done
BIN=$(readlink -f "$BIN")
mkdir -p "$DIR"
MODEL="$DIR/llama3-8b-x$SCALE.gguf"
[[ -f "$MODEL" ]] || "$BIN" synth --preset llama3-8b --scale "$SCALE" --type q4_k_m -o "$MODEL" >&2

# tpot MODE: the ring's mean TPOT (ms) of one run; MODE is "" or --insecure.
tpot() {
  "$BIN" bench serve -m "$MODEL" -t 1 --levels 1 --gen-tokens "$TOKENS" --ring 3 $1 2>/dev/null |
    awk '/-process ring/ { ring = 1 } ring && $1 == "1" { sub("ms", "", $3); print $3; exit }'
}

echo "model $MODEL ($(($(stat -c %s "$MODEL") >> 20)) MiB), $TOKENS tokens per request, CPU: $(lscpu | sed -n 's/^Model name: *//p')"
enc=()
plain=()
for ((r = 1; r <= ROUNDS; r++)); do
  e=$(tpot "")
  p=$(tpot --insecure)
  enc+=("$e")
  plain+=("$p")
  echo "round $r: encrypted $e ms, plain $p ms"
done
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
me=$(median "${enc[@]}")
mp=$(median "${plain[@]}")
awk -v e="$me" -v p="$mp" 'BEGIN {
  printf "median TPOT: encrypted %.3f ms, plain %.3f ms: %+.3f ms per token, %+.1f us per hop (3 hops), %.3fx\n",
    e, p, e - p, (e - p) * 1000 / 3, e / p }'
