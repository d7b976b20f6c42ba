// Layer windows of the pipelined ring (prima.cpp v2 §3.1): devices in ring order (device 0 is
// the head) each own a window of w_m consecutive layers per round; one token makes
// k = ceil(L / W) rounds, W = sum(w). Round r, device m computes
//   [r*W + sum(w_j, j < m), + w_m)  clipped to [0, L).
// When W does not divide L the last round is partial: the devices after the layer that ends
// the model get an empty window that round.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hearth::cluster {

// Half-open layer range [begin, end); begin == end means no layers.
struct Window {
  int begin = 0;
  int end = 0;
  int size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  bool operator==(const Window&) const = default;
};

// windows[m][r]: device m's window in round r, (n_devices, k). Throws UsageError when a
// window size is < 1 (the head's, device 0, may be 0: it then only embeds and computes the
// logits), all are 0, the list is empty, or n_layers < 1.
std::vector<std::vector<Window>> ring_windows(int n_layers, const std::vector<int>& w);

// Number of rounds k = ceil(L / W).
int ring_rounds(int n_layers, const std::vector<int>& w);

// One window per device, sizes differing by at most one (earlier devices get the extra
// layers), k = 1. UsageError when there are more devices than layers.
std::vector<int> even_split(int n_layers, int n_devices);

// Parses "w0,w1,..." for n_devices devices (w0 >= 0, the rest >= 1); UsageError naming the
// bad entry.
std::vector<int> parse_plan(const std::string& text, int n_devices);

}  // namespace hearth::cluster
