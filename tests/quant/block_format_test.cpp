// Block layouts: sizes agree with the GGUF geometry table, and hand-built blocks decode to
// the values the format defines (written out element by element here, independently of
// the reference decoder's loops).
#include <gtest/gtest.h>

#include "hearth/base/error.h"
#include "quant/quant_test_util.h"

namespace hearth::quant {
namespace {

using T = TensorType;

TEST(BlockFormat, SizesMatchGgufGeometry) {
  const std::pair<T, size_t> sizes[] = {
      {T::kQ8_0, sizeof(BlockQ8_0)}, {T::kQ4_0, sizeof(BlockQ4_0)}, {T::kQ4_K, sizeof(BlockQ4_K)},
      {T::kQ5_K, sizeof(BlockQ5_K)}, {T::kQ6_K, sizeof(BlockQ6_K)}, {T::kQ8_K, sizeof(BlockQ8_K)}};
  for (const auto& [type, size] : sizes) {
    EXPECT_EQ(gguf::tensor_type_info(type).block_bytes, size) << gguf::tensor_type_name(type);
  }
}

TEST(BlockFormat, Q4_0KnownBlock) {
  BlockQ4_0 b{};
  b.d = 0x3800;  // 0.5
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto x = testing::dequantize(T::kQ4_0, &b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(x[j], (j - 8) * 0.5f) << j;
    EXPECT_EQ(x[16 + j], (7 - j) * 0.5f) << j;
  }
}

TEST(BlockFormat, Q8_0KnownBlock) {
  BlockQ8_0 b{};
  b.d = 0x4000;  // 2.0
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j * 8 - 128);
  const auto x = testing::dequantize(T::kQ8_0, &b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(x[j], 2.0f * (j * 8 - 128)) << j;
}

// Q4_K / Q5_K scale packing, spelled out per byte: scales 0-3 and mins 0-3 are the low 6
// bits of bytes 0-3 / 4-7; scales and mins 4-7 take their low 4 bits from the nibbles of
// bytes 8-11 and their top 2 bits from the top of bytes 0-3 / 4-7.
TEST(BlockFormat, Q4_KScalePacking) {
  const uint8_t sc[8] = {1, 17, 33, 63, 5, 21, 40, 60};
  const uint8_t m[8] = {0, 3, 16, 32, 48, 63, 7, 50};
  uint8_t packed[12];
  for (int j = 0; j < 4; ++j) {
    packed[j] = static_cast<uint8_t>(sc[j] + 64 * (sc[j + 4] / 16));
    packed[j + 4] = static_cast<uint8_t>(m[j] + 64 * (m[j + 4] / 16));
    packed[j + 8] = static_cast<uint8_t>(sc[j + 4] % 16 + 16 * (m[j + 4] % 16));
  }
  uint8_t out_sc[8], out_m[8];
  unpack_q4k_scales(packed, out_sc, out_m);
  uint64_t sc64, m64;
  unpack_q4k_scales_u64(packed, &sc64, &m64);
  uint8_t repacked[12];
  pack_q4k_scales(sc, m, repacked);
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(out_sc[j], sc[j]) << j;
    EXPECT_EQ(out_m[j], m[j]) << j;
    EXPECT_EQ((sc64 >> (8 * j)) & 0xff, sc[j]) << j;
    EXPECT_EQ((m64 >> (8 * j)) & 0xff, m[j]) << j;
  }
  for (int j = 0; j < 12; ++j) EXPECT_EQ(repacked[j], packed[j]) << j;
}

TEST(BlockFormat, Q4_KKnownBlock) {
  const uint8_t sc[8] = {1, 17, 33, 63, 5, 21, 40, 60};
  const uint8_t m[8] = {0, 3, 16, 32, 48, 63, 7, 50};
  BlockQ4_K b{};
  b.d = 0x3c00;     // 1.0
  b.dmin = 0x3800;  // 0.5
  pack_q4k_scales(sc, m, b.scales);
  // Byte 32c + l: element 64c + l in the low nibble, element 64c + 32 + l in the high one.
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i % 16) | ((15 - i % 16) << 4));
  const auto x = testing::dequantize(T::kQ4_K, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const int c = e / 64, within = e % 64, l = within % 32, sb = e / 32;
    const uint8_t byte = b.qs[32 * c + l];
    const int q = within < 32 ? byte & 15 : byte >> 4;
    EXPECT_EQ(x[e], 1.0f * sc[sb] * q - 0.5f * m[sb]) << e;
  }
}

