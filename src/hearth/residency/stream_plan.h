// Which of a device's weights stay resident and which are streamed (issue 16): a pure
// function of the matrices in the order a token uses them and of the memory the device gives
// its weights.
//
// A device whose weights do not fit reads them in a cyclic scan, token after token. Under
// plain LRU a scan a little larger than memory evicts every page shortly before it is needed
// again, so the device re-reads nearly all of it. The optimum for a cyclic scan keeps a fixed
// part resident and streams only the rest through a small buffer: bytes read per token =
// assigned - (budget - buffer). The streamed matrices are spread evenly over the use order, so
// that the compute of the resident matrices between two streamed ones hides their reads.
#pragma once

#include <cstdint>
#include <vector>

namespace hearth::residency {

// One weight matrix as the engine uses it: model layer, matrix group (model::MatrixGroup as
// int), and its bytes in the file.
struct PlannedMatrix {
  int layer = 0;
  int group = 0;
  uint64_t offset = 0;  // file offset of its data
  uint64_t bytes = 0;
};

struct StreamPlanInput {
  std::vector<PlannedMatrix> matrices;  // every matrix of the device, in use order per token
  uint64_t fixed_bytes = 0;             // always resident: norms, biases, the head's output layer
  uint64_t budget_bytes = 0;            // memory for all weights: resident part plus stream buffer
  uint64_t buffer_bytes = 0;  // requested stream buffer (0: the minimum); raised to the minimum
  uint64_t align = 4096;      // direct-I/O alignment of reads
  // When re-planning a running device: the matrices streamed so far (empty: none). They stay
  // streamed and only resident ones are added, so a smaller budget never makes a streamed
  // matrix resident again (which would have to be read back in through page faults).
  std::vector<bool> streamed_before;
};

// A group of streamed matrices read and released together (same layer and group), in use order.
struct StreamItem {
  int layer = 0;
  int group = 0;
  std::vector<int> matrices;  // indices into StreamPlanInput::matrices
  uint64_t bytes = 0;         // bytes it takes in the buffer (aligned extents)
};

struct StreamPlan {
  std::vector<bool> streamed;        // (matrices) true: read through the buffer each token
  std::vector<StreamItem> items;     // streamed groups in use order
  uint64_t assigned_bytes = 0;       // fixed + every matrix
  uint64_t resident_bytes = 0;       // fixed + resident matrices
  uint64_t streamed_bytes = 0;       // matrix bytes streamed per token (file bytes)
  uint64_t buffer_bytes = 0;         // 0 when nothing is streamed
  uint64_t weight_budget_bytes = 0;  // budget - buffer: what the resident part may take
  bool fits() const { return items.empty(); }
};

// Bytes of [offset, offset + bytes) rounded out to `align`.
uint64_t aligned_span(uint64_t offset, uint64_t bytes, uint64_t align);

// The smallest buffer that lets the reader fill the next item while compute holds one:
// twice the largest item (aligned), when every matrix would be streamed.
uint64_t min_stream_buffer(const StreamPlanInput& in);

// Everything resident when it fits the budget; otherwise a buffer of max(requested, minimum)
// bytes and the fewest streamed bytes that leave the resident part within budget - buffer,
// spread evenly over the use order. When even the buffer does not fit, everything is streamed
// through the minimum buffer (the caller reports it).
StreamPlan plan_stream(const StreamPlanInput& in);

}  // namespace hearth::residency
