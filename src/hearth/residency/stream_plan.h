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
// int), its place among the group's matrices (model::GroupViews order), and its bytes in the
// file: `rows` rows of bytes / rows bytes each.
struct PlannedMatrix {
  int layer = 0;
  int group = 0;
  uint64_t offset = 0;  // file offset of its data
  uint64_t bytes = 0;
  int view = 0;
  int64_t rows = 1;
};

// Memory pressure, the paper's way (residency/memory_status.h), is the memory a run takes
// from everything else over the device's total. Weights in the page cache stay reclaimable;
// the stream buffer (direct I/O into anonymous memory) does not. So that streaming keeps the
// pressure within the paper's 6%, a device's stream buffer takes at most
// stream_buffer_cap(total, taken) bytes, where `taken` is what the run needs anyway (the
// working buffers and the KV cache at the full context), and the streamer reads matrices in
// row slices of at most stream_slice_bytes(total), so that two slices (the buffer's minimum)
// fit that cap. Only where the KV cache alone fills the share does the buffer stay at its
// minimum and the pressure exceed the target, by the KV cache the user asked for.
// Part of the share, a sixth (1% of the memory at the 6% target) but at least
// kUntrackedMinBytes, is left for what the kernel and the process charge beyond the buffers
// hearth sizes: page tables of the mapped weights, socket buffers, thread stacks and arenas,
// about the same amount whatever the device's size (measured in docs/residency.md).
inline constexpr double kPressureTarget = 0.06;
inline constexpr double kUntrackedShare = 1.0 / 6.0;
inline constexpr uint64_t kUntrackedMinBytes = uint64_t{3} << 19;  // 1.5 MiB
// A quarter of the pressure target's share of total (at least 64 KiB): the largest piece
// read as one.
uint64_t stream_slice_bytes(uint64_t total_memory, double target = kPressureTarget);
// The target's share of total, less its untracked part and `taken_bytes`, unclamped (negative
// when they exceed it).
double stream_buffer_share(uint64_t total_memory, double taken_bytes,
                           double target = kPressureTarget);
// stream_buffer_share, but never below `buffer_min`.
uint64_t stream_buffer_cap(uint64_t total_memory, uint64_t taken_bytes, uint64_t buffer_min,
                           double target = kPressureTarget);

// A byte range of the file.
struct FileRange {
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

struct StreamPlanInput {
  std::vector<PlannedMatrix> matrices;  // every matrix of the device, in use order per token
  uint64_t fixed_bytes = 0;             // always resident: norms, biases, the head's output layer
  uint64_t budget_bytes = 0;            // memory for all weights: resident part plus stream buffer
  uint64_t buffer_bytes = 0;  // requested stream buffer (0: the minimum); raised to the minimum
  uint64_t align = 4096;      // direct-I/O alignment of reads
  // Matrices larger than this are read in row slices of at most this many bytes (0: whole).
  uint64_t slice_bytes = 0;
  // When re-planning a running device: the matrices streamed so far (empty: none). They stay
  // streamed and only resident ones are added, so a smaller budget never makes a streamed
  // matrix resident again (which would have to be read back in through page faults).
  std::vector<bool> streamed_before;
};

// What the streamer reads and the engine releases as one, in use order: the streamed matrices
// of one (layer, group) (part == -1), or, in a group with a matrix larger than slice_bytes,
// one part of it (model::GroupPart): a row slice [row_begin, row_end) of one matrix.
struct StreamItem {
  int layer = 0;
  int group = 0;
  int part = -1;              // -1: the whole group; else the index into parts_of(layer, group)
  std::vector<int> matrices;  // indices into StreamPlanInput::matrices
  int64_t row_begin = 0, row_end = 0;  // part >= 0: rows of matrices[0]
  std::vector<FileRange> ranges;       // the file bytes, one range per matrix or the slice
  uint64_t bytes = 0;                  // bytes it takes in the buffer (aligned extents)
};

// The parts in which the engine computes one sliced group: every matrix of the group in view
// order, whole (row_begin = 0, row_end = rows) or as row slices.
struct PlanPart {
  int matrix = 0;  // index into StreamPlanInput::matrices
  int64_t row_begin = 0, row_end = 0;
  bool streamed = false;
};
struct SlicedGroup {
  int layer = 0;
  int group = 0;
  std::vector<PlanPart> parts;
};

struct StreamPlan {
  std::vector<bool> streamed;        // (matrices) true: read through the buffer each token
  std::vector<StreamItem> items;     // streamed groups and parts in use order
  std::vector<SlicedGroup> sliced;   // groups read in parts (in use order)
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
// twice the largest item (aligned, after slicing), when every matrix would be streamed.
uint64_t min_stream_buffer(const StreamPlanInput& in);

// Everything resident when it fits the budget; otherwise a buffer of max(requested, minimum)
// bytes and the fewest streamed bytes that leave the resident part within budget - buffer,
// spread evenly over the use order. When even the buffer does not fit, everything is streamed
// through the minimum buffer (the caller reports it).
StreamPlan plan_stream(const StreamPlanInput& in);

}  // namespace hearth::residency
