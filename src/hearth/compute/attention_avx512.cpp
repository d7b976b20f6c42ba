// avx512 instantiation of attention_simd.h.
#include "hearth/compute/attention.h"
#include "hearth/compute/attention_simd.h"

namespace hearth::compute::detail {

void attend_rows_avx512(const float* q, float* out, int n_rows, const int64_t* row_len,
                        const KvRows& k, const KvRows& v, int head_dim, float scale) {
  simd::attend_rows_impl(q, out, n_rows, row_len, k, v, head_dim, scale);
}

}  // namespace hearth::compute::detail
