// Q4_K row-interleaved layout: repack, unpack, activation preparation and the scalar
// reference kernel (layout in rows16_kernels.h; the pieces Q5_K shares are in rows16_common.h).
#include "hearth/quant/block_formats.h"
#include "hearth/quant/rows16_common.h"
#include "hearth/quant/rows16_kernels.h"

namespace hearth::quant {

constinit const Rows16 kRows16Q4_KScalar =
    rows16_scalar<Rows16Q4_K, BlockQ4_K, rows16_pack_q4_k_part<kRows16Q4_KQuants, BlockQ4_K>,
                  rows16_unpack_q4_k_part<kRows16Q4_KQuants, BlockQ4_K>,
                  rows16_prepare_q4_k<Rows16Q4_K>, rows16_q4_k_block_dot<kRows16Q4_KQuants, -1>>();

}  // namespace hearth::quant
