// matvec / matmul against a plain double-precision product of the dequantized weights and
// the (dequantized) quantized activation. The only differences are float summation order
// inside the dot kernels, bounded as in tests/quant/dot_kernel_test.cpp; we use a uniform
// 1e-4 * sum_i |w_i x_i| bound per output, which is looser than that formula for rows
// of <= 4096 elements and far tighter than any indexing mistake (wrong row/token => O(1)).
#include "hearth/compute/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "hearth/base/error.h"
#include "hearth/quant/type_traits.h"

namespace hearth::compute {
namespace {

using T = gguf::TensorType;

struct Matrix {
  std::vector<uint8_t> bytes;  // (rows, cols) in type
  std::vector<float> dequant;  // (rows, cols) f32
};

Matrix make_matrix(T type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (auto& v : x) v = dist(rng);
  const auto& tr = quant::traits(type);
  const size_t rb = *gguf::row_bytes(type, static_cast<uint64_t>(cols));
  Matrix m;
  m.bytes.resize(rb * static_cast<size_t>(rows));
  m.dequant.resize(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    tr.quantize(x.data() + r * cols, m.bytes.data() + r * rb, cols);
    tr.to_float(m.bytes.data() + r * rb, m.dequant.data() + r * cols, cols);
  }
  return m;
}

// The activation as the kernels see it: quantized to vec_dot_type and back.
std::vector<float> as_seen(T type, const float* x, int64_t cols) {
  const auto& at = quant::traits(quant::traits(type).vec_dot_type);
  std::vector<uint8_t> q(*gguf::row_bytes(at.type, static_cast<uint64_t>(cols)));
  at.quantize(x, q.data(), cols);
  std::vector<float> out(static_cast<size_t>(cols));
  at.to_float(q.data(), out.data(), cols);
  return out;
}

void expect_product(const Matrix& m, T type, int64_t rows, int64_t cols, const float* x,
                    int64_t n_tokens, const float* y) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const auto xs = as_seen(type, x + t * cols, cols);
    for (int64_t r = 0; r < rows; ++r) {
      double want = 0, mag = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double p = static_cast<double>(m.dequant[r * cols + c]) * xs[c];
        want += p;
        mag += std::fabs(p);
      }
      ASSERT_NEAR(y[t * rows + r], want, 1e-4 * mag + 1e-6)
          << gguf::tensor_type_name(type) << " token " << t << " row " << r;
    }
  }
}

class MatTest : public ::testing::TestWithParam<T> {};

TEST_P(MatTest, MatvecMatchesReference) {
  const T type = GetParam();
  const int64_t rows = 77, cols = 1024;  // odd row count: uneven chunks
  const auto m = make_matrix(type, rows, cols, 5);
  std::vector<float> x(cols);
  std::mt19937 rng(9);
  std::normal_distribution<float> dist;
  for (auto& v : x) v = dist(rng);
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    std::vector<float> y(rows, NAN);
    matvec(pool, {type, rows, cols, m.bytes.data()}, x.data(), y.data());
    expect_product(m, type, rows, cols, x.data(), 1, y.data());
  }
}

