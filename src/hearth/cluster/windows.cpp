#include "hearth/cluster/windows.h"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>

#include "hearth/base/error.h"

namespace hearth::cluster {
namespace {

int64_t checked_total(int n_layers, const std::vector<int>& w) {
  if (n_layers < 1) throw UsageError(fmt::format("ring: model has {} layers", n_layers));
  if (w.empty()) throw UsageError("ring: the plan has no devices");
  int64_t total = 0;
  for (size_t m = 0; m < w.size(); ++m) {
    // The head (device 0) may hold no layers: it embeds and computes the logits only.
    if (w[m] < (m == 0 ? 0 : 1)) {
      throw UsageError(fmt::format("ring: device {} has window size {} (must be >= {})", m, w[m],
                                   m == 0 ? 0 : 1));
    }
    total += w[m];
  }
  if (total < 1) throw UsageError("ring: the plan assigns no layers");
  return total;
}

}  // namespace

int ring_rounds(int n_layers, const std::vector<int>& w) {
  const int64_t total = checked_total(n_layers, w);
  return static_cast<int>((n_layers + total - 1) / total);
}

std::vector<std::vector<Window>> ring_windows(int n_layers, const std::vector<int>& w) {
  const int64_t total = checked_total(n_layers, w);
  const int k = ring_rounds(n_layers, w);
  std::vector<std::vector<Window>> out(w.size(), std::vector<Window>(k));
  for (int r = 0; r < k; ++r) {
    int64_t start = r * total;
    for (size_t m = 0; m < w.size(); ++m) {
      const int64_t b = std::min<int64_t>(start, n_layers);
      const int64_t e = std::min<int64_t>(start + w[m], n_layers);
      out[m][r] = Window{static_cast<int>(b), static_cast<int>(e)};
      start += w[m];
    }
  }
  return out;
}

std::vector<int> even_split(int n_layers, int n_devices) {
  if (n_devices < 1) throw UsageError("ring: no devices");
  if (n_layers < n_devices) {
    throw UsageError(
        fmt::format("ring: {} devices but the model has only {} layers", n_devices, n_layers));
  }
  std::vector<int> w(n_devices, n_layers / n_devices);
  for (int m = 0; m < n_layers % n_devices; ++m) ++w[m];
  return w;
}

std::vector<int> parse_plan(const std::string& text, int n_devices) {
  std::vector<int> w;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    int v = 0;
    const auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    const int least = w.empty() ? 0 : 1;  // the head's entry may be 0
    if (item.empty() || ec != std::errc() || p != item.data() + item.size() || v < least) {
      throw UsageError(fmt::format("--plan: entry {} '{}' is not a window size >= {} (in '{}')",
                                   w.size(), item, least, text));
    }
    w.push_back(v);
    pos = comma + 1;
  }
  if (static_cast<int>(w.size()) != n_devices) {
    throw UsageError(fmt::format("--plan '{}' has {} windows for {} devices (head + workers)", text,
                                 w.size(), n_devices));
  }
  return w;
}

}  // namespace hearth::cluster
