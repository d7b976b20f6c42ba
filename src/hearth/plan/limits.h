// Helpers every scheduler shares: which k are valid, memory budgets, how many GPU layers fit,
// and splitting a total into integer shares.
#pragma once

#include <cstdint>
#include <vector>

#include "hearth/plan/cost_model.h"

namespace hearth::plan {

// Divisors k of L with W = L / k >= members (each member needs at least one layer per round).
std::vector<uint32_t> valid_rounds(uint32_t L, size_t members);

// The memory a device offers the model's pages (Halda's initial split, MemSched's ratio):
// available RAM on Linux/Windows/macOS without Metal, the Metal working set on macOS with
// Metal, RAM plus swappable memory on Android (paper §3.3, footnote 6).
double memory_budget(const profile::DeviceProfile& d);

// Largest n (GPU layers per window) whose k * n layers, KV cache included, fit in the
// device's VRAM (Metal: shared working set) at k rounds; 0 without a GPU.
uint32_t gpu_window_cap(const Problem& p, size_t m, uint32_t k);

// Splits `total` into integer shares proportional to `weights`, each at least 1 (largest
// remainder). Requires total >= weights.size().
std::vector<uint32_t> proportional_split(const std::vector<double>& weights, uint32_t total);

}  // namespace hearth::plan
