// Small statistics the benchmarks share.
#pragma once

#include <algorithm>
#include <vector>

namespace hearth::cli {

// The median of `v` (the upper one of an even count); 0 for none. Benchmarks report medians:
// one slow rep on a shared machine does not move them.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace hearth::cli
