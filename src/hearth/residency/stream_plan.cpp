#include "hearth/residency/stream_plan.h"

#include <algorithm>
#include <map>
#include <utility>

namespace hearth::residency {

uint64_t aligned_span(uint64_t offset, uint64_t bytes, uint64_t align) {
  if (bytes == 0) return 0;
  const uint64_t b = offset / align * align;
  const uint64_t e = (offset + bytes + align - 1) / align * align;
  return e - b;
}

namespace {

// Items of consecutive matrices sharing (layer, group), over the matrices `take` marks.
std::vector<StreamItem> group_items(const StreamPlanInput& in, const std::vector<bool>& take) {
  std::vector<StreamItem> items;
  for (size_t i = 0; i < in.matrices.size(); ++i) {
    if (!take[i]) continue;
    const PlannedMatrix& m = in.matrices[i];
    if (items.empty() || items.back().layer != m.layer || items.back().group != m.group) {
      items.push_back(StreamItem{m.layer, m.group, {}, 0});
    }
    items.back().matrices.push_back(static_cast<int>(i));
    items.back().bytes += aligned_span(m.offset, m.bytes, in.align);
  }
  return items;
}

}  // namespace

uint64_t min_stream_buffer(const StreamPlanInput& in) {
  uint64_t largest = 0;
  for (const StreamItem& it : group_items(in, std::vector<bool>(in.matrices.size(), true))) {
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
  p.items = group_items(in, p.streamed);
  return p;
}

}  // namespace hearth::residency
