#include "hearth/compute/thread_pool.h"

#include <chrono>
#include <string>

#include "hearth/base/error.h"

namespace hearth::compute {

namespace {

// Spin iterations before a worker sleeps (a pause is 10-140 cycles, so ~10-100 us): longer
// than the gap between the
// matvecs of one decode step, far shorter than the gap between tokens of an idle server.
constexpr int kSpinIterations = 1 << 11;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// The pool whose job the current thread is running (to detect nested run()).
thread_local const ThreadPool* tls_running_pool = nullptr;

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads) {
  if (n_threads < 1) {
    throw UsageError("thread pool: n_threads must be >= 1, got " + std::to_string(n_threads));
  }
  errors_.resize(static_cast<size_t>(n_threads));
  workers_.reserve(static_cast<size_t>(n_threads - 1));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kSpinIterations; ++spin) {
      cpu_relax();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      // The seq_cst increment pairs with run(): either run() sees a sleeper and notifies,
      // or this wait() already sees the new generation.
      sleepers_.fetch_add(1);
      generation_.wait(seen);
      sleepers_.fetch_sub(1);
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) continue;  // spurious wake-up
    seen = gen;
    if (stop_.load()) return;
    tls_running_pool = this;
    try {
      (*job_)(index, n_threads_);
    } catch (...) {
      errors_[static_cast<size_t>(index)] = std::current_exception();
    }
    tls_running_pool = nullptr;
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(const std::function<void(int thread_index, int n_threads)>& fn) {
  if (n_threads_ == 1 || tls_running_pool == this) {
    fn(0, 1);
    return;
  }
  std::lock_guard<std::mutex> lock(run_mutex_);
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1);  // seq_cst: publishes job_ and pending_
  if (sleepers_.load() > 0) generation_.notify_all();

  tls_running_pool = this;
  try {
    fn(0, n_threads_);
  } catch (...) {
    errors_[0] = std::current_exception();
  }
  tls_running_pool = nullptr;

  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kSpinIterations) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  job_ = nullptr;
  std::exception_ptr first;
  for (auto& e : errors_) {
    if (e && !first) first = e;
    e = nullptr;
  }
  if (first) std::rethrow_exception(first);
}

void ThreadPool::run_weights(const std::function<void(int thread_index, int n_threads)>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  run(fn);
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0);
  weight_ns_.fetch_add(static_cast<uint64_t>(ns.count()), std::memory_order_relaxed);
}

}  // namespace hearth::compute
