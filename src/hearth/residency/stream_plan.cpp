#include "hearth/residency/stream_plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

namespace hearth::residency {

uint64_t aligned_span(uint64_t offset, uint64_t bytes, uint64_t align) {
  if (bytes == 0) return 0;
  const uint64_t b = offset / align * align;
  const uint64_t e = (offset + bytes + align - 1) / align * align;
  return e - b;
}

uint64_t stream_slice_bytes(uint64_t total_memory, double target) {
  const auto quarter = static_cast<uint64_t>(target * static_cast<double>(total_memory) / 4);
  return std::max<uint64_t>(quarter, uint64_t{64} << 10);
}

double stream_buffer_share(uint64_t total_memory, double taken_bytes, double target) {
  const double share = std::floor(target * static_cast<double>(total_memory));
  return share - std::max(std::floor(share * kUntrackedShare), double{kUntrackedMinBytes}) -
         taken_bytes;
}

uint64_t stream_buffer_cap(uint64_t total_memory, uint64_t taken_bytes, uint64_t buffer_min,
                           double target) {
  const double share = stream_buffer_share(total_memory, static_cast<double>(taken_bytes), target);
  return share > static_cast<double>(buffer_min) ? static_cast<uint64_t>(share) : buffer_min;
}

namespace {

StreamItem new_item(int layer, int group) {
  StreamItem it;
  it.layer = layer;
  it.group = group;
  return it;
}

void add_range(StreamItem& it, uint64_t offset, uint64_t bytes, uint64_t align) {
  it.ranges.push_back(FileRange{offset, bytes});
  it.bytes += aligned_span(offset, bytes, align);
}

// The items over the matrices `take` marks: per run of matrices sharing (layer, group), one
// item of its streamed matrices, or, when one of them is larger than in.slice_bytes, one item
// per part (`sliced` gets the group's parts).
std::vector<StreamItem> group_items(const StreamPlanInput& in, const std::vector<bool>& take,
                                    std::vector<SlicedGroup>* sliced) {
  std::vector<StreamItem> items;
  const size_t n = in.matrices.size();
  for (size_t i0 = 0; i0 < n;) {
    const int layer = in.matrices[i0].layer, group = in.matrices[i0].group;
    size_t i1 = i0;
    bool any = false, big = false;
    while (i1 < n && in.matrices[i1].layer == layer && in.matrices[i1].group == group) {
      if (take[i1]) {
        any = true;
        big = big || (in.slice_bytes > 0 && in.matrices[i1].bytes > in.slice_bytes);
      }
      ++i1;
    }
    if (any && !big) {
      StreamItem it = new_item(layer, group);
      for (size_t i = i0; i < i1; ++i) {
        if (!take[i]) continue;
        it.matrices.push_back(static_cast<int>(i));
        add_range(it, in.matrices[i].offset, in.matrices[i].bytes, in.align);
      }
      items.push_back(std::move(it));
    } else if (any) {
      SlicedGroup sg{layer, group, {}};
      for (size_t i = i0; i < i1; ++i) {
        const PlannedMatrix& m = in.matrices[i];
        const int64_t rows = std::max<int64_t>(m.rows, 1);
        if (!take[i]) {
          sg.parts.push_back(PlanPart{static_cast<int>(i), 0, rows, false});
          continue;
        }
        const uint64_t pieces = std::min<uint64_t>(static_cast<uint64_t>(rows),
                                                   (m.bytes + in.slice_bytes - 1) / in.slice_bytes);
        const int64_t step =
            (rows + static_cast<int64_t>(pieces) - 1) / static_cast<int64_t>(pieces);
        const uint64_t row_bytes = m.bytes / static_cast<uint64_t>(rows);
        for (int64_t r0 = 0; r0 < rows; r0 += step) {
          const int64_t r1 = std::min(rows, r0 + step);
          StreamItem it = new_item(layer, group);
          it.part = static_cast<int>(sg.parts.size());
          it.matrices.push_back(static_cast<int>(i));
          it.row_begin = r0;
          it.row_end = r1;
          add_range(it, m.offset + static_cast<uint64_t>(r0) * row_bytes,
                    static_cast<uint64_t>(r1 - r0) * row_bytes, in.align);
          sg.parts.push_back(PlanPart{static_cast<int>(i), r0, r1, true});
          items.push_back(std::move(it));
        }
      }
      if (sliced != nullptr) sliced->push_back(std::move(sg));
    }
    i0 = i1;
  }
  return items;
}

}  // namespace

uint64_t min_stream_buffer(const StreamPlanInput& in) {
  uint64_t largest = 0;
  for (const StreamItem& it :
       group_items(in, std::vector<bool>(in.matrices.size(), true), nullptr)) {
    largest = std::max(largest, it.bytes);
  }
  return 2 * largest;
}

StreamPlan plan_stream(const StreamPlanInput& in) {
  StreamPlan p;
  const size_t n = in.matrices.size();
  p.streamed.assign(n, false);
  uint64_t matrix_bytes = 0;
  for (const auto& m : in.matrices) matrix_bytes += m.bytes;
  p.assigned_bytes = in.fixed_bytes + matrix_bytes;
  if (p.assigned_bytes <= in.budget_bytes || n == 0) {
    p.resident_bytes = p.assigned_bytes;
    p.weight_budget_bytes = in.budget_bytes;
    return p;
  }
  p.buffer_bytes = std::max(in.buffer_bytes, min_stream_buffer(in));
  const uint64_t room = in.budget_bytes > in.fixed_bytes + p.buffer_bytes
                            ? in.budget_bytes - in.fixed_bytes - p.buffer_bytes
                            : 0;
  p.weight_budget_bytes = in.budget_bytes > p.buffer_bytes ? in.budget_bytes - p.buffer_bytes : 0;
  const uint64_t need = matrix_bytes > room ? matrix_bytes - room : 0;  // bytes to stream

  // Matrices streamed before stay streamed.
  uint64_t streamed = 0, open_bytes = 0;
  const bool before = in.streamed_before.size() == n;
  for (size_t i = 0; i < n; ++i) {
    if (before && in.streamed_before[i]) {
      p.streamed[i] = true;
      streamed += in.matrices[i].bytes;
    } else {
      open_bytes += in.matrices[i].bytes;
    }
  }
  // Spread the rest of `need` evenly over the others: each takes its share of its bytes as a
  // debt, and is streamed once the debt reaches half its size (an error-diffusion walk over
  // the use order).
  const uint64_t more = need > streamed ? need - streamed : 0;
  const double share =
      open_bytes ? static_cast<double>(more) / static_cast<double>(open_bytes) : 0.0;
  double owed = 0;
  for (size_t i = 0; i < n; ++i) {
    if (p.streamed[i]) continue;
    const double b = static_cast<double>(in.matrices[i].bytes);
    owed += share * b;
    if (owed >= b / 2 && streamed < need) {
      p.streamed[i] = true;
      owed -= b;
      streamed += in.matrices[i].bytes;
    }
  }
  // The walk can end a matrix short: stream the largest remaining ones until enough is.
  if (streamed < need) {
    std::vector<std::pair<uint64_t, size_t>> rest;
    for (size_t i = 0; i < n; ++i) {
      if (!p.streamed[i]) rest.emplace_back(in.matrices[i].bytes, i);
    }
    std::sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a > b; });
    for (const auto& [bytes, i] : rest) {
      if (streamed >= need) break;
      p.streamed[i] = true;
      streamed += bytes;
    }
  }
  p.streamed_bytes = streamed;
  p.resident_bytes = p.assigned_bytes - streamed;
  p.items = group_items(in, p.streamed, &p.sliced);
  return p;
}

}  // namespace hearth::residency
