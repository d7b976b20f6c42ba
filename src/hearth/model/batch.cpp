#include "hearth/model/batch.h"

#include <fmt/core.h>

#include <unordered_set>

#include "hearth/base/error.h"

namespace hearth::model {

int64_t batch_rows(std::span<const BatchSegment> segments) {
  if (segments.empty()) throw UsageError("batch: no sequences");
  std::unordered_set<int64_t> seen;
  int64_t n = 0;
  for (const BatchSegment& s : segments) {
    if (s.n_tokens <= 0) {
      throw UsageError(fmt::format("batch: sequence {} has {} tokens", s.seq, s.n_tokens));
    }
    if (s.pos0 < 0) {
      throw UsageError(fmt::format("batch: sequence {} starts at position {}", s.seq, s.pos0));
    }
    if (!seen.insert(s.seq).second) {
      throw UsageError(fmt::format("batch: sequence {} appears twice", s.seq));
    }
    n += s.n_tokens;
  }
  return n;
}

std::string describe(std::span<const BatchSegment> segments) {
  std::string out;
  for (const BatchSegment& s : segments) {
    if (!out.empty()) out += ", ";
    out += fmt::format("seq {} (pos {}, {} tok)", s.seq, s.pos0, s.n_tokens);
  }
  return out;
}

}  // namespace hearth::model
