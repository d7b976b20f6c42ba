// A persistent pool of worker threads for the compute kernels. run() hands one job to every
// thread (the caller is thread 0) and returns when all have finished; between jobs workers
// spin briefly (decode issues a job every few microseconds) and then sleep on a futex, so an
// idle pool costs no CPU. No thread is created per call.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace hearth::compute {

class ThreadPool {
 public:
  // n_threads counts the calling thread; n_threads - 1 workers are started. UsageError if < 1.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(i, size()) once on each thread i and blocks until all return. If any call
  // throws, the first exception (lowest thread index) is rethrown after all have finished.
  // Calls from inside a job of this pool run fn(0, 1) inline instead of deadlocking.
  // Concurrent calls from different threads are serialized.
  void run(const std::function<void(int thread_index, int n_threads)>& fn);

  // run() for the weight products (matvec, matmul): their wall time, the threads' waits for
  // each other included, adds up in weight_seconds(). What a token spends outside them is the
  // rest of its work (attention, norms, rope, quantizing activations), which
  // `hearth bench e2e` reports beside it.
  void run_weights(const std::function<void(int thread_index, int n_threads)>& fn);
  double weight_seconds() const {
    return static_cast<double>(weight_ns_.load(std::memory_order_relaxed)) * 1e-9;
  }

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;                                // one job at a time
  const std::function<void(int, int)>* job_ = nullptr;  // valid during a generation
  std::vector<std::exception_ptr> errors_;              // (n_threads) per job
  std::atomic<uint32_t> generation_{0};                 // bumped per job
  std::atomic<int> pending_{0};                         // workers still running the job
  std::atomic<int> sleepers_{0};                        // workers blocked in wait()
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> weight_ns_{0};  // run_weights() wall time, summed
};

}  // namespace hearth::compute
