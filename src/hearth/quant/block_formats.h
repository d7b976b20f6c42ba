// On-disk block layouts of the GGUF quantized types this build computes with. Each struct
// is the exact byte layout a GGUF file stores (little-endian, no padding), so a row of a
// mapped tensor is reinterpreted as an array of these blocks without copying.
// fp16 fields are raw IEEE half bits (hearth/base/half.h converts them).
#pragma once

#include <cstdint>
#include <cstring>

namespace hearth::quant {

constexpr int kQK0 = 32;   // elements per block of the "_0" formats
constexpr int kQKK = 256;  // elements per super-block of the K formats

// Q8_0: x[i] = d * qs[i].
struct BlockQ8_0 {
  uint16_t d;       // fp16 scale
  int8_t qs[kQK0];  // (32) signed quants
};
static_assert(sizeof(BlockQ8_0) == 34);

// Q4_0: x[i] = d * ((qs[i] & 15) - 8), x[i + 16] = d * ((qs[i] >> 4) - 8), i < 16.
struct BlockQ4_0 {
  uint16_t d;            // fp16 scale
  uint8_t qs[kQK0 / 2];  // (16) two 4-bit quants per byte
};
static_assert(sizeof(BlockQ4_0) == 18);

// Q4_K: 8 sub-blocks of 32. Sub-block s has a 6-bit scale sc[s] and 6-bit min m[s]
// (packed in `scales`, see unpack_q4k_scales); x = d * sc[s] * q - dmin * m[s].
// Nibbles: qs[32*c + l] holds element 64*c + l (low nibble) and 64*c + 32 + l (high).
struct BlockQ4_K {
  uint16_t d;            // fp16 super-scale of the sub-block scales
  uint16_t dmin;         // fp16 super-scale of the sub-block mins
  uint8_t scales[12];    // 8 scales + 8 mins, 6 bits each
  uint8_t qs[kQKK / 2];  // (128) 4-bit quants
};
static_assert(sizeof(BlockQ4_K) == 144);

// Q5_K: Q4_K plus a fifth bit: bit (2c) of qh[l] is the high bit of element 64*c + l and
// bit (2c + 1) that of element 64*c + 32 + l.
struct BlockQ5_K {
  uint16_t d;            // fp16 super-scale of the sub-block scales
  uint16_t dmin;         // fp16 super-scale of the sub-block mins
  uint8_t scales[12];    // 8 scales + 8 mins, 6 bits each (Q4_K packing)
  uint8_t qh[kQKK / 8];  // (32) high bits
  uint8_t qs[kQKK / 2];  // (128) low 4 bits
};
static_assert(sizeof(BlockQ5_K) == 176);

// Q6_K: 16 groups of 16 with int8 scales; x = d * scales[e / 16] * (q - 32), q in [0, 63].
// Within each half h (128 elements): ql[64h + l] low nibble -> element l, ql[64h + 32 + l]
// low -> 32 + l, ql[64h + l] high -> 64 + l, ql[64h + 32 + l] high -> 96 + l (l < 32);
// qh[32h + l] bits 0-1, 2-3, 4-5, 6-7 are the high 2 bits of those four elements.
struct BlockQ6_K {
  uint8_t ql[kQKK / 2];      // (128) low 4 bits
  uint8_t qh[kQKK / 4];      // (64) high 2 bits
  int8_t scales[kQKK / 16];  // (16) group scales
  uint16_t d;                // fp16 super-scale
};
static_assert(sizeof(BlockQ6_K) == 210);

// Q8_K: activation format of the K-quant dot products. bsums[g] = sum of qs[16g..16g+15]
// lets kernels apply per-group offsets (mins, the -32 of Q6_K) without touching qs.
struct BlockQ8_K {
  float d;                   // f32 scale
  int8_t qs[kQKK];           // (256) quants in [-127, 127]
  int16_t bsums[kQKK / 16];  // (16) group sums
};
static_assert(sizeof(BlockQ8_K) == 292);

// Unpacks the 12-byte Q4_K/Q5_K scale field into 8 scales and 8 mins (each 0..63).
// Bytes 0-3: low 6 bits = sc[0..3], top 2 bits = bits 4-5 of sc[4..7];
// bytes 4-7: low 6 bits = m[0..3], top 2 bits = bits 4-5 of m[4..7];
// bytes 8-11: low nibble = bits 0-3 of sc[4..7], high nibble = bits 0-3 of m[4..7].
inline void unpack_q4k_scales(const uint8_t* packed, uint8_t sc[8], uint8_t m[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = packed[j] & 63;
    m[j] = packed[j + 4] & 63;
    sc[j + 4] = static_cast<uint8_t>((packed[j + 8] & 0x0f) | ((packed[j] >> 6) << 4));
    m[j + 4] = static_cast<uint8_t>((packed[j + 8] >> 4) | ((packed[j + 4] >> 6) << 4));
  }
}

// Same unpacking with word arithmetic, for the SIMD kernels' scalar prologue: returns the
// 8 scales in `sc` bytes 0..7 and the 8 mins in `m` bytes 0..7 (little-endian).
inline void unpack_q4k_scales_u64(const uint8_t* packed, uint64_t* sc, uint64_t* m) {
  uint32_t w[3];
  std::memcpy(w, packed, 12);
  const uint32_t lo6 = 0x3f3f3f3fu, lo4 = 0x0f0f0f0fu, lo2 = 0x03030303u;
  const uint32_t sc_lo = w[0] & lo6;
  const uint32_t m_lo = w[1] & lo6;
  const uint32_t sc_hi = (w[2] & lo4) | (((w[0] >> 6) & lo2) << 4);
  const uint32_t m_hi = ((w[2] >> 4) & lo4) | (((w[1] >> 6) & lo2) << 4);
  *sc = sc_lo | static_cast<uint64_t>(sc_hi) << 32;
  *m = m_lo | static_cast<uint64_t>(m_hi) << 32;
}

inline void pack_q4k_scales(const uint8_t sc[8], const uint8_t m[8], uint8_t* packed) {
  for (int j = 0; j < 4; ++j) {
    packed[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    packed[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    packed[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4));
  }
}

}  // namespace hearth::quant
