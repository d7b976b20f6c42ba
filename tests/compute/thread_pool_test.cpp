#include "hearth/compute/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "hearth/base/error.h"

namespace hearth::compute {
namespace {

TEST(ThreadPool, RejectsZeroThreads) {
  EXPECT_THROW(ThreadPool(0), UsageError);
}

TEST(ThreadPool, EveryThreadRunsOncePerJobOverManyJobs) {
  for (int n : {1, 2, 3, 5}) {
    ThreadPool pool(n);
    EXPECT_EQ(pool.size(), n);
    std::vector<int> hits(static_cast<size_t>(n), 0);  // each slot written by one thread only
    for (int job = 0; job < 2000; ++job) {
      pool.run([&](int i, int nt) {
        ASSERT_EQ(nt, n);
        hits[static_cast<size_t>(i)] += 1;
      });
    }
    for (int i = 0; i < n; ++i) EXPECT_EQ(hits[static_cast<size_t>(i)], 2000) << "thread " << i;
  }
}

// run() returns only after every thread finished: results written by workers are visible.
TEST(ThreadPool, RunIsABarrier) {
  ThreadPool pool(3);
  std::vector<long> partial(3);
  for (int job = 0; job < 500; ++job) {
    pool.run([&](int i, int nt) {
      long s = 0;
      for (int k = i; k < 10000; k += nt) s += k + job;
      partial[static_cast<size_t>(i)] = s;
    });
    long total = partial[0] + partial[1] + partial[2];
    ASSERT_EQ(total, 10000L * 9999 / 2 + 10000L * job) << "job " << job;
  }
}

TEST(ThreadPool, WorkersSurviveSleepingBetweenJobs) {
  ThreadPool pool(2);
  std::atomic<int> count{0};
  for (int job = 0; job < 5; ++job) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the spin phase
    pool.run([&](int, int) { count.fetch_add(1); });
  }
  EXPECT_EQ(count.load(), 10);
}

TEST(ThreadPool, ExceptionsPropagateAndPoolStaysUsable) {
  ThreadPool pool(3);
  for (int thrower : {0, 1, 2}) {
    std::atomic<int> finished{0};
    try {
      pool.run([&](int i, int) {
        if (i == thrower) throw std::runtime_error("boom from " + std::to_string(i));
        finished.fetch_add(1);
      });
      FAIL() << "no exception from thread " << thrower;
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "boom from " + std::to_string(thrower));
    }
    EXPECT_EQ(finished.load(), 2);  // the others still ran to completion
  }
  std::atomic<int> ok{0};
  pool.run([&](int, int) { ok.fetch_add(1); });
  EXPECT_EQ(ok.load(), 3);
}

TEST(ThreadPool, NestedRunExecutesInline) {
  ThreadPool pool(2);
  std::atomic<int> inner{0};
  pool.run([&](int, int) {
    pool.run([&](int i, int nt) {
      EXPECT_EQ(i, 0);
      EXPECT_EQ(nt, 1);
      inner.fetch_add(1);
    });
  });
  EXPECT_EQ(inner.load(), 2);
}

TEST(ThreadPool, ConcurrentCallersAreSerialized) {
  ThreadPool pool(2);
  std::atomic<int> active{0}, max_active{0}, total{0};
  auto caller = [&] {
    for (int j = 0; j < 300; ++j) {
      pool.run([&](int i, int) {
        if (i == 0) {
          const int a = active.fetch_add(1) + 1;
          int m = max_active.load();
          while (a > m && !max_active.compare_exchange_weak(m, a)) {
          }
          active.fetch_sub(1);
        }
        total.fetch_add(1);
      });
    }
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2 * 300 * 2);
  EXPECT_EQ(max_active.load(), 1);
}

// run_weights() counts its jobs' wall time, the slowest thread's included; run() counts
// nothing. The matvec and matmul dispatches go through it, which is how `hearth bench e2e`
// tells the weight products from the rest of a token.
TEST(ThreadPool, RunWeightsCountsOnlyItsOwnJobs) {
  ThreadPool pool(2);
  EXPECT_EQ(pool.weight_seconds(), 0.0);
  pool.run([](int, int) { std::this_thread::sleep_for(std::chrono::milliseconds(30)); });
  EXPECT_EQ(pool.weight_seconds(), 0.0);
  pool.run_weights(
      [](int i, int) { std::this_thread::sleep_for(std::chrono::milliseconds(i == 1 ? 40 : 5)); });
  EXPECT_GE(pool.weight_seconds(), 0.040);
  const double after_one = pool.weight_seconds();
  pool.run_weights([](int, int) { std::this_thread::sleep_for(std::chrono::milliseconds(10)); });
  EXPECT_GE(pool.weight_seconds() - after_one, 0.010);
}

}  // namespace
}  // namespace hearth::compute
