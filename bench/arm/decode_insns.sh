#!/bin/sh
# Instructions executed per row and block by the aarch64 decode kernels (NEON and SDOT): the
# GGUF-layout one-row (vec_dot) and four-row (vec_dot_rows4) kernels and the rows16 kernel for
# one token. The quant module is cross-compiled with the Release build's flags, and
# decode_insns.cpp runs with and without the kernel calls under
# `qemu-aarch64 -singlestep -d nochain,exec` (one log line per instruction executed); the
# difference is divided by the calls, rows and blocks.
# A count, not a speed: no ARM hardware here. Prints one line per ISA and type.
#
#   bench/arm/decode_insns.sh                # the working tree
#   ROOT=/path/to/other/checkout bench/arm/decode_insns.sh   # another tree's kernels
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=${ROOT:-$(cd "$HERE/../.." && pwd)}
OUT=${OUT:-/tmp/hearth-arm-insns}
CXX=${CXX:-aarch64-linux-gnu-g++}
CALLS=${CALLS:-10}
mkdir -p "$OUT"
CXXFLAGS="-std=c++20 -O3 -DNDEBUG -I$ROOT/src"  # the Release build's flags
list=""
for src in "$ROOT"/src/hearth/base/error.cpp "$ROOT"/src/hearth/gguf/tensor_type.cpp \
           "$ROOT"/src/hearth/quant/*.cpp; do
  case "$src" in
    *_avx2.cpp|*_avx512.cpp|*_amx.cpp) continue ;;
    *_dotprod.cpp) extra="-march=armv8.2-a+dotprod+fp16" ;;
    *) extra="-march=armv8-a" ;;
  esac
  list="$list$src $OUT/$(basename "$src").o $extra
"
done
printf '%s' "$list" | CXX="$CXX" CXXFLAGS="$CXXFLAGS" xargs -P "$(nproc)" -L 1 \
  sh -c '$CXX $CXXFLAGS $2 -c "$0" -o "$1"'
objs=$(printf '%s' "$list" | cut -d' ' -f2)
$CXX $CXXFLAGS -march=armv8-a -c "$HERE/decode_insns.cpp" -o "$OUT/decode_insns.o"
$CXX -static -o "$OUT/decode_insns" "$OUT/decode_insns.o" $objs -lpthread

count() {  # instructions executed by one run of decode_insns with these arguments
  qemu-aarch64 -cpu max -singlestep -d nochain,exec -D "$OUT/trace" "$OUT/decode_insns" "$@" \
    >/dev/null || return $?
  grep -c '^Trace' "$OUT/trace"
}
printf '%-8s %-5s %10s %10s %10s\n' isa type one-row four-row rows16
for isa in dotprod neon; do
  for type in q4_k q5_k q6_k q8_0 q4_0; do
    case $type in q8_0|q4_0) blocks=128 ;; *) blocks=16 ;; esac
    base=$(count "$type" none "$CALLS" "$isa")
    one=$(( ($(count "$type" one "$CALLS" "$isa") - base) / (CALLS * 4 * blocks) ))
    if four_total=$(count "$type" four "$CALLS" "$isa"); then
      four=$(( (four_total - base) / (CALLS * 4 * blocks) ))
    else
      four=-
    fi
    rows16=$(( ($(count "$type" rows16 "$CALLS" "$isa") - base) / (CALLS * 16 * blocks) ))
    printf '%-8s %-5s %10s %10s %10s\n' "$isa" "$type" "$one" "$four" "$rows16"
  done
done
rm -f "$OUT/trace"
