// Residency of the ring (prima.cpp v2 A.2): after a device finishes its window of round r,
// a background thread asks the kernel to read its window of round r+1 into the page cache
// while the other devices compute, so the window is resident when the hidden state comes
// back. Only the next window is requested, so prefetched pages are not evicted by later ones
// before use when memory is tight. With release on, the same thread first drops the window
// just used (src/hearth/residency, docs/residency.md), so that the next window's pages do
// not evict each other or the ones about to be used.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "hearth/cluster/windows.h"
#include "hearth/model/engine.h"
#include "hearth/model/weights.h"
#include "hearth/residency/page_ranges.h"
#include "hearth/residency/release_policy.h"

namespace hearth::cluster {

// The byte ranges of the layers of `w` (clipped to the model's layers).
std::vector<residency::ByteRange> window_ranges(const model::ModelWeights& weights, Window w);

class WindowPrefetcher {
 public:
  // `mapping` is the whole file mapping (ranges are clamped to it); `weights` must outlive us.
  // WILLNEED prefetch, no release.
  WindowPrefetcher(const model::ModelWeights& weights, std::span<const uint8_t> mapping);
  // `pages` (of the same mapping) must outlive us; `release` already resolved from the mode.
  WindowPrefetcher(const model::ModelWeights& weights, const residency::MappedPages& pages,
                   bool prefetch, residency::PrefetchMethod method, bool release);
  ~WindowPrefetcher();
  WindowPrefetcher(const WindowPrefetcher&) = delete;
  WindowPrefetcher& operator=(const WindowPrefetcher&) = delete;

  // Queues `w` (replacing a queued window not started yet) and returns at once. `used`, when
  // release is on and it differs from `w`, is released first.
  void request(Window w, Window used = {});
  // Blocks until every queued request has been issued (tests, orderly shutdown).
  void drain();

  // Page-rounded bytes of every window requested, counted when asked for.
  uint64_t bytes_advised() const { return bytes_.load(); }
  uint64_t windows_advised() const { return windows_.load(); }
  uint64_t bytes_released() const { return released_.load(); }  // resident before release
  // Major faults taken by this thread (touch prefetching), to keep out of compute's count.
  uint64_t own_major_faults() const { return faults_.load(); }
  bool releases() const { return release_; }

 private:
  void run();
  void advise(Window w, Window used);

  const model::ModelWeights& weights_;
  std::unique_ptr<residency::MappedPages> owned_pages_;
  const residency::MappedPages& pages_;
  bool prefetch_ = true;
  residency::PrefetchMethod method_ = residency::PrefetchMethod::kWillNeed;
  bool release_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<std::pair<Window, Window>> pending_;  // (next, used)
  bool busy_ = false;
  bool quit_ = false;
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> windows_{0};
  std::atomic<uint64_t> released_{0};
  std::atomic<uint64_t> faults_{0};
  std::thread thread_;
};

}  // namespace hearth::cluster
