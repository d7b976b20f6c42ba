// Residency of the ring (prima.cpp v2 A.2): after a device finishes its window of round r,
// a background thread asks the kernel to read its window of round r+1 into the page cache
// (madvise MADV_WILLNEED on the layers' byte ranges in the read-only mapping) while the
// other devices compute, so the window is resident when the hidden state comes back.
// Only the next window is requested, so prefetched pages are not evicted by later ones
// before use when memory is tight.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <thread>

#include "hearth/cluster/windows.h"
#include "hearth/model/weights.h"

namespace hearth::cluster {

class WindowPrefetcher {
 public:
  // `mapping` is the whole file mapping (ranges are clamped to it); `weights` must outlive us.
  WindowPrefetcher(const model::ModelWeights& weights, std::span<const uint8_t> mapping);
  ~WindowPrefetcher();
  WindowPrefetcher(const WindowPrefetcher&) = delete;
  WindowPrefetcher& operator=(const WindowPrefetcher&) = delete;

  // Queues `w` (replacing a queued window not started yet) and returns at once.
  void request(Window w);
  // Blocks until every queued request has been issued (tests, orderly shutdown).
  void drain();

  uint64_t bytes_advised() const { return bytes_.load(); }  // page-rounded, all requests
  uint64_t windows_advised() const { return windows_.load(); }

 private:
  void run();
  void advise(Window w);

  const model::ModelWeights& weights_;
  std::span<const uint8_t> mapping_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Window> pending_;
  bool busy_ = false;
  bool quit_ = false;
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> windows_{0};
  std::thread thread_;
};

}  // namespace hearth::cluster
