#include "hearth/cluster/peer_limits.h"

#include <algorithm>

namespace hearth::cluster {

uint64_t inbox_rows_bound(const model::HParams& hp) {
  return std::clamp<uint64_t>(hp.ctx_train, 4096, 65536);
}

uint64_t data_message_bytes(uint32_t dim, uint64_t rows) {
  // round, next_layer, final, dim, n_segments, n_floats: well under 64 bytes.
  constexpr uint64_t kFields = 64;
  constexpr uint64_t kSegmentBytes = 12;
  return net::kHeaderBytes + kFields + rows * (kSegmentBytes + uint64_t{dim} * sizeof(float));
}

}  // namespace hearth::cluster
