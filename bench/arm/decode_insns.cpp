// Instructions one decode kernel executes per row and block on aarch64, counted under
// qemu-user by decode_insns.sh (no ARM hardware here to time them on). Runs the kernel of one
// type and ISA over rows of 4096 elements, `calls` times:
//   decode_insns TYPE one|four|rows16|none CALLS neon|dotprod
// "one": the GGUF-layout one-row kernel (vec_dot) on each of rows 0-3; "four": the GGUF-layout
// four-row kernel (vec_dot_rows4) on rows 0-3, if the ISA has one for the type (exit 3 if
// not); "rows16": the rows16 kernel for one token on the 16 rows repacked into a group (the
// layout the engine decodes resident weights from); "none": setup alone, which the script
// subtracts.
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "hearth/gguf/tensor_type.h"
#include "hearth/quant/type_traits.h"

using namespace hearth;

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: decode_insns TYPE one|four|none CALLS neon|dotprod\n");
    return 2;
  }
  const auto type = gguf::tensor_type_from_name(argv[1]);
  const std::string mode = argv[2];
  const int calls = std::atoi(argv[3]);
  const quant::Isa isa = std::string(argv[4]) == "dotprod" ? quant::Isa::kNeonDotprod
                                                           : quant::Isa::kNeon;
  if (!type || !quant::is_supported(*type) || calls < 0) {
    std::fprintf(stderr, "decode_insns: bad type or call count\n");
    return 2;
  }
  const quant::TypeTraits& tr = quant::traits_for_isa(*type, isa);
  const quant::TypeTraits& at = quant::traits_for_isa(tr.vec_dot_type, isa);
  if (tr.vec_dot == nullptr) return 2;
  if (mode == "four" && tr.vec_dot_rows4 == nullptr) return 3;
  constexpr int64_t n = 4096;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> x(n);
  const size_t w_row = *gguf::row_bytes(*type, n), a_row = *gguf::row_bytes(tr.vec_dot_type, n);
  constexpr int kRows = 16;
  std::vector<uint8_t> w(kRows * w_row), a(a_row);
  for (int r = 0; r < kRows; ++r) {
    for (float& v : x) v = normal(rng);
    tr.quantize(x.data(), w.data() + r * w_row, n);
  }
  at.quantize(x.data(), a.data(), n);
  const quant::Rows16& r16 = *tr.rows16;
  std::vector<uint8_t> group(r16.group_bytes(n)), prepared(r16.act_bytes(n));
  r16.repack(n, w.data(), w_row, group.data());
  r16.prepare_act(n, a.data(), prepared.data());
  float out[kRows] = {};
  for (int c = 0; c < calls; ++c) {
    if (mode == "one") {
      for (int r = 0; r < 4; ++r) tr.vec_dot(n, w.data() + r * w_row, a.data(), &out[r]);
    } else if (mode == "four") {
      tr.vec_dot_rows4(n, w.data(), w_row, a.data(), out);
    } else if (mode == "rows16") {
      r16.dot(n, group.data(), prepared.data(), 0, 1, out, kRows);
    }
  }
  std::printf("%g %g %g %g\n", out[0], out[1], out[2], out[3]);
  return 0;
}