TEST_P(MatTest, MatmulMatchesReference) {
  const T type = GetParam();
  const int64_t rows = 70, cols = 512;
  const auto m = make_matrix(type, rows, cols, 6);
  for (int64_t n_tokens : {2, 7, 65}) {
    std::vector<float> x(static_cast<size_t>(n_tokens * cols));
    std::mt19937 rng(static_cast<uint32_t>(n_tokens));
    std::normal_distribution<float> dist;
    for (auto& v : x) v = dist(rng);
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      std::vector<float> y(static_cast<size_t>(n_tokens * rows), NAN);
      matmul(pool, {type, rows, cols, m.bytes.data()}, x.data(), n_tokens, y.data());
      expect_product(m, type, rows, cols, x.data(), n_tokens, y.data());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MatTest,
                         ::testing::Values(T::kF32, T::kF16, T::kBF16, T::kQ8_0, T::kQ4_0, T::kQ4_K,
                                           T::kQ5_K, T::kQ6_K),
                         [](const auto& info) {
                           return std::string(gguf::tensor_type_name(info.param));
                         });

// The contract batched decode relies on: matmul's row for token t has exactly the bits of
// matvec on x[t] alone, for every weight type and every ISA this CPU runs. Token counts
// cover the four-token kernels' leftovers; 768 columns leave a partial block group (Q8_0
// packs 16 blocks per group) after the whole ones.
class MatmulBitwise : public ::testing::TestWithParam<std::tuple<quant::Isa, T>> {};

TEST_P(MatmulBitwise, EveryTokenEqualsMatvec) {
  const auto [isa, type] = GetParam();
  if (!quant::isa_supported(isa)) GTEST_SKIP() << "CPU lacks " << quant::isa_name(isa);
  const int64_t rows = 37, cols = 768;
  const auto m = make_matrix(type, rows, cols, 21);
  for (int64_t n_tokens : {2, 4, 5, 11, 64}) {
    std::vector<float> x(static_cast<size_t>(n_tokens * cols));  // (n_tokens, cols) f32
    std::mt19937 rng(static_cast<uint32_t>(n_tokens) + 100);
    std::normal_distribution<float> dist;
    for (auto& v : x) v = dist(rng);
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      std::vector<float> y(static_cast<size_t>(n_tokens * rows), NAN);  // (n_tokens, rows)
      matmul(pool, {type, rows, cols, m.bytes.data()}, x.data(), n_tokens, y.data(), isa);
      for (int64_t t = 0; t < n_tokens; ++t) {
        std::vector<float> yt(static_cast<size_t>(rows), NAN);  // (rows) f32
        matvec(pool, {type, rows, cols, m.bytes.data()}, x.data() + t * cols, yt.data(), isa);
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_EQ(std::memcmp(&yt[r], &y[t * rows + r], sizeof(float)), 0)
              << quant::isa_name(isa) << " " << gguf::tensor_type_name(type) << " n_tokens "
              << n_tokens << " token " << t << " row " << r << ": matvec " << yt[r] << ", matmul "
              << y[t * rows + r];
        }
      }
    }
  }
}

