// The SIMD activation quantizers (Q8_K, Q8_0 on AVX2 / AVX-512) must write the reference's
// bytes for every input: decode on one device and a ring of mixed CPUs then see the same
// activations. Inputs cover the awkward cases: exact .5 ties, zeros, subnormals, huge
// values, infinities and NaN.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/reference_kernels.h"
#include "hearth/quant/type_traits.h"

namespace hearth::quant {
namespace {

using T = gguf::TensorType;

struct Case {
  std::string name;
  std::vector<float> x;
};

std::vector<Case> cases(int block) {
  std::vector<Case> out;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (int blocks : {1, 2, 3, 4}) {
    for (float scale : {1e-3f, 1.0f, 1e3f}) {
      std::vector<float> x(static_cast<size_t>(blocks * block));
      for (auto& v : x) v = scale * normal(rng);
      out.push_back({"normal x" + std::to_string(scale) + " blocks " + std::to_string(blocks), x});
    }
  }
  const auto n = static_cast<size_t>(2 * block);
  out.push_back({"zeros", std::vector<float>(n, 0.0f)});
  std::vector<float> one(n, 0.0f);
  one[3] = -2.5f;
  one[static_cast<size_t>(block) + 7] = 1e-30f;
  out.push_back({"one nonzero per block", one});
  // Max 127 makes the scale exactly 1 (Q8_K), so x * id lands on k + 0.5: ties to even.
  std::vector<float> ties(n);
  for (size_t j = 0; j < n; ++j) ties[j] = static_cast<float>(static_cast<int>(j % 64) - 32) + 0.5f;
  ties[0] = 127.0f;
  ties[static_cast<size_t>(block)] = -127.0f;
  out.push_back({"ties", ties});
  // Q8_0: amax / 127 = 1.4 * 2^-24 rounds to the fp16 subnormal 2^-24, so finite x * id
  // reaches ~178 and the clamp does the work.
  std::vector<float> coarse(n);
  for (size_t j = 0; j < n; ++j) {
    coarse[j] =
        std::ldexp(1.4f * 127.0f, -24) * static_cast<float>(static_cast<int>(j % 64) - 32) / 32.0f;
  }
  out.push_back({"coarse fp16 scale", coarse});
  std::vector<float> sub(n);
  for (size_t j = 0; j < n; ++j) sub[j] = static_cast<float>(j + 1) * 1e-45f;  // subnormals
  out.push_back({"subnormals", sub});
  std::vector<float> huge(n);
  for (size_t j = 0; j < n; ++j)
    huge[j] = (j % 2 ? -1.0f : 1.0f) * FLT_MAX / static_cast<float>(j + 1);
  out.push_back({"huge", huge});
  std::vector<float> inf(n, 1.0f);
  inf[1] = std::numeric_limits<float>::infinity();
  inf[static_cast<size_t>(block) + 2] = -std::numeric_limits<float>::infinity();
  out.push_back({"infinities", inf});
  std::vector<float> nan(n);
  for (size_t j = 0; j < n; ++j) nan[j] = normal(rng);
  nan[5] = std::numeric_limits<float>::quiet_NaN();
  // NaN last in every lane of the first block: a max with swapped operands keeps those
  // (earlier ones it forgets, and so may a lane reduction).
  for (size_t k = 1; k <= 16; ++k) {
    nan[static_cast<size_t>(block) - k] = std::numeric_limits<float>::quiet_NaN();
  }
  nan[static_cast<size_t>(block) + 9] = -std::numeric_limits<float>::quiet_NaN();
  out.push_back({"nan", nan});
  std::vector<float> all_nan(n, std::numeric_limits<float>::quiet_NaN());
  out.push_back({"all nan", all_nan});
  // 37 blocks: Q8_0's AVX-512 quantizer takes 16 blocks at a time and the last 5 one by one.
  // Each block of the mixed case takes one of the kinds above.
  const auto n37 = static_cast<size_t>(37 * block);
  std::vector<float> wide(n37);
  for (auto& v : wide) v = normal(rng);
  out.push_back({"normal 37 blocks", wide});
  for (size_t k = 0; k < 37; ++k) {
    float* blk = wide.data() + k * static_cast<size_t>(block);
    for (size_t j = 0; j < static_cast<size_t>(block); ++j) {
      switch (k % 8) {
        case 0:
          blk[j] = 0.0f;
          break;
        case 1:
          blk[j] = static_cast<float>(j + 1) * 1e-45f;
          break;
        case 2:
          blk[j] = ties[j];
          break;
        case 3:
          blk[j] = coarse[j];
          break;
        case 4:
          blk[j] = huge[j];
          break;
        case 5:
          blk[j] = j == 3 ? std::numeric_limits<float>::infinity() : blk[j];
          break;
        case 6:
          blk[j] = j % 5 == 0 ? std::numeric_limits<float>::quiet_NaN() : blk[j];
          break;
        default:
          blk[j] = 1e3f * blk[j];
          break;
      }
    }
  }
  out.push_back({"mixed 37 blocks", wide});
  return out;
}

void expect_same_bytes(T type, Isa isa, int block, size_t block_bytes,
                       void (*reference)(const float*, void*, int64_t)) {
  const auto& tr = traits_for_isa(type, isa);
  for (const Case& c : cases(block)) {
    const auto n = static_cast<int64_t>(c.x.size());
    const size_t bytes = static_cast<size_t>(n / block) * block_bytes;
    std::vector<uint8_t> want(bytes, 0xAA), got(bytes, 0x55);
    reference(c.x.data(), want.data(), n);
    tr.quantize(c.x.data(), got.data(), n);
    size_t first = bytes;
    for (size_t k = 0; k < bytes; ++k) {
      if (want[k] != got[k]) {
        first = k;
        break;
      }
    }
    EXPECT_EQ(first, bytes) << isa_name(isa) << " " << c.name << ": first differing byte " << first
                            << " of " << bytes;
  }
}

std::vector<Isa> x86_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

TEST(ActivationQuant, Q8_KEveryIsaWritesTheReferenceBytes) {
  // The SIMD quantizers are the ones in the tables (else this would compare the reference
  // with itself).
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (!isa_supported(isa)) continue;
    EXPECT_NE(traits_for_isa(T::kQ8_K, isa).quantize, &ref::quantize_q8_k) << isa_name(isa);
    EXPECT_NE(traits_for_isa(T::kQ8_0, isa).quantize, &ref::quantize_q8_0) << isa_name(isa);
  }
  for (Isa isa : x86_isas()) {
    expect_same_bytes(T::kQ8_K, isa, kQKK, sizeof(BlockQ8_K), ref::quantize_q8_k);
  }
}

TEST(ActivationQuant, Q8_0EveryIsaWritesTheReferenceBytes) {
  for (Isa isa : x86_isas()) {
    expect_same_bytes(T::kQ8_0, isa, kQK0, sizeof(BlockQ8_0), ref::quantize_q8_0);
  }
}

// Whatever the input, the blocks are valid: quants in [-127, 127] (the dot kernels rely on
// never seeing -128) and Q8_K's group sums equal the quants' sums.
TEST(ActivationQuant, BlocksAreValidForEveryInput) {
  for (Isa isa : x86_isas()) {
    for (const Case& c : cases(kQK0)) {
      std::vector<BlockQ8_0> b(c.x.size() / kQK0);
      traits_for_isa(T::kQ8_0, isa)
          .quantize(c.x.data(), b.data(), static_cast<int64_t>(c.x.size()));
      for (const BlockQ8_0& blk : b) {
        for (int8_t q : blk.qs) EXPECT_NE(q, -128) << isa_name(isa) << " Q8_0 " << c.name;
      }
    }
    const auto& tr = traits_for_isa(T::kQ8_K, isa);
    for (const Case& c : cases(kQKK)) {
      std::vector<BlockQ8_K> b(c.x.size() / kQKK);
      tr.quantize(c.x.data(), b.data(), static_cast<int64_t>(c.x.size()));
      for (const BlockQ8_K& blk : b) {
        for (int g = 0; g < kQKK / 16; ++g) {
          int sum = 0;
          for (int j = 0; j < 16; ++j) {
            const int q = blk.qs[16 * g + j];
            EXPECT_GE(q, -127) << isa_name(isa) << " " << c.name;
            EXPECT_LE(q, 127) << isa_name(isa) << " " << c.name;
            sum += q;
          }
          EXPECT_EQ(blk.bsums[g], sum) << isa_name(isa) << " " << c.name;
        }
      }
    }
  }
}

// Exact ties round to even, as the dot kernels' reference assumes (scale 1: max is 127).
TEST(ActivationQuant, TiesRoundToEven) {
  std::vector<float> x(kQKK, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -3.5f;
  x[3] = 0.5f;
  for (Isa isa : x86_isas()) {
    BlockQ8_K b{};
    traits_for_isa(T::kQ8_K, isa).quantize(x.data(), &b, kQKK);
    EXPECT_EQ(b.qs[1], 2) << isa_name(isa);
    EXPECT_EQ(b.qs[2], -4) << isa_name(isa);
    EXPECT_EQ(b.qs[3], 0) << isa_name(isa);
  }
}

}  // namespace
}  // namespace hearth::quant
