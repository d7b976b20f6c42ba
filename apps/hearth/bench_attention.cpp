// `hearth bench attention`: decode attention at depth, alone, against the memory read
// bandwidth. A cache of --layers layers holds --depth positions of random K/V rows (so the
// whole cache, like a model's, exceeds the last-level cache); one timed rep is one token's
// attention over every layer, heads split over the pool as the engine splits them. Each rep
// is a pair: a plain parallel read (compute::time_parallel_read) of a buffer as large as the
// cache, then the attention; "ratio" is the median per-pair ratio of the two times, the
// fraction of the roofline the kernel reaches (both halves of a pair see the same machine).
// "best ms" is the fastest rep: on a shared host, where other tenants take bandwidth and
// cycles for seconds at a time, it is the steadier figure for comparing two kernels, and
// "ns/pos" turns it into thread time per position and kv head (the kernel's cost, to set
// beside its arithmetic: 2 * group * head_dim multiply-adds per position and kv head).
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "bench_registry.h"
#include "bench_stats.h"
#include "hearth/base/huge_buffer.h"
#include "hearth/compute/attention.h"
#include "hearth/compute/bandwidth.h"
#include "hearth/compute/kv_block_pool.h"
#include "hearth/compute/kv_cache.h"
#include "hearth/compute/thread_pool.h"
#include "model_options.h"

namespace hearth::cli {
namespace {

int run_bench_attention(const Args& args) {
  CLI::App app{"Decode attention at depth against the memory read bandwidth", "bench attention"};
  std::vector<int64_t> depths{2048, 8192};
  std::vector<int> thread_counts{1, 2};
  int layers = 16, heads = 32, kv_heads = 8, head_dim = 64, reps = 9, kv_block = 0;
  std::string cache_type_k = "f16", cache_type_v = "f16";
  app.add_option("--depth", depths, "positions in the cache, e.g. 2048,8192,32768")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--threads", thread_counts, "thread counts, e.g. 1,2")->delimiter(',');
  app.add_option("--layers", layers, "layers of cache (the default is a Llama 3.2 1B's)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--heads", heads, "query heads")->check(CLI::Range(1, 1024));
  app.add_option("--kv-heads", kv_heads, "key/value heads")->check(CLI::Range(1, 1024));
  app.add_option("--head-dim", head_dim, "values per head")->check(CLI::Range(1, 512));
  app.add_option("--reps", reps, "timed tokens per figure (median and fastest reported)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--kv-block", kv_block,
                 "paged cache in blocks of this many positions (0: one "
                 "contiguous region)")
      ->check(CLI::Range(0, 1 << 20));
  add_kv_type_options(app, cache_type_k, cache_type_v);
  if (auto code = parse(app, args)) return *code;
  if (heads % kv_heads != 0) {
    fmt::print(stderr, "hearth bench attention: --heads {} is not a multiple of --kv-heads {}\n",
               heads, kv_heads);
    return 2;
  }
  for (int t : thread_counts) {
    if (t < 1 || t > 1024) {
      fmt::print(stderr, "hearth bench attention: bad thread count {}\n", t);
      return 2;
    }
  }
  const compute::KvTypes types = kv_types(cache_type_k, cache_type_v);
  const compute::AttentionShape shape{heads, kv_heads, head_dim, 0.0f};
  fmt::print("hearth bench attention: {} layers, {} heads / {} kv heads of {}, KV {}/{}{}\n",
             layers, heads, kv_heads, head_dim, compute::kv_type_name(types.k),
             compute::kv_type_name(types.v),
             kv_block > 0 ? fmt::format(", blocks of {}", kv_block) : std::string());
  fmt::print("{:>7} {:>7} {:>9} {:>10} {:>9} {:>9} {:>7} {:>9} {:>7}\n", "threads", "depth",
             "KV MiB", "ms/token", "KV GB/s", "read GB/s", "ratio", "best ms", "ns/pos");
  const int64_t row = int64_t{kv_heads} * head_dim;
  for (int64_t depth : depths) {
    std::unique_ptr<compute::KvBlockPool> pool;
    std::unique_ptr<compute::KvCache> cache;
    if (kv_block > 0) {
      pool = std::make_unique<compute::KvBlockPool>(layers, kv_heads, head_dim, kv_block,
                                                    (depth + kv_block) / kv_block + 1, types);
      cache = std::make_unique<compute::KvCache>(*pool, depth + 1);
    } else {
      cache = std::make_unique<compute::KvCache>(layers, kv_heads, head_dim, depth + 1, types);
    }
    // Rows in [-1, 1): speed does not depend on their values.
    std::vector<float> rows(static_cast<size_t>(std::min<int64_t>(depth, 4096) * row));
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (float& x : rows) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      x = static_cast<float>(static_cast<int64_t>(s >> 40) - (1 << 23)) / (1 << 23);
    }
    for (int l = 0; l < layers; ++l) {
      for (int64_t p = 0; p < depth; p += 4096) {
        const int64_t n = std::min<int64_t>(4096, depth - p);
        cache->store(l, p, n, rows.data(), rows.data() + 17);
      }
    }
    const uint64_t kv_bytes = static_cast<uint64_t>(layers) * static_cast<uint64_t>(depth) *
                              types.bytes_per_token(kv_heads, head_dim);
    HugeBuffer cold(kv_bytes);
    std::fill(cold.data(), cold.data() + kv_bytes, uint8_t{1});
    std::vector<float> q(static_cast<size_t>(heads) * head_dim, 0.25f);
    std::vector<float> out(q.size());
    for (int threads : thread_counts) {
      compute::ThreadPool tp(threads);
      std::vector<double> ms, ratios, read_gbps;
      for (int r = 0; r < reps + 1; ++r) {
        const double read_s = compute::time_parallel_read(tp, cold.data(), kv_bytes);
        const auto t0 = std::chrono::steady_clock::now();
        for (int l = 0; l < layers; ++l) {
          const compute::KvLayerView view = cache->view(l);
          tp.run([&](int i, int n) {
            const compute::HeadRange hr = compute::attention_split(shape, n, i);
            compute::attention(shape, view, q.data(), 0, out.data(), 0, depth - 1, 1, hr.begin,
                               hr.end);
          });
        }
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (r == 0) continue;  // warm-up
        ms.push_back(s * 1e3);
        ratios.push_back(read_s / s);
        read_gbps.push_back(static_cast<double>(kv_bytes) / read_s / 1e9);
      }
      const double t = median(ms);
      const double best = *std::min_element(ms.begin(), ms.end());
      const double positions = static_cast<double>(layers) * static_cast<double>(depth) * kv_heads;
      fmt::print("{:>7} {:>7} {:>9.1f} {:>10.2f} {:>9.1f} {:>9.1f} {:>7.2f} {:>9.2f} {:>7.2f}\n",
                 threads, depth, static_cast<double>(kv_bytes) / (1 << 20), t,
                 static_cast<double>(kv_bytes) / (t / 1e3) / 1e9, median(read_gbps), median(ratios),
                 best, best * 1e6 * threads / positions);
    }
  }
  return 0;
}

}  // namespace

HEARTH_BENCH("attention", "decode attention at depth against the memory read bandwidth",
             run_bench_attention);

}  // namespace hearth::cli
