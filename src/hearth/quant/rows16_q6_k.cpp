// Q6_K row-interleaved layout: repack, unpack, activation preparation and the scalar
// reference kernel (layout in rows16_kernels.h).
#include <cmath>
#include <cstring>

#include "hearth/base/half.h"
#include "hearth/quant/block_formats.h"
#include "hearth/quant/block_steps.h"
#include "hearth/quant/rows16_common.h"
#include "hearth/quant/rows16_kernels.h"

namespace hearth::quant {
namespace {

using L = Rows16Q6_K;

// GGUF Q6_K element idx (0..255): half h = idx / 128; within it quarter c = (idx % 128) / 32
// and l = idx % 32: low 4 bits in ql[64h + 32 (c & 1) + l] (low nibble for c < 2, high
// nibble otherwise), high 2 bits in qh[32h + l] bits 2c, 2c + 1.
void q6_set(BlockQ6_K& b, int idx, int q) {
  const int h = idx / 128, c = (idx % 128) / 32, l = idx % 32;
  uint8_t& lo = b.ql[64 * h + 32 * (c & 1) + l];
  lo = c < 2 ? static_cast<uint8_t>((lo & 0xf0) | (q & 15))
             : static_cast<uint8_t>((lo & 0x0f) | (q & 15) << 4);
  uint8_t& hi = b.qh[32 * h + l];
  hi = static_cast<uint8_t>((hi & ~(3 << (2 * c))) | ((q >> 4) & 3) << (2 * c));
}

// The 6-bit quant of element 16g + k (k < 16) of row r in a repacked super-block: sets 0-2
// (k < 12) are whole in the low 6 bits of vector `set`; set 3 is spread over the top two
// bits of the three vectors (bits 0-1, 2-3, 4-5 in vectors 0, 1, 2).
int rows16_get(const uint8_t* sb, int g, int r, int k) {
  const uint8_t* v = sb + 288 + 192 * g + 4 * r + k % 4;
  const int set = k / 4;
  if (set < 3) return v[64 * set] & 63;
  return (v[0] >> 6) | (v[64] >> 6) << 2 | (v[128] >> 6) << 4;
}

// Row r's share of a group block column sb, from the row's GGUF block b. Matmul repacks GGUF
// rows on the fly (compute/matmul.cpp), so this runs once per weight per prefill there: the
// quants are unpacked a whole block at a time (in q6_set's order) rather than one by one.
void pack_block(const BlockQ6_K& b, uint8_t* sb, int r) {
  std::memcpy(sb + 2 * r, &b.d, 2);
  // Eight elements l .. l + 7 of each quarter at once, one per byte of a 64-bit word (the
  // masks drop every bit a shift moves into a neighbour byte).
  uint8_t q[kQKK];
  constexpr uint64_t kLow4 = 0x0f0f0f0f0f0f0f0full, kLow2 = 0x0303030303030303ull;
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; l += 8) {
      uint64_t lo0, lo1, hi;
      std::memcpy(&lo0, b.ql + 64 * h + l, 8);
      std::memcpy(&lo1, b.ql + 64 * h + 32 + l, 8);
      std::memcpy(&hi, b.qh + 32 * h + l, 8);
      const uint64_t quarter[4] = {(lo0 & kLow4) | (hi & kLow2) << 4,
                                   (lo1 & kLow4) | ((hi >> 2) & kLow2) << 4,
                                   ((lo0 >> 4) & kLow4) | ((hi >> 4) & kLow2) << 4,
                                   ((lo1 >> 4) & kLow4) | ((hi >> 6) & kLow2) << 4};
      for (int c = 0; c < 4; ++c) std::memcpy(q + 128 * h + 32 * c + l, &quarter[c], 8);
    }
  }
  for (int g = 0; g < 16; ++g) {
    sb[32 + 16 * g + r] = static_cast<uint8_t>(b.scales[g]);
    uint8_t* v = sb + 288 + 192 * g;
    // The four elements e < 4 of each set at once, one per byte (6-bit values, so the shifts
    // move no bit into a neighbour byte that the masks keep).
    uint32_t set[4];
    std::memcpy(set, q + 16 * g, sizeof set);
    const uint32_t top = set[3];
    const uint32_t vec[3] = {set[0] | (top & 0x03030303u) << 6,
                             set[1] | ((top >> 2) & 0x03030303u) << 6,
                             set[2] | ((top >> 4) & 0x03030303u) << 6};
    for (int k = 0; k < 3; ++k) std::memcpy(v + 64 * k + 4 * r, &vec[k], 4);
  }
}

void unpack_block(const uint8_t* sb, int r, BlockQ6_K& b) {
  std::memcpy(&b.d, sb + 2 * r, 2);
  for (int g = 0; g < 16; ++g) {
    b.scales[g] = static_cast<int8_t>(sb[32 + 16 * g + r]);
    for (int k = 0; k < 16; ++k) q6_set(b, 16 * g + k, rows16_get(sb, g, r, k));
  }
}

void prepare_act(int64_t cols, const void* act_row, void* dst) {
  rows16_prepare_q8_k<L>(cols, act_row, dst, [](const BlockQ8_K& a, uint8_t* sums) {
    for (int g = 0; g < 16; ++g) {
      const int32_t corr = -32 * a.bsums[g];  // the -32 of every 6-bit quant
      std::memcpy(sums + 4 * g, &corr, 4);
    }
  });
}

// One block column's step of the scalar kernel, for row r and one token (ab: its prepared
// activation block).
float block_dot(const uint8_t* sb, int r, const uint8_t* ab, float acc) {
  const auto* aq = reinterpret_cast<const int8_t*>(ab + 80);
  int32_t s = 0;
  for (int g = 0; g < 16; ++g) {
    int32_t isum;
    std::memcpy(&isum, ab + 16 + 4 * g, 4);
    for (int k = 0; k < 16; ++k) isum += rows16_get(sb, g, r, k) * aq[16 * g + k];
    s += static_cast<int8_t>(sb[32 + 16 * g + r]) * isum;
  }
  float da;
  std::memcpy(&da, ab, 4);
  uint16_t dh;
  std::memcpy(&dh, sb + 2 * r, 2);
  return q6_k_block_step(acc, half_to_float(dh), da, s);
}

}  // namespace

constinit const Rows16 kRows16Q6_KScalar =
    rows16_scalar<L, BlockQ6_K, pack_block, unpack_block, prepare_act, block_dot>();

}  // namespace hearth::quant
