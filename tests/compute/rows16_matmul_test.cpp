// matvec / matmul / matvec_many on weights repacked into the rows16 layout. The values are
// the GGUF rows', so results must match the GGUF-layout product up to float summation order
// (bounded as in matmul_test.cpp: 1e-4 * sum |w x| per output); the bitwise properties the
// engine and the server rely on (every token of a matmul equals its matvec, mixed layouts in
// matvec_many, the same bits on every ISA) are checked exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "hearth/base/error.h"
#include "hearth/compute/matmul.h"
#include "hearth/quant/block_formats.h"
#include "hearth/quant/type_traits.h"

namespace hearth::compute {
namespace {

using T = gguf::TensorType;

// Weight types that have a rows16 layout in this build.
std::vector<T> rows16_types() {
  std::vector<T> out;
  for (T t : {T::kQ8_0, T::kQ4_0, T::kQ4_K, T::kQ5_K, T::kQ6_K}) {
    if (quant::traits_for_isa(t, quant::Isa::kScalar).rows16 != nullptr) out.push_back(t);
  }
  return out;
}

std::vector<quant::Isa> machine_isas() {
  std::vector<quant::Isa> out;
  for (auto isa : {quant::Isa::kScalar, quant::Isa::kAvx2, quant::Isa::kAvx512, quant::Isa::kNeon,
                   quant::Isa::kNeonDotprod}) {
    if (quant::isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

std::vector<float> normal(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

struct Quantized {
  std::vector<uint8_t> gguf;    // (rows, cols) in type, GGUF rows
  std::vector<uint8_t> rows16;  // the same repacked
  WeightView gguf_view, rows16_view;
};

Quantized make(ThreadPool& pool, T type, int64_t rows, int64_t cols, uint32_t seed) {
  const auto src = normal(static_cast<size_t>(rows * cols), seed);
  const auto& tr = quant::traits(type);
  const size_t rb = *gguf::row_bytes(type, static_cast<uint64_t>(cols));
  Quantized q;
  q.gguf.resize(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    tr.quantize(src.data() + r * cols, q.gguf.data() + static_cast<size_t>(r) * rb, cols);
  }
  q.gguf_view = WeightView{type, rows, cols, q.gguf.data()};
  q.rows16.resize(rows16_bytes(q.gguf_view));
  q.rows16_view = repack_rows16(pool, q.gguf_view, q.rows16.data());
  return q;
}

class Rows16Matmul : public ::testing::TestWithParam<T> {};

TEST_P(Rows16Matmul, MatvecMatchesGgufLayout) {
  ThreadPool pool(2);
  for (int64_t cols : {256, 1024}) {
    const int64_t rows = 48;
    const Quantized q = make(pool, GetParam(), rows, cols, 7);
    EXPECT_EQ(q.rows16_view.layout, WeightLayout::kRows16);
    const auto x = normal(static_cast<size_t>(cols), 11);
    std::vector<float> want(static_cast<size_t>(rows)), got(static_cast<size_t>(rows));
    matvec(pool, q.gguf_view, x.data(), want.data());
    matvec(pool, q.rows16_view, x.data(), got.data());
    // Dequantized magnitudes bound the summation-order difference.
    const auto& tr = quant::traits(GetParam());
    std::vector<float> w(static_cast<size_t>(cols));
    const size_t rb = *gguf::row_bytes(GetParam(), static_cast<uint64_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      tr.to_float(q.gguf.data() + static_cast<size_t>(r) * rb, w.data(), cols);
      double mag = 0;
      for (int64_t c = 0; c < cols; ++c) mag += std::fabs(static_cast<double>(w[c]) * x[c]);
      EXPECT_NEAR(got[r], want[r], 1e-4 * mag + 1e-6) << "row " << r << " cols " << cols;
    }
  }
}

// 64 rows are two group pairs (Rows16::dot_pair where the ISA has it); 48 leave one group
// after a pair. 50 and 100 tokens take more than one call (Rows16::call_tokens, 48 or 96).
// Long rows take the tokens in chunks (at 16384 columns the fewest a chunk takes, three
// calls), so 300 tokens there are more than one chunk, the last short. Outputs of 1 MiB and more
// are streamed from a buffer of the thread's own (1040 rows x 300 tokens: 32 pairs and a group
// alone), also to an output that is not 16-byte aligned (`shift` floats past an aligned start).
TEST_P(Rows16Matmul, EveryTokenOfMatmulEqualsMatvecBitwise) {
  ThreadPool pool(2);
  struct Case {
    int64_t rows, cols;
    std::vector<int64_t> token_counts;
    size_t shift = 0;
  };
  for (const Case& c :
       {Case{64, 512, {2, 3, 4, 5, 11, 50, 100}}, Case{48, 512, {2, 3, 4, 5, 11, 50, 100}},
        Case{48, 16384, {300}}, Case{1040, 256, {300}}, Case{1040, 256, {300}, 1}}) {
    const Quantized q = make(pool, GetParam(), c.rows, c.cols, 3);
    for (int64_t n_tokens : c.token_counts) {
      const auto x =
          normal(static_cast<size_t>(n_tokens * c.cols), static_cast<uint32_t>(n_tokens));
      const size_t n_out = static_cast<size_t>(n_tokens * c.rows);
      // NaN around the output: a row written past its end or short of it shows.
      std::vector<float> buf(n_out + c.shift + 16, NAN);
      float* y = buf.data() + c.shift;
      matmul(pool, q.rows16_view, x.data(), n_tokens, y);
      std::vector<float> one(static_cast<size_t>(c.rows));
      for (int64_t t = 0; t < n_tokens; ++t) {
        matvec(pool, q.rows16_view, x.data() + t * c.cols, one.data());
        EXPECT_EQ(0, std::memcmp(one.data(), y + t * c.rows, one.size() * sizeof(float)))
            << "token " << t << " of " << n_tokens << ", " << c.rows << " x " << c.cols;
      }
      for (size_t k = 0; k < c.shift; ++k) EXPECT_TRUE(std::isnan(buf[k])) << k;
      for (size_t k = n_out; k < n_out + 16; ++k) EXPECT_TRUE(std::isnan(y[k])) << "past the end";
    }
  }
}

TEST_P(Rows16Matmul, MatvecManyMixesLayoutsBitwise) {
  ThreadPool pool(2);
  const int64_t cols = 512;
  const Quantized a = make(pool, GetParam(), 32, cols, 1);
  const Quantized b = make(pool, GetParam(), 48, cols, 2);
  const auto x = normal(static_cast<size_t>(cols), 5);
  const WeightView ws[3] = {a.rows16_view, b.gguf_view, b.rows16_view};
  std::vector<float> y0(32), y1(48), y2(48);
  float* ys[3] = {y0.data(), y1.data(), y2.data()};
  matvec_many(pool, ws, 3, x.data(), ys);
  std::vector<float> want(48);
  matvec(pool, a.rows16_view, x.data(), want.data());
  EXPECT_EQ(0, std::memcmp(want.data(), y0.data(), 32 * sizeof(float)));
  matvec(pool, b.gguf_view, x.data(), want.data());
  EXPECT_EQ(0, std::memcmp(want.data(), y1.data(), 48 * sizeof(float)));
  matvec(pool, b.rows16_view, x.data(), want.data());
  EXPECT_EQ(0, std::memcmp(want.data(), y2.data(), 48 * sizeof(float)));
}

// Prefill's Q/K/V: matrices reading the same tokens share their preparation where their
// kernels read it alike (two rows16 views of this type), the rest run alone (the GGUF view, and a
// Q6_K or Q8_0 view with another preparation); each result is matmul's alone, bit for bit.
TEST_P(Rows16Matmul, MatmulManyEqualsMatmulAloneBitwise) {
  ThreadPool pool(2);
  const int64_t cols = 512, n_tokens = 50;
  const T other = GetParam() == T::kQ6_K ? T::kQ8_0 : T::kQ6_K;
  const Quantized a = make(pool, GetParam(), 32, cols, 1);
  const Quantized b = make(pool, GetParam(), 48, cols, 2);
  const Quantized c = make(pool, other, 16, cols, 3);
  const auto x = normal(static_cast<size_t>(n_tokens * cols), 5);
  const WeightView ws[4] = {a.rows16_view, b.gguf_view, c.rows16_view, b.rows16_view};
  std::vector<std::vector<float>> ys(4);
  float* out[4];
  for (int k = 0; k < 4; ++k) {
    ys[k].assign(static_cast<size_t>(n_tokens * ws[k].rows), NAN);
    out[k] = ys[k].data();
  }
  matmul_many(pool, ws, 4, x.data(), n_tokens, out);
  for (int k = 0; k < 4; ++k) {
    std::vector<float> want(ys[k].size());
    matmul(pool, ws[k], x.data(), n_tokens, want.data());
    EXPECT_EQ(0, std::memcmp(want.data(), ys[k].data(), want.size() * sizeof(float)))
        << "matrix " << k;
  }
  const Quantized d = make(pool, GetParam(), 16, 2 * cols, 4);
  const WeightView mixed[2] = {a.rows16_view, d.rows16_view};
  EXPECT_THROW(matmul_many(pool, mixed, 2, x.data(), 2, out), UsageError);
}

TEST_P(Rows16Matmul, SameBitsOnEveryIsa) {
  ThreadPool pool(2);
  const int64_t rows = 32, cols = 1024;
  const Quantized q = make(pool, GetParam(), rows, cols, 9);
  const auto x = normal(static_cast<size_t>(3 * cols), 13);
  std::vector<float> base(static_cast<size_t>(3 * rows)), got(base.size());
  matmul(pool, q.rows16_view, x.data(), 3, base.data(), quant::Isa::kScalar);
  for (quant::Isa isa : machine_isas()) {
    matmul(pool, q.rows16_view, x.data(), 3, got.data(), isa);
    EXPECT_EQ(0, std::memcmp(base.data(), got.data(), got.size() * sizeof(float)))
        << quant::isa_name(isa);
  }
}

// Where the traits say the GGUF kernels take rows16's float steps (every type), both layouts
// give every (row, token) the same bits on every ISA: matvec, and matmul on GGUF rows, which
// repacks them on the fly from 2, 6 or 12 tokens on (Rows16::repack_min_tokens) (64 rows: two
// pairs; 48: a pair and one group; 40: two groups and 8 rows left over for vec_dot; 50 tokens: two
// calls).
TEST_P(Rows16Matmul, BothLayoutsGiveTheSameBitsWhereTheTraitsSaySo) {
  ThreadPool pool(2);
  for (quant::Isa isa : machine_isas()) {
    if (!quant::traits_for_isa(GetParam(), isa).gguf_rows16_bits) continue;
    for (const int64_t rows : {64, 48, 40}) {
      const int64_t cols = 768;
      const auto src = normal(static_cast<size_t>(rows * cols), 17);
      const auto& tr = quant::traits(GetParam());
      const size_t rb = *gguf::row_bytes(GetParam(), static_cast<uint64_t>(cols));
      std::vector<uint8_t> gguf(rb * static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) {
        tr.quantize(src.data() + r * cols, gguf.data() + static_cast<size_t>(r) * rb, cols);
      }
      const WeightView gv{GetParam(), rows, cols, gguf.data()};
      // The rows16 view of the first whole groups, to compare against.
      const WeightView head{GetParam(), rows / 16 * 16, cols, gguf.data()};
      std::vector<uint8_t> packed(rows16_bytes(head));
      const WeightView rv = repack_rows16(pool, head, packed.data());
      for (int64_t n_tokens : {1, 2, 5, 6, 11, 12, 13, 50}) {
        const auto x = normal(static_cast<size_t>(n_tokens * cols), 40 + n_tokens);
        std::vector<float> yg(static_cast<size_t>(n_tokens * rows), NAN);
        std::vector<float> yr(static_cast<size_t>(n_tokens * rv.rows), NAN);
        matmul(pool, gv, x.data(), n_tokens, yg.data(), isa);
        matmul(pool, rv, x.data(), n_tokens, yr.data(), isa);
        std::vector<float> one(static_cast<size_t>(rows), NAN);
        for (int64_t t = 0; t < n_tokens; ++t) {
          EXPECT_EQ(0, std::memcmp(yr.data() + t * rv.rows, yg.data() + t * rows,
                                   static_cast<size_t>(rv.rows) * sizeof(float)))
              << quant::isa_name(isa) << ", " << rows << " rows, token " << t << " of " << n_tokens;
          matvec(pool, gv, x.data() + t * cols, one.data(), isa);
          EXPECT_EQ(0, std::memcmp(one.data(), yg.data() + t * rows, one.size() * sizeof(float)))
              << quant::isa_name(isa) << ", " << rows << " rows, token " << t << " of " << n_tokens
              << ": matmul on GGUF rows against matvec";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, Rows16Matmul, ::testing::ValuesIn(rows16_types()),
                         [](const auto& info) {
                           return std::string(gguf::tensor_type_name(info.param));
                         });

// Q8_0 files may hold -128 (llama.cpp's quantizer stops at -127, other writers need not);
// every ISA's rows16 kernel must take it exactly (the AVX2 one multiplies |w| = 128).
TEST(Rows16Layout, Q8_0MinusOneTwentyEightIsExact) {
  ThreadPool pool(1);
  const int64_t rows = 16, cols = 64;
  std::vector<quant::BlockQ8_0> w(static_cast<size_t>(rows * cols / 32));
  for (auto& b : w) {
    b.d = 0x3C00;  // 1.0
    for (auto& q : b.qs) q = -128;
  }
  const WeightView gv{T::kQ8_0, rows, cols, w.data()};
  std::vector<uint8_t> r16(rows16_bytes(gv));
  const WeightView rv = repack_rows16(pool, gv, r16.data());
  std::vector<float> x(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) x[c] = (c % 3 == 0 ? -1.0f : 0.5f) * static_cast<float>(c % 7);
  std::vector<float> want(rows), got(rows);
  matvec(pool, gv, x.data(), want.data(), quant::Isa::kScalar);
  for (quant::Isa isa : machine_isas()) {
    matvec(pool, rv, x.data(), got.data(), isa);
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_NEAR(got[r], want[r], 1e-3 * std::fabs(want[r]) + 1e-3) << quant::isa_name(isa);
    }
  }
}

TEST(Rows16Layout, RefusesWhatItCannotHold) {
  ThreadPool pool(1);
  std::vector<uint8_t> bytes(64 * 1024);
  // 20 rows: not whole groups of 16.
  const WeightView odd{T::kQ8_0, 20, 256, bytes.data()};
  EXPECT_FALSE(rows16_worthwhile(odd));
  EXPECT_THROW(rows16_bytes(odd), UsageError);
  // f32 has no rows16 layout.
  const WeightView f32{T::kF32, 16, 256, bytes.data()};
  EXPECT_FALSE(rows16_worthwhile(f32));
  EXPECT_THROW(rows16_bytes(f32), UsageError);
  // A view claiming rows16 with a bad row count is refused by the products.
  WeightView bad = odd;
  bad.layout = WeightLayout::kRows16;
  std::vector<float> x(256), y(20);
  EXPECT_THROW(matvec(pool, bad, x.data(), y.data()), UsageError);
  // Repacking twice is refused.
  WeightView twice{T::kQ8_0, 16, 256, bytes.data(), WeightLayout::kRows16};
  EXPECT_THROW(repack_rows16(pool, twice, bytes.data()), UsageError);
}

}  // namespace
}  // namespace hearth::compute