TEST(BlockFormat, Q5_KKnownBlock) {
  const uint8_t sc[8] = {2, 9, 30, 63, 1, 16, 32, 48};
  const uint8_t m[8] = {63, 0, 1, 2, 33, 44, 55, 10};
  BlockQ5_K b{};
  b.d = 0x3400;     // 0.25
  b.dmin = 0x3c00;  // 1.0
  pack_q4k_scales(sc, m, b.scales);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>(i * 7);
  for (int l = 0; l < 32; ++l) b.qh[l] = static_cast<uint8_t>(l * 37 + 11);
  const auto x = testing::dequantize(T::kQ5_K, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const int c = e / 64, upper = (e % 64) / 32, l = e % 32, sb = e / 32;
    const uint8_t byte = b.qs[32 * c + l];
    const int lo = upper ? byte >> 4 : byte & 15;
    const int hi = (b.qh[l] >> (2 * c + upper)) & 1;
    EXPECT_EQ(x[e], 0.25f * sc[sb] * (lo + 16 * hi) - 1.0f * m[sb]) << e;
  }
}

TEST(BlockFormat, Q6_KKnownBlock) {
  BlockQ6_K b{};
  b.d = 0x3800;  // 0.5
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<int8_t>(g * 17 - 128);
  for (int i = 0; i < 128; ++i) b.ql[i] = static_cast<uint8_t>(i * 13 + 5);
  for (int i = 0; i < 64; ++i) b.qh[i] = static_cast<uint8_t>(i * 29 + 3);
  const auto x = testing::dequantize(T::kQ6_K, &b, 256);
  for (int e = 0; e < 256; ++e) {
    // Half h, quarter k of 32, lane l: ql byte 64h + 32(k%2) + l, nibble k/2; qh byte
    // 32h + l, bits 2k..2k+1.
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const uint8_t lb = b.ql[64 * h + 32 * (k % 2) + l];
    const int lo = k < 2 ? lb & 15 : lb >> 4;
    const int hi = (b.qh[32 * h + l] >> (2 * k)) & 3;
    EXPECT_EQ(x[e], 0.5f * b.scales[e / 16] * (lo + 16 * hi - 32)) << e;
  }
}

TEST(BlockFormat, Q8_KBsumsAreGroupSums) {
  const auto v = testing::gaussian(512, 7);
  std::vector<BlockQ8_K> b(2);
  traits_for_isa(T::kQ8_K, Isa::kScalar).quantize(v.data(), b.data(), 512);
  for (const auto& blk : b) {
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int j = 0; j < 16; ++j) {
        s += blk.qs[16 * g + j];
        EXPECT_GE(blk.qs[16 * g + j], -127);
      }
      EXPECT_EQ(blk.bsums[g], s);
    }
  }
}

TEST(TypeTraits, UnsupportedTypesAndIsas) {
  EXPECT_FALSE(is_supported(T::kQ2_K));
  EXPECT_THROW(traits(T::kQ2_K), UsageError);
  EXPECT_TRUE(is_supported(T::kQ4_K));
  EXPECT_EQ(traits(T::kQ4_K).vec_dot_type, T::kQ8_K);
  EXPECT_EQ(traits(T::kQ6_K).vec_dot_type, T::kQ8_K);
  EXPECT_EQ(traits(T::kQ8_0).vec_dot_type, T::kQ8_0);
  EXPECT_EQ(traits(T::kF16).vec_dot_type, T::kF32);
  EXPECT_TRUE(isa_supported(Isa::kScalar));
  EXPECT_TRUE(isa_supported(active_isa()));
#if defined(__x86_64__)
  EXPECT_FALSE(isa_supported(Isa::kNeon));
  EXPECT_THROW(traits_for_isa(T::kQ4_K, Isa::kNeon), UsageError);
#endif
  EXPECT_STREQ(isa_name(Isa::kAvx512), "avx512");
}

}  // namespace
}  // namespace hearth::quant
