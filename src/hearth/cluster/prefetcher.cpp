#include "hearth/cluster/prefetcher.h"

#include <unistd.h>

#include <algorithm>

#include "hearth/residency/device_meter.h"

namespace hearth::cluster {

std::vector<residency::ByteRange> window_ranges(const model::ModelWeights& weights, Window w) {
  std::vector<residency::ByteRange> out;
  const int n_layers = static_cast<int>(weights.layers.size());
  for (int l = std::max(w.begin, 0); l < std::min(w.end, n_layers); ++l) {
    for (const auto& [ptr, len] : weights.layers[l].spans) out.push_back({ptr, len});
  }
  return out;
}

WindowPrefetcher::WindowPrefetcher(const model::ModelWeights& weights,
                                   std::span<const uint8_t> mapping)
    : weights_(weights),
      owned_pages_(std::make_unique<residency::MappedPages>(mapping, "")),
      pages_(*owned_pages_),
      thread_([this] { run(); }) {}

WindowPrefetcher::WindowPrefetcher(const model::ModelWeights& weights,
                                   const residency::MappedPages& pages, bool prefetch,
                                   residency::PrefetchMethod method, bool release)
    : weights_(weights),
      pages_(pages),
      prefetch_(prefetch),
      method_(method),
      release_(release),
      thread_([this] { run(); }) {}

WindowPrefetcher::~WindowPrefetcher() {
  {
    std::lock_guard lock(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void WindowPrefetcher::request(Window w, Window used) {
  if (w.empty() && used.empty()) return;
  // Counted as asked for, here rather than when the thread gets to it: a step's count (the
  // ring's per-step stats) then does not depend on how soon the thread ran. Per tensor span
  // from its page-rounded start, as the kernel reads it.
  if (prefetch_ && !w.empty()) {
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    for (const auto& r : window_ranges(weights_, w)) {
      const uintptr_t p = reinterpret_cast<uintptr_t>(r.data);
      bytes_ += (p + r.size) - (p & ~(page - 1));
    }
  }
  {
    std::lock_guard lock(mu_);
    pending_ = std::make_pair(w, used);
  }
  cv_.notify_all();
}

void WindowPrefetcher::drain() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return (!pending_ && !busy_) || quit_; });
}

void WindowPrefetcher::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return pending_.has_value() || quit_; });
    if (quit_) return;
    const auto [w, used] = *pending_;
    pending_.reset();
    busy_ = true;
    lock.unlock();
    const uint64_t f0 = residency::thread_major_faults();
    advise(w, used);
    faults_ += residency::thread_major_faults() - f0;
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

void WindowPrefetcher::advise(Window w, Window used) {
  // With k = 1 the window just used is also the next one: releasing it would only force
  // the reload that prefetching is meant to hide.
  if (release_ && !used.empty() && !(used == w)) {
    released_ += pages_.release(window_ranges(weights_, used));
  }
  if (!prefetch_ || w.empty()) return;
  pages_.prefetch(window_ranges(weights_, w), method_);
  ++windows_;
}

}  // namespace hearth::cluster
