#!/bin/sh
# Cross-compiles the quant kernels and tests/quant for aarch64 with Debian's
# aarch64-linux-gnu-g++ and runs them under qemu-aarch64 (user mode), so the NEON and
# dotprod kernels are checked against the scalar reference on an x86 host. No CMake: the
# quant module needs only base/error.cpp and gguf/tensor_type.cpp besides its own files.
#
#   tests/quant/run_neon_qemu.sh            # build into $OUT (default /tmp/hearth-neon-qemu), run
#   OUT=dir CXX=... QEMU_CPU=max tests/quant/run_neon_qemu.sh --gtest_filter=...
#
# Needs: apt-get install g++-aarch64-linux-gnu qemu-user libgtest-dev (GoogleTest sources in
# /usr/src/googletest). Binaries are linked statically so qemu needs no aarch64 sysroot.
# QEMU_CPU=max has dotprod (both NEON variants run); QEMU_CPU=cortex-a53 lacks it (the dotprod
# tests then report themselves skipped).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/hearth-neon-qemu}
CXX=${CXX:-aarch64-linux-gnu-g++}
QEMU=${QEMU:-qemu-aarch64}
QEMU_CPU=${QEMU_CPU:-max}
GTEST=${GTEST:-/usr/src/googletest/googletest}
mkdir -p "$OUT"

CXXFLAGS="-std=c++20 -O2 -Wall -Wextra -Werror -I$ROOT/src -I$ROOT/tests -I$GTEST/include"

if [ ! -f "$OUT/gtest-all.o" ]; then
  $CXX -std=c++20 -O2 -I"$GTEST/include" -I"$GTEST" -c "$GTEST/src/gtest-all.cc" -o "$OUT/gtest-all.o.tmp" &
  gtest_pid=$!
  $CXX -std=c++20 -O2 -I"$GTEST/include" -I"$GTEST" -c "$GTEST/src/gtest_main.cc" -o "$OUT/gtest_main.o"
  wait "$gtest_pid"
  mv "$OUT/gtest-all.o.tmp" "$OUT/gtest-all.o"
fi

# One compiler per core: the sources are independent.
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
objs=""
list=""
for src in "$ROOT"/src/hearth/base/error.cpp "$ROOT"/src/hearth/gguf/tensor_type.cpp \
           "$ROOT"/src/hearth/quant/*.cpp "$ROOT"/tests/quant/*_test.cpp; do
  case "$src" in
    *_avx2.cpp|*_avx512.cpp|*_amx.cpp) continue ;;
    *_dotprod.cpp) extra="-march=armv8.2-a+dotprod+fp16" ;;
    *) extra="-march=armv8-a" ;;
  esac
  obj="$OUT/$(echo "$src" | sed "s|$ROOT/||; s|/|_|g").o"
  objs="$objs $obj"
  list="$list$src $obj $extra
"
done
printf '%s' "$list" | CXX="$CXX" CXXFLAGS="$CXXFLAGS" xargs -P "$JOBS" -L 1 \
  sh -c 'echo "  CXX $0"; $CXX $CXXFLAGS $2 -c "$0" -o "$1"'
$CXX -static -o "$OUT/hearth_quant_tests" $objs "$OUT/gtest-all.o" "$OUT/gtest_main.o" -lpthread
echo "running under $QEMU -cpu $QEMU_CPU"
exec "$QEMU" -cpu "$QEMU_CPU" "$OUT/hearth_quant_tests" "$@"
