// A few threads that run the file reads their owner queues, several at once, so that reads
// wait on the disk's rate rather than one after another on its latency. The weight streamer's
// chunks and the expert store's expert reads go through one each; the owner keeps its own
// bookkeeping (what is done, what failed) in `run`.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace hearth::cluster {

template <class Job>
class IoThreads {
 public:
  IoThreads() = default;
  IoThreads(const IoThreads&) = delete;
  IoThreads& operator=(const IoThreads&) = delete;
  ~IoThreads() { stop(); }

  // Starts `n` threads that call `run(job)` for each queued job, in queue order, without the
  // queue's lock held.
  void start(int n, std::function<void(const Job&)> run) {
    run_ = std::move(run);
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { loop(); });
  }

  template <class Range>
  void push(const Range& jobs) {
    {
      const std::lock_guard lock(mu_);
      queue_.insert(queue_.end(), std::begin(jobs), std::end(jobs));
    }
    cv_.notify_all();
  }

  // Joins the threads, dropping jobs not yet started. The owner calls it before it frees what
  // the jobs write to.
  void stop() {
    {
      const std::lock_guard lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return quit_ || !queue_.empty(); });
      if (quit_) return;
      const Job job = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      run_(job);
      lock.lock();
    }
  }

  std::function<void(const Job&)> run_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool quit_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace hearth::cluster