// Rows long enough for matvec's long-row kernels (row and activation past L1 together): matvec
// and matvec_many still give each row the bits of the ISA's vec_dot.
TEST_P(MatmulBitwise, LongRowsEqualVecDotBits) {
  const auto [isa, type] = GetParam();
  if (!quant::isa_supported(isa)) GTEST_SKIP() << "CPU lacks " << quant::isa_name(isa);
  const int64_t rows = 21, cols = 14336;
  const auto m = make_matrix(type, rows, cols, 31);
  std::vector<float> x(static_cast<size_t>(cols));  // (cols) f32
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  for (auto& v : x) v = dist(rng);
  const auto& tr = quant::traits_for_isa(type, isa);
  const auto& at = quant::traits_for_isa(tr.vec_dot_type, isa);
  std::vector<uint8_t> act(*gguf::row_bytes(tr.vec_dot_type, static_cast<uint64_t>(cols)));
  if (tr.vec_dot_type == T::kF32) {
    std::memcpy(act.data(), x.data(), act.size());
  } else {
    at.quantize(x.data(), act.data(), cols);
  }
  const size_t rb = *gguf::row_bytes(type, static_cast<uint64_t>(cols));
  const WeightView w{type, rows, cols, m.bytes.data()};
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    std::vector<float> y(static_cast<size_t>(rows), NAN), y_many(static_cast<size_t>(rows), NAN);
    matvec(pool, w, x.data(), y.data(), isa);
    float* ys[] = {y_many.data()};
    matvec_many(pool, &w, 1, x.data(), ys, isa);
    for (int64_t r = 0; r < rows; ++r) {
      float want = NAN;
      tr.vec_dot(cols, m.bytes.data() + static_cast<size_t>(r) * rb, act.data(), &want);
      ASSERT_EQ(std::memcmp(&want, &y[r], sizeof(float)), 0)
          << quant::isa_name(isa) << " " << gguf::tensor_type_name(type) << " row " << r
          << ": matvec " << y[r] << ", vec_dot " << want;
      ASSERT_EQ(std::memcmp(&want, &y_many[r], sizeof(float)), 0)
          << quant::isa_name(isa) << " " << gguf::tensor_type_name(type) << " row " << r
          << ": matvec_many " << y_many[r] << ", vec_dot " << want;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllIsas, MatmulBitwise,
    ::testing::Combine(::testing::Values(quant::Isa::kScalar, quant::Isa::kAvx2,
                                         quant::Isa::kAvx512, quant::Isa::kNeon,
                                         quant::Isa::kNeonDotprod),
                       ::testing::Values(T::kF32, T::kF16, T::kBF16, T::kQ8_0, T::kQ4_0, T::kQ4_K,
                                         T::kQ5_K, T::kQ6_K)),
    [](const auto& info) {
      return std::string(quant::isa_name(std::get<0>(info.param))) + "_" +
             std::string(gguf::tensor_type_name(std::get<1>(info.param)));
    });

// Q, K, V-like matrices of mixed types (two activation formats) in one call: each output is
// bitwise what matvec gives for that matrix alone.
TEST(MatvecMany, EqualsSeparateMatvecsBitwise) {
  const int64_t cols = 512;
  const T types[] = {T::kQ4_K, T::kQ6_K, T::kQ8_0, T::kF16};
  const int64_t rows[] = {64, 16, 33, 5};
  std::vector<Matrix> ms;
  std::vector<WeightView> views;
  for (int k = 0; k < 4; ++k) {
    ms.push_back(make_matrix(types[k], rows[k], cols, 40 + static_cast<uint32_t>(k)));
  }
  for (int k = 0; k < 4; ++k) views.push_back({types[k], rows[k], cols, ms[k].bytes.data()});
  std::vector<float> x(cols);
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  for (auto& v : x) v = dist(rng);
  for (quant::Isa isa : {quant::Isa::kScalar, quant::Isa::kAvx2, quant::Isa::kAvx512,
                         quant::Isa::kNeon, quant::Isa::kNeonDotprod}) {
    if (!quant::isa_supported(isa)) continue;
    for (int threads : {1, 2, 3}) {  // 3: guided ranges that cross matrix boundaries unevenly
      ThreadPool pool(threads);
      std::vector<std::vector<float>> ys(4), want(4);
      std::vector<float*> yp;
      for (int k = 0; k < 4; ++k) {
        ys[k].assign(static_cast<size_t>(rows[k]), NAN);
        want[k].assign(static_cast<size_t>(rows[k]), NAN);
        yp.push_back(ys[k].data());
        matvec(pool, views[k], x.data(), want[k].data(), isa);
      }
      matvec_many(pool, views.data(), 4, x.data(), yp.data(), isa);
      for (int k = 0; k < 4; ++k) {
        EXPECT_EQ(std::memcmp(ys[k].data(), want[k].data(), ys[k].size() * sizeof(float)), 0)
            << quant::isa_name(isa) << " matrix " << k << " threads " << threads;
      }
    }
  }
  ThreadPool pool(1);
  WeightView bad[2] = {views[0], {T::kQ8_0, 4, 256, ms[2].bytes.data()}};
  float* yp2[2] = {nullptr, nullptr};
  EXPECT_THROW(matvec_many(pool, bad, 2, x.data(), yp2), UsageError);
}

TEST(Matvec, RejectsBadShapesAndTypes) {
  ThreadPool pool(2);
  std::vector<uint8_t> data(1 << 16);
  std::vector<float> x(1024), y(16);
  EXPECT_THROW(matvec(pool, {T::kQ4_K, 4, 100, data.data()}, x.data(), y.data()), UsageError);
  EXPECT_THROW(matvec(pool, {T::kQ2_K, 4, 256, data.data()}, x.data(), y.data()), UsageError);
  EXPECT_THROW(matvec(pool, {T::kQ8_K, 4, 256, data.data()}, x.data(), y.data()), UsageError);
  EXPECT_THROW(matvec(pool, {T::kQ4_K, 4, 256, nullptr}, x.data(), y.data()), UsageError);
}

}  // namespace
}  // namespace hearth::compute
