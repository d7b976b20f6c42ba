#include "hearth/cluster/prefetcher.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "hearth/base/log.h"

namespace hearth::cluster {

WindowPrefetcher::WindowPrefetcher(const model::ModelWeights& weights,
                                   std::span<const uint8_t> mapping)
    : weights_(weights), mapping_(mapping), thread_([this] { run(); }) {}

WindowPrefetcher::~WindowPrefetcher() {
  {
    std::lock_guard lock(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void WindowPrefetcher::request(Window w) {
  if (w.empty()) return;
  {
    std::lock_guard lock(mu_);
    pending_ = w;
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
    const Window w = *pending_;
    pending_.reset();
    busy_ = true;
    lock.unlock();
    advise(w);
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

void WindowPrefetcher::advise(Window w) {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t map_begin = reinterpret_cast<uintptr_t>(mapping_.data());
  const uintptr_t map_end = map_begin + mapping_.size();
  const int n_layers = static_cast<int>(weights_.layers.size());
  for (int l = std::max(w.begin, 0); l < std::min(w.end, n_layers); ++l) {
    for (const auto& [ptr, len] : weights_.layers[l].spans) {
      // The mapping starts on a page boundary, so rounding the start down stays inside it.
      const uintptr_t b = std::max(reinterpret_cast<uintptr_t>(ptr) & ~(page - 1), map_begin);
      const uintptr_t e = std::min(reinterpret_cast<uintptr_t>(ptr) + len, map_end);
      if (e <= b) continue;
      if (::madvise(reinterpret_cast<void*>(b), e - b, MADV_WILLNEED) != 0) {
        log::debug("prefetch: madvise of layer {} failed", l);
        continue;
      }
      bytes_ += e - b;
    }
  }
  ++windows_;
}

}  // namespace hearth::cluster
