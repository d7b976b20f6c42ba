// Random data and block builders shared by the quant tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "hearth/base/half.h"
#include "hearth/gguf/tensor_type.h"
#include "hearth/quant/block_formats.h"
#include "hearth/quant/type_traits.h"

namespace hearth::quant::testing {

inline std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline size_t row_bytes(TensorType t, int64_t n) {
  return *gguf::row_bytes(t, static_cast<uint64_t>(n));
}

// A finite fp16 in [lo, hi] (positive), for block scales.
inline uint16_t random_half(std::mt19937& rng, float lo, float hi) {
  return float_to_half(std::uniform_real_distribution<float>(lo, hi)(rng));
}

// Weight rows of `type` whose quant bytes are uniformly random (every bit pattern the
// kernels may meet in a file, including -128 in Q8_0 and 63 in 6-bit scales) and whose
// fp16 scales are random finite values. Float types get Gaussian values.
inline std::vector<uint8_t> random_blocks(TensorType type, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(row_bytes(type, n));
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  const int64_t nb = n / gguf::tensor_type_info(type).block_elems;
  using T = TensorType;
  switch (type) {
    case T::kQ8_0: {
      auto* b = reinterpret_cast<BlockQ8_0*>(bytes.data());
      for (int64_t i = 0; i < nb; ++i) b[i].d = random_half(rng, 1e-3f, 2e-2f);
      break;
    }
    case T::kQ4_0: {
      auto* b = reinterpret_cast<BlockQ4_0*>(bytes.data());
      for (int64_t i = 0; i < nb; ++i) b[i].d = random_half(rng, 1e-2f, 0.2f);
      break;
    }
    case T::kQ4_K: {
      auto* b = reinterpret_cast<BlockQ4_K*>(bytes.data());
      for (int64_t i = 0; i < nb; ++i) {
        b[i].d = random_half(rng, 1e-3f, 1e-2f);
        b[i].dmin = random_half(rng, 1e-3f, 1e-2f);
      }
      break;
    }
    case T::kQ5_K: {
      auto* b = reinterpret_cast<BlockQ5_K*>(bytes.data());
      for (int64_t i = 0; i < nb; ++i) {
        b[i].d = random_half(rng, 1e-3f, 1e-2f);
        b[i].dmin = random_half(rng, 1e-3f, 1e-2f);
      }
      break;
    }
    case T::kQ6_K: {
      auto* b = reinterpret_cast<BlockQ6_K*>(bytes.data());
      for (int64_t i = 0; i < nb; ++i) b[i].d = random_half(rng, 1e-4f, 1e-3f);
      break;
    }
    case T::kF32:
    case T::kF16:
    case T::kBF16: {
      const auto v = gaussian(static_cast<size_t>(n), seed);
      traits_for_isa(type, Isa::kScalar).quantize(v.data(), bytes.data(), n);
      break;
    }
    default:
      break;
  }
  return bytes;
}

inline std::vector<float> dequantize(TensorType type, const void* data, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  traits_for_isa(type, Isa::kScalar).to_float(data, out.data(), n);
  return out;
}

}  // namespace hearth::quant::testing
