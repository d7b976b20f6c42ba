// The row-interleaved (rows16) layouts, per type: repack/unpack round trip, the scalar kernel
// against a double-precision product of the dequantized rows, and every ISA's kernel (NEON
// and SDOT under qemu in `make test-arm`; the scalar one where an ISA has none) bitwise
// equal to the scalar kernel for 1..10 tokens, on random bytes (every quant and scale bit
// pattern a file may hold) and on extreme quants.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "hearth/quant/rows16_kernels.h"
#include "quant/quant_test_util.h"

namespace hearth::quant {
namespace {

using T = TensorType;

std::vector<T> rows16_types() {
  std::vector<T> out;
  for (T t : {T::kQ8_0, T::kQ4_0, T::kQ4_K, T::kQ5_K, T::kQ6_K}) {
    if (traits_for_isa(t, Isa::kScalar).rows16 != nullptr) out.push_back(t);
  }
  return out;
}

// Row lengths: one block (super-block), three, a model-sized row, and 11008 (43 K-quant
// super-blocks: an odd count, which the Q6_K group pads to 64 bytes).
std::vector<int64_t> lengths(T type) {
  const int64_t be = gguf::tensor_type_info(type).block_elems;
  // 22 blocks: a GGUF kernel's whole groups of 8 or 16 blocks, then a tail of one quad and
  // two blocks (Q4_0 steps in quads of blocks, block_steps.h); 1 and 3 blocks: quads of one
  // and three.
  return {be, 3 * be, 22 * be, 4096, 11008};
}

// How the GGUF rows of a test group are filled.
enum class Fill { kRandom, kAllMax, kAllMin };

// Sets every quant (and sub-block scale/min) field of the GGUF blocks to its largest or
// smallest stored value; the fp16 scales stay random and finite.
void saturate(T type, std::vector<uint8_t>& row, Fill fill) {
  const size_t bb = gguf::tensor_type_info(type).block_bytes;
  const bool max = fill == Fill::kAllMax;
  for (size_t b = 0; b < row.size() / bb; ++b) {
    uint8_t* blk = row.data() + b * bb;
    switch (type) {
      case T::kQ8_0:  // +127 / -128
        std::memset(blk + 2, max ? 0x7f : 0x80, 32);
        break;
      case T::kQ4_0:  // quants 15 / 0 (weights +7 / -8)
        std::memset(blk + 2, max ? 0xff : 0x00, 16);
        break;
      case T::kQ4_K:  // scales and mins 63, quants 15 / 0
        std::memset(blk + 4, 0xff, 12);
        std::memset(blk + 16, max ? 0xff : 0x00, 128);
        break;
      case T::kQ5_K:  // scales and mins 63, quants 31 / 0
        std::memset(blk + 4, 0xff, 12);
        std::memset(blk + 16, max ? 0xff : 0x00, 32 + 128);
        break;
      case T::kQ6_K:  // quants 63 / 0 (weights +31 / -32), scales -128
        std::memset(blk, max ? 0xff : 0x00, 192);
        std::memset(blk + 192, 0x80, 16);
        break;
      default:
        break;
    }
  }
}

// Every row length with random quants, and 4096 columns with extreme ones.
std::vector<std::pair<int64_t, Fill>> every_length_and_fill(T type) {
  std::vector<std::pair<int64_t, Fill>> cases;
  for (int64_t cols : lengths(type)) cases.emplace_back(cols, Fill::kRandom);
  cases.emplace_back(4096, Fill::kAllMax);
  cases.emplace_back(4096, Fill::kAllMin);
  return cases;
}

// 16 GGUF rows of one type and `n_tokens` activation rows, each prepared.
struct Group {
  int64_t cols = 0;
  size_t row_bytes = 0;
  std::vector<uint8_t> rows;      // (16, cols) in the type, GGUF rows
  std::vector<uint8_t> group;     // the same repacked
  std::vector<uint8_t> acts;      // (n_tokens, cols) in vec_dot_type
  std::vector<uint8_t> prepared;  // (n_tokens, prepared_stride) prepared activations
  size_t act_row_bytes = 0, prepared_stride = 0;
};

// Activations: Gaussian, or (extreme) +-1 patterns that quantize to +-127.
Group make_group(T type, int64_t cols, int n_tokens, uint32_t seed, Fill fill = Fill::kRandom) {
  const Rows16& r16 = *traits_for_isa(type, Isa::kScalar).rows16;
  Group g;
  g.cols = cols;
  g.row_bytes = testing::row_bytes(type, cols);
  for (int r = 0; r < kRows16; ++r) {
    auto row = testing::random_blocks(type, cols, seed + static_cast<uint32_t>(r));
    if (fill != Fill::kRandom) saturate(type, row, fill);
    g.rows.insert(g.rows.end(), row.begin(), row.end());
  }
  g.group.resize(r16.group_bytes(cols));
  r16.repack(cols, g.rows.data(), g.row_bytes, g.group.data());
  const T at = traits_for_isa(type, Isa::kScalar).vec_dot_type;
  g.act_row_bytes = testing::row_bytes(at, cols);
  g.prepared_stride = r16.act_bytes(cols) + 64;  // rows apart by more than their size
  g.acts.resize(g.act_row_bytes * static_cast<size_t>(n_tokens));
  g.prepared.assign(g.prepared_stride * static_cast<size_t>(n_tokens), 0xcd);
  for (int t = 0; t < n_tokens; ++t) {
    std::vector<float> x;
    if (fill == Fill::kRandom) {
      x = testing::gaussian(static_cast<size_t>(cols), seed + 100 + static_cast<uint32_t>(t));
    } else {
      // Token 0 all +1, token 1 all -1, then alternating signs (every int sum extreme).
      x.resize(static_cast<size_t>(cols));
      for (size_t i = 0; i < x.size(); ++i) {
        x[i] = t == 0 ? 1.0f : t == 1 ? -1.0f : ((i + static_cast<size_t>(t)) % 2 ? 1.0f : -1.0f);
      }
    }
    traits_for_isa(at, Isa::kScalar).quantize(x.data(), g.acts.data() + t * g.act_row_bytes, cols);
    r16.prepare_act(cols, g.acts.data() + t * g.act_row_bytes,
                    g.prepared.data() + t * g.prepared_stride);
  }
  return g;
}

// Runs pair_dot (a Rows16::dot_pair kernel) on g0 and g1, one after the other as matmul lays
// them out, for the first n of the max_tokens tokens g0 was made with, outputs 36 floats
// apart, fetching the pair itself ahead as if it were the next one; each (row, token) must
// have the scalar kernel's one-token bits, and the 4 floats after each token's 32 rows, and the
// tokens past n, must stay untouched. what names the kernel in failure messages.
void expect_pair_scalar_bits(Rows16PairKernel* pair_dot, T type, const Group& g0, const Group& g1,
                             int n, int max_tokens, const std::string& what) {
  const Rows16& scalar = *traits_for_isa(type, Isa::kScalar).rows16;
  constexpr size_t kOutStride = 36;
  std::vector<uint8_t> pair = g0.group;
  pair.insert(pair.end(), g1.group.begin(), g1.group.end());
  std::vector<float> got(static_cast<size_t>(max_tokens) * kOutStride, -7.0f);
  pair_dot(g0.cols, pair.data(), g0.prepared.data(), g0.prepared_stride, n, got.data(), kOutStride,
           pair.data(), pair.size());
  for (int t = 0; t < max_tokens; ++t) {
    for (int half = 0; half < 2 && t < n; ++half) {
      std::vector<float> want(kRows16);
      scalar.dot(g0.cols, (half == 0 ? g0 : g1).group.data(),
                 g0.prepared.data() + t * g0.prepared_stride, g0.prepared_stride, 1, want.data(),
                 0);
      EXPECT_EQ(0, std::memcmp(got.data() + t * kOutStride + kRows16 * half, want.data(),
                               kRows16 * sizeof(float)))
          << what << ", group " << half << ", " << n << " tokens, token " << t << ", cols "
          << g0.cols;
    }
    for (size_t i = t < n ? 2 * kRows16 : 0; i < kOutStride; ++i) {
      EXPECT_EQ(got[t * kOutStride + i], -7.0f) << what << " wrote outside its outputs";
    }
  }
}

bool has_mins(T type) {
  return type == T::kQ4_K || type == T::kQ5_K;
}

// Per-element min offset dmin * m of the element's sub-block (Q4_K, Q5_K; 0 for other types).
std::vector<double> min_offsets(T type, const uint8_t* row, int64_t cols) {
  std::vector<double> off(static_cast<size_t>(cols), 0.0);
  if (!has_mins(type)) return off;
  const size_t block_bytes = gguf::tensor_type_info(type).block_bytes;
  for (int64_t i = 0; i < cols / kQKK; ++i) {
    // Q4_K and Q5_K blocks begin alike: d, dmin, then the packed scales and mins.
    const auto& b = *reinterpret_cast<const BlockQ4_K*>(row + static_cast<size_t>(i) * block_bytes);
    uint8_t sc[8], m[8];
    unpack_q4k_scales(b.scales, sc, m);
    for (int e = 0; e < kQKK; ++e) off[i * kQKK + e] = half_to_float(b.dmin) * m[e / 32];
  }
  return off;
}

// Float terms each (row, token) accumulates: one per block, two per Q4_K or Q5_K super-block
// (the scale part and the min part).
double float_terms(T type, int64_t cols) {
  const int64_t be = gguf::tensor_type_info(type).block_elems;
  return static_cast<double>(cols / be) * (has_mins(type) ? 2 : 1);
}

// The scalar kernel of token t, 16 rows, out[r] (n_tokens = 1).
std::vector<float> scalar_dot(T type, const Group& g, int t) {
  std::vector<float> out(kRows16);
  traits_for_isa(type, Isa::kScalar)
      .rows16->dot(g.cols, g.group.data(), g.prepared.data() + t * g.prepared_stride,
                   g.prepared_stride, 1, out.data(), 0);
  return out;
}

class Rows16Layout : public ::testing::TestWithParam<T> {};

TEST_P(Rows16Layout, RepackThenUnpackGivesTheRowsBack) {
  const T type = GetParam();
  const Rows16& r16 = *traits_for_isa(type, Isa::kScalar).rows16;
  for (int64_t cols : lengths(type)) {
    for (Fill fill : {Fill::kRandom, Fill::kAllMax, Fill::kAllMin}) {
      const Group g = make_group(type, cols, 1, 1, fill);
      std::vector<uint8_t> back(g.rows.size(), 0xcd);
      r16.unpack(cols, g.group.data(), back.data(), g.row_bytes);
      EXPECT_EQ(back, g.rows) << "cols " << cols;
    }
  }
}

// Bytes are bandwidth: a group holds at most 5% (and 64 bytes of alignment) more than the
// 16 GGUF rows it replaces.
TEST_P(Rows16Layout, GroupBytesStayNearTheGgufBytes) {
  const T type = GetParam();
  const Rows16& r16 = *traits_for_isa(type, Isa::kScalar).rows16;
  for (int64_t cols : lengths(type)) {
    const double gguf = 16.0 * static_cast<double>(testing::row_bytes(type, cols));
    EXPECT_GE(static_cast<double>(r16.group_bytes(cols)), gguf) << "cols " << cols;
    EXPECT_LE(static_cast<double>(r16.group_bytes(cols)), 1.05 * gguf + 64) << "cols " << cols;
  }
}

// Tolerance. The kernel forms each block's integer sums exactly; the error is in the float
// steps: per term one rounded scale product (d_w * d_a), one int -> float rounding and one
// fma rounding, and the reference's own rounding of each dequantized weight (to_float
// rounds d * sc and then d * sc * q - dmin * m: <= 2^-23 * (|w| + off) per element, off =
// dmin * m for Q4_K and Q5_K, since the kernel sums the scale part and the min part separately and
// |d * sc * q| <= |w| + off). Accumulating k terms errs by at most (k - 1) * 2^-24 of the
// sum of their magnitudes, so (as in dot_kernel_test.cpp)
//   tol = (k + 32) * 2^-23 * S,  S = sum_i (|w_i| + off_i) * |a_i|,  k = float_terms.
// A wrong row, block or nibble moves the result by O(S / sqrt(cols)) or more: far outside.
TEST_P(Rows16Layout, ScalarKernelMatchesTheDequantizedProduct) {
  const T type = GetParam();
  const T at = traits_for_isa(type, Isa::kScalar).vec_dot_type;
  for (int64_t cols : lengths(type)) {
    for (Fill fill : {Fill::kRandom, Fill::kAllMax, Fill::kAllMin}) {
      const Group g = make_group(type, cols, fill == Fill::kRandom ? 1 : 3, 7, fill);
      for (int t = 0; t < (fill == Fill::kRandom ? 1 : 3); ++t) {
        const auto out = scalar_dot(type, g, t);
        const auto a = testing::dequantize(at, g.acts.data() + t * g.act_row_bytes, cols);
        for (int r = 0; r < kRows16; ++r) {
          const uint8_t* row = g.rows.data() + r * g.row_bytes;
          const auto w = testing::dequantize(type, row, cols);
          const auto off = min_offsets(type, row, cols);
          double want = 0, s = 0;
          for (int64_t c = 0; c < cols; ++c) {
            want += static_cast<double>(w[c]) * a[c];
            s += (std::fabs(static_cast<double>(w[c])) + off[c]) * std::fabs(a[c]);
          }
          const double tol = (float_terms(type, cols) + 32) * std::ldexp(1.0, -23) * s;
          EXPECT_NEAR(out[r], want, tol) << "cols " << cols << " fill " << static_cast<int>(fill)
                                         << " token " << t << " row " << r;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, Rows16Layout, ::testing::ValuesIn(rows16_types()),
                         [](const auto& info) {
                           return std::string(gguf::tensor_type_name(info.param));
                         });

class Rows16Isa : public ::testing::TestWithParam<std::tuple<Isa, T>> {
 protected:
  static constexpr int kTokens = 10;

  // Every token of an n-token call (n = 1..10: one pass of a 4- or 8-token kernel, and more
  // than one) against the scalar kernel's one-token bits, outputs out_stride = 20 floats apart
  // (the 4 between row sets must stay untouched).
  void expect_scalar_bits(const Group& g) {
    const auto [isa, type] = GetParam();
    const TypeTraits& tr = traits_for_isa(type, isa);
    ASSERT_NE(tr.rows16, nullptr);
    constexpr size_t kOutStride = 20;
    for (int n = 1; n <= kTokens; ++n) {
      std::vector<float> got(kTokens * kOutStride, -7.0f);
      tr.rows16->dot(g.cols, g.group.data(), g.prepared.data(), g.prepared_stride, n, got.data(),
                     kOutStride);
      for (int t = 0; t < kTokens; ++t) {
        if (t < n) {
          const auto want = scalar_dot(type, g, t);
          EXPECT_EQ(0, std::memcmp(got.data() + t * kOutStride, want.data(), 16 * sizeof(float)))
              << isa_name(isa) << (tr.rows16_fast ? " (simd)" : " (scalar)") << ", " << n
              << " tokens, token " << t << ", cols " << g.cols << ": row 0 " << got[t * kOutStride]
              << " vs " << want[0];
        }
        for (size_t i = t < n ? 16 : 0; i < kOutStride; ++i) {
          EXPECT_EQ(got[t * kOutStride + i], -7.0f) << "wrote outside its outputs";
        }
      }
    }
  }
};

// Rows16::dot_pair, where the ISA has one: two groups (random, or extreme quants) against
// the same activations, each (row, token) with the scalar kernel's bits for every token count,
// outputs 36 floats apart (the 4 after each token's 32 rows untouched).
TEST_P(Rows16Isa, PairGivesEachGroupTheScalarBits) {
  const auto [isa, type] = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "CPU lacks " << isa_name(isa);
  const TypeTraits& tr = traits_for_isa(type, isa);
  if (tr.rows16->dot_pair == nullptr) GTEST_SKIP() << "no dot_pair on " << isa_name(isa);
  for (const auto& [cols, fill] :
       {std::pair{lengths(type)[0], Fill::kRandom}, std::pair{lengths(type)[1], Fill::kRandom},
        std::pair{lengths(type)[2], Fill::kRandom}, std::pair{int64_t{4096}, Fill::kRandom},
        std::pair{lengths(type)[4], Fill::kRandom}, std::pair{int64_t{4096}, Fill::kAllMax},
        std::pair{int64_t{4096}, Fill::kAllMin}}) {
    const Group g0 = make_group(type, cols, kTokens, 31, fill);
    const Group g1 = make_group(type, cols, kTokens, 47, fill);
    for (int n = 1; n <= kTokens; ++n) {
      expect_pair_scalar_bits(tr.rows16->dot_pair, type, g0, g1, n, kTokens, isa_name(isa));
    }
  }
}

TEST_P(Rows16Isa, EveryTokenCountGivesTheScalarBits) {
  const auto [isa, type] = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "CPU lacks " << isa_name(isa);
  for (int64_t cols : lengths(type)) expect_scalar_bits(make_group(type, cols, kTokens, 11));
}

// All quants at their largest (or smallest) stored values against activations at +-127:
// the int32 group sums (and the int16 pairs some kernels use) must not wrap or saturate.
TEST_P(Rows16Isa, ExtremeQuantsGiveTheScalarBits) {
  const auto [isa, type] = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "CPU lacks " << isa_name(isa);
  for (Fill fill : {Fill::kAllMax, Fill::kAllMin}) {
    expect_scalar_bits(make_group(type, 4096, kTokens, 21, fill));
  }
}

// The traits say that every type's GGUF-layout kernels give the rows16 bits on every ISA, and
// they do: each row of the group gets the scalar rows16 kernel's bits from vec_dot,
// vec_dot_long, vec_dot_x4, vec_dot_rows4 and the prepared and packed kernels, on random and
// extreme quants and every row length.
TEST_P(Rows16Isa, GgufKernelsGiveTheRows16BitsWhereTheTraitsSaySo) {
  const auto [isa, type] = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "CPU lacks " << isa_name(isa);
  const TypeTraits& tr = traits_for_isa(type, isa);
  EXPECT_TRUE(tr.gguf_rows16_bits) << isa_name(isa);
  if (!tr.gguf_rows16_bits) return;
  const auto expect_bits = [&](float got, float want, const char* kernel, int64_t cols, int r,
                               int t) {
    EXPECT_EQ(0, std::memcmp(&got, &want, sizeof got))
        << isa_name(isa) << " " << kernel << ", cols " << cols << ", row " << r << ", token " << t
        << ": " << got << " vs " << want;
  };
  for (const auto& [cols, fill] : every_length_and_fill(type)) {
    const Group g = make_group(type, cols, 4, 61, fill);
    std::vector<std::vector<float>> want(4);
    for (int t = 0; t < 4; ++t) want[t] = scalar_dot(type, g, t);
    // The GGUF-layout kernels' own activation forms: prepared (decode) and packed (prefill),
    // each token's row converted into `bytes`.
    const auto convert = [&](size_t bytes, void (*fn)(int64_t, const void*, void*)) {
      std::vector<uint8_t> out(4 * bytes);
      for (int t = 0; t < 4; ++t)
        fn(cols, g.acts.data() + t * g.act_row_bytes, out.data() + t * bytes);
      return out;
    };
    std::vector<uint8_t> prepared, packed_a, packed_w;
    size_t prepared_bytes = 0, packed_a_bytes = 0;
    if (tr.prepared != nullptr) {
      prepared_bytes = tr.prepared->bytes(cols);
      prepared = convert(prepared_bytes, tr.prepared->prepare);
    }
    if (tr.packed != nullptr) {
      packed_a_bytes = tr.packed->a_row_bytes(cols);
      packed_a = convert(packed_a_bytes, tr.packed->pack_a);
      packed_w.resize(tr.packed->w_row_bytes(cols));
    }
    for (int r = 0; r < kRows16; ++r) {
      const uint8_t* row = g.rows.data() + static_cast<size_t>(r) * g.row_bytes;
      for (int t = 0; t < 4; ++t) {
        const uint8_t* act = g.acts.data() + static_cast<size_t>(t) * g.act_row_bytes;
        float got = -7.0f;
        tr.vec_dot(cols, row, act, &got);
        expect_bits(got, want[t][r], "vec_dot", cols, r, t);
        if (tr.vec_dot_long != nullptr) {
          tr.vec_dot_long(cols, row, act, &got);
          expect_bits(got, want[t][r], "vec_dot_long", cols, r, t);
        }
        if (tr.prepared != nullptr) {
          const uint8_t* pa = prepared.data() + t * prepared_bytes;
          tr.prepared->dot(cols, row, pa, &got);
          expect_bits(got, want[t][r], "prepared dot", cols, r, t);
          if (tr.prepared->dot_long != nullptr) {
            tr.prepared->dot_long(cols, row, pa, &got);
            expect_bits(got, want[t][r], "prepared dot_long", cols, r, t);
          }
        }
      }
      float got4[4];
      if (tr.vec_dot_x4 != nullptr) {
        tr.vec_dot_x4(cols, row, g.acts.data(), g.act_row_bytes, got4);
        for (int t = 0; t < 4; ++t) expect_bits(got4[t], want[t][r], "vec_dot_x4", cols, r, t);
      }
      if (tr.prepared != nullptr && tr.prepared->dot_x4 != nullptr) {
        tr.prepared->dot_x4(cols, row, prepared.data(), prepared_bytes, got4);
        for (int t = 0; t < 4; ++t) {
          expect_bits(got4[t], want[t][r], "prepared dot_x4", cols, r, t);
        }
      }
      if (tr.packed != nullptr) {
        tr.packed->pack_w(cols, row, packed_w.data());
        tr.packed->dot_x4(cols, packed_w.data(), packed_a.data(), packed_a_bytes, got4);
        for (int t = 0; t < 4; ++t) expect_bits(got4[t], want[t][r], "packed dot_x4", cols, r, t);
      }
    }
    // The four-row decode kernels, on rows 4k .. 4k + 3 of the group.
    for (int r0 = 0; r0 < kRows16; r0 += 4) {
      const uint8_t* rows = g.rows.data() + static_cast<size_t>(r0) * g.row_bytes;
      for (int t = 0; t < 4; ++t) {
        float got4[4];
        if (tr.vec_dot_rows4 != nullptr) {
          tr.vec_dot_rows4(cols, rows, g.row_bytes, g.acts.data() + t * g.act_row_bytes, got4);
          for (int r = 0; r < 4; ++r) {
            expect_bits(got4[r], want[t][r0 + r], "vec_dot_rows4", cols, r0 + r, t);
          }
        }
        if (tr.prepared != nullptr && tr.prepared->dot_rows4 != nullptr) {
          tr.prepared->dot_rows4(cols, rows, g.row_bytes, prepared.data() + t * prepared_bytes,
                                 got4);
          for (int r = 0; r < 4; ++r) {
            expect_bits(got4[r], want[t][r0 + r], "prepared dot_rows4", cols, r0 + r, t);
          }
        }
      }
    }
  }
}

// Every ISA's repack writes the scalar repack's bytes (random and extreme quants, every row
// length), and nothing past the group's block columns.
TEST_P(Rows16Isa, RepackGivesTheScalarBytes) {
  const auto [isa, type] = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "CPU lacks " << isa_name(isa);
  const Rows16& r16 = *traits_for_isa(type, isa).rows16;
  for (const auto& [cols, fill] : every_length_and_fill(type)) {
    const Group g = make_group(type, cols, 1, 71, fill);
    // Both start from the same bytes: the scalar repack leaves a group's padding as it was.
    std::vector<uint8_t> ref(g.group.size() + 64, 0xa5), got = ref;
    traits_for_isa(type, Isa::kScalar).rows16->repack(cols, g.rows.data(), g.row_bytes, ref.data());
    r16.repack(cols, g.rows.data(), g.row_bytes, got.data());
    EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), got.size()))
        << isa_name(isa) << ", cols " << cols;
  }
}

// On ISAs that advertise rows16 kernels for a type, they are real SIMD kernels.
TEST_P(Rows16Isa, FastMeansASimdKernel) {
  const auto [isa, type] = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "CPU lacks " << isa_name(isa);
  const TypeTraits& tr = traits_for_isa(type, isa);
  const TypeTraits& scalar = traits_for_isa(type, Isa::kScalar);
  if (tr.rows16_fast) {
    EXPECT_NE(tr.rows16->dot, scalar.rows16->dot) << isa_name(isa);
  } else {
    EXPECT_EQ(tr.rows16->dot, scalar.rows16->dot) << isa_name(isa);
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, Rows16Isa,
                         ::testing::Combine(::testing::Values(Isa::kScalar, Isa::kAvx2,
                                                              Isa::kAvx512, Isa::kNeon,
                                                              Isa::kNeonDotprod),
                                            ::testing::ValuesIn(rows16_types())),
                         [](const auto& info) {
                           return std::string(isa_name(std::get<0>(info.param))) + "_" +
                                  std::string(gguf::tensor_type_name(std::get<1>(info.param)));
                         });

#if defined(__x86_64__)
// The dot_pair kernels on AMX tiles (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) against the scalar kernel, group
// by group: whole tiles of 16 tokens (K-quants: up to six a batch, then a second batch) and a rest
// on the AVX-512 pair kernel, each group's outputs and nothing beside them. With the bool false it
// runs the tile loop on a software model of the tile instructions (the arrangement of activations,
// weights and sums), which any AVX-512 CPU can; with true, on the real tiles, which only an
// AMX-INT8 CPU can: elsewhere that case is reported as skipped, not passed.
class Rows16Amx : public ::testing::TestWithParam<std::tuple<T, bool>> {};

Rows16PairKernel* amx_pair_kernel(T type, bool real) {
  switch (type) {
    case T::kQ8_0:
      return real ? rows16_q8_0_dot_pair_amx : rows16_q8_0_dot_pair_amx_model;
    case T::kQ4_0:
      return real ? rows16_q4_0_dot_pair_amx : rows16_q4_0_dot_pair_amx_model;
    case T::kQ4_K:
      return real ? rows16_q4_k_dot_pair_amx : rows16_q4_k_dot_pair_amx_model;
    case T::kQ5_K:
      return real ? rows16_q5_k_dot_pair_amx : rows16_q5_k_dot_pair_amx_model;
    case T::kQ6_K:
      return real ? rows16_q6_k_dot_pair_amx : rows16_q6_k_dot_pair_amx_model;
    default:
      return nullptr;
  }
}

TEST_P(Rows16Amx, PairGivesEachGroupTheScalarBits) {
  const auto [type, real] = GetParam();
  if (!isa_supported(Isa::kAvx512)) GTEST_SKIP() << "CPU lacks avx512: not run";
  if (real && !amx_usable()) GTEST_SKIP() << "no AMX-INT8 tiles on this CPU or OS: not run";
  Rows16PairKernel* const kernel = amx_pair_kernel(type, real);
  ASSERT_NE(kernel, nullptr);
  const auto block = static_cast<int64_t>(gguf::tensor_type_info(type).block_elems);
  // The model is slow: its long rows stay short.
  const int64_t longest = real ? 4096 : 1024;
  constexpr int kMaxTokens = 113;
  for (const auto& [cols, fill] :
       {std::pair{block, Fill::kRandom}, std::pair{3 * block, Fill::kRandom},
        std::pair{longest, Fill::kRandom}, std::pair{int64_t{1024}, Fill::kAllMax},
        std::pair{int64_t{1024}, Fill::kAllMin}}) {
    const Group g0 = make_group(type, cols, kMaxTokens, 61, fill);
    const Group g1 = make_group(type, cols, kMaxTokens, 67, fill);
    for (int n : {16, 17, 31, 48, 49, 96, kMaxTokens}) {
      expect_pair_scalar_bits(
          kernel, type, g0, g1, n, kMaxTokens,
          std::string(gguf::tensor_type_name(type)) + (real ? " tiles" : " model"));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TileModelAndTiles, Rows16Amx,
                         ::testing::Combine(::testing::Values(T::kQ8_0, T::kQ4_0, T::kQ4_K,
                                                              T::kQ5_K, T::kQ6_K),
                                            ::testing::Values(false, true)),
                         [](const auto& info) {
                           return std::string(gguf::tensor_type_name(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) ? "_tiles" : "_model");
                         });

// Benchmarks time the tiles beside the VNNI pair kernel they replace (rows16_vnni_beside_amx):
// where matmul runs a type on tiles, the same layout with the AVX-512 pair kernel, which gives
// the scalar bits, at the default call length; nullptr wherever matmul runs no tiles.
TEST(Rows16AmxBeside, TheVnniPairKernelWhereMatmulRunsTiles) {
  EXPECT_EQ(rows16_vnni_beside_amx(T::kF32), nullptr);  // no rows16 layout at all
  for (T type : {T::kQ8_0, T::kQ4_0, T::kQ4_K, T::kQ5_K, T::kQ6_K}) {
    const Rows16* vnni = rows16_vnni_beside_amx(type);
    if (!amx_in_matmul()) {
      EXPECT_EQ(vnni, nullptr) << gguf::tensor_type_name(type);
      continue;
    }
    ASSERT_NE(vnni, nullptr) << gguf::tensor_type_name(type);
    const Rows16& active = *traits(type).rows16;
    EXPECT_EQ(active.dot_pair, amx_pair_kernel(type, true));
    ASSERT_NE(vnni->dot_pair, nullptr);
    EXPECT_NE(vnni->dot_pair, active.dot_pair);
    EXPECT_EQ(vnni->dot, active.dot);
    EXPECT_EQ(vnni->prepare_act, active.prepare_act);
    EXPECT_EQ(vnni->group_bytes, active.group_bytes);
    EXPECT_EQ(vnni->call_tokens, kRows16CallTokens);
    constexpr int64_t kCols = 1024;
    constexpr int kMaxTokens = 24;
    const Group g0 = make_group(type, kCols, kMaxTokens, 31, Fill::kRandom);
    const Group g1 = make_group(type, kCols, kMaxTokens, 47, Fill::kRandom);
    for (int n : {1, 16, kMaxTokens}) {
      expect_pair_scalar_bits(vnni->dot_pair, type, g0, g1, n, kMaxTokens, "vnni beside amx");
    }
  }
}
#endif

}  // namespace
}  // namespace hearth::quant
