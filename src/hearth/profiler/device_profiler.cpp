#include "hearth/profiler/device_profiler.h"

#include <fmt/core.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <vector>

#include "hearth/base/clock.h"
#include "hearth/base/error.h"
#include "hearth/base/log.h"
#include "hearth/compute/bandwidth.h"
#include "hearth/compute/kv_cache.h"
#include "hearth/compute/matmul.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/model/hparams.h"
#include "hearth/profiler/disk_probe.h"
#include "hearth/quant/type_traits.h"

namespace hearth::profiler {

using profile::DeviceProfile;
using profile::OsClass;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kCacheSchema = 4;  // 2: disk_burst_mib; 3: disk_peak_read_gbps; 4: matmul_gflops
// Weight types the engine computes with; each gets a throughput figure.
constexpr gguf::TensorType kTypes[] = {gguf::TensorType::kF32,  gguf::TensorType::kF16,
                                       gguf::TensorType::kBF16, gguf::TensorType::kQ8_0,
                                       gguf::TensorType::kQ4_0, gguf::TensorType::kQ4_K,
                                       gguf::TensorType::kQ5_K, gguf::TensorType::kQ6_K};
// A decode-sized product: 4096 columns (a 4096-wide model's hidden size), rows filling
// ~4 MiB so each thread's share stays in its L2 and the figure is the kernel's arithmetic
// speed; streaming from RAM is the cost model's separate memory term (T^cpu).
constexpr int64_t kCols = 4096;
constexpr size_t kWeightBytes = size_t{4} << 20;

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == 0) return "localhost";
  return buf;
}

// compute::matvec on a (rows, kCols) matrix of one type, ready to be timed.
struct MatvecBench {
  gguf::TensorType type;
  int64_t rows = 0;
  std::vector<uint8_t> w;  // (rows, kCols) in `type` blocks
  std::vector<float> x;    // (kCols) f32
  std::vector<float> y;    // (rows) f32
  std::vector<float> xs;   // (kChunk, kCols) f32: a prompt chunk for the matmul
  std::vector<float> ys;   // (kChunk, rows) f32
  double best = 0;         // FLOP/s, the best window so far
  double best_matmul = 0;  // FLOP/s of the matmul over kChunk tokens
  static constexpr int64_t kChunk = 64;

  explicit MatvecBench(gguf::TensorType t) : type(t) {
    const uint64_t row = *gguf::row_bytes(type, kCols);
    rows = std::max<int64_t>(64, static_cast<int64_t>(kWeightBytes / row));
    w.resize(static_cast<size_t>(rows) * row);
    std::mt19937 rng(1234);
    std::normal_distribution<float> nd(0.f, 1.f);
    x.resize(kCols);
    for (auto& v : x) v = nd(rng);
    // Real quantized rows (random bytes would make f16 scales denormal or NaN, and denormal
    // arithmetic is far slower): quantize a few rows and tile them over the matrix, which
    // keeps the bytes the kernel streams through its cache the same as for distinct rows.
    constexpr int64_t kDistinct = 16;
    const auto& tr = quant::traits(type);
    std::vector<float> src(static_cast<size_t>(kCols));  // (kCols) f32 one row
    for (int64_t r = 0; r < std::min(rows, kDistinct); ++r) {
      for (auto& v : src) v = nd(rng);
      tr.quantize(src.data(), w.data() + r * row, kCols);
    }
    for (int64_t r = kDistinct; r < rows; ++r)
      std::copy_n(w.data() + (r % kDistinct) * row, row, w.data() + r * row);
    y.resize(static_cast<size_t>(rows));
    xs.resize(static_cast<size_t>(kChunk * kCols));
    for (auto& v : xs) v = nd(rng);
    ys.resize(static_cast<size_t>(kChunk * rows));
  }

  // Repeated calls for about `seconds`; keeps the best rate.
  void window(compute::ThreadPool& pool, double seconds) {
    const compute::WeightView view{type, rows, kCols, w.data()};
    compute::matvec(pool, view, x.data(), y.data());  // warm caches and the pool
    const double flops_per_call = 2.0 * static_cast<double>(rows) * kCols;
    const double t0 = now_seconds();
    int calls = 0;
    double dt = 0;
    do {
      compute::matvec(pool, view, x.data(), y.data());
      ++calls;
      dt = now_seconds() - t0;
    } while (dt < seconds);
    best = std::max(best, flops_per_call * calls / dt);
  }

  // The same for the matmul over a chunk of kChunk tokens (prefill), a third of the time.
  void matmul_window(compute::ThreadPool& pool, double seconds) {
    const compute::WeightView view{type, rows, kCols, w.data()};
    compute::matmul(pool, view, xs.data(), kChunk, ys.data());
    const double flops_per_call = 2.0 * static_cast<double>(rows) * kCols * kChunk;
    const double t0 = now_seconds();
    int calls = 0;
    double dt = 0;
    do {
      compute::matmul(pool, view, xs.data(), kChunk, ys.data());
      ++calls;
      dt = now_seconds() - t0;
    } while (dt < seconds);
    best_matmul = std::max(best_matmul, flops_per_call * calls / dt);
  }
};

// Seconds to append one token's K and V of one layer: the f32 -> f16 conversion the KV
// cache does, over 2 * kv_dim values.
double kv_copy_seconds(uint32_t kv_dim) {
  const int64_t n = 2 * static_cast<int64_t>(std::max<uint32_t>(kv_dim, 64));
  std::vector<float> src(static_cast<size_t>(n), 0.5f);  // (2, kv_dim) f32
  std::vector<uint16_t> dst(static_cast<size_t>(n));     // (2, kv_dim) f16
  const int reps = 2000;
  double best = 1e9;
  for (int window = 0; window < 3; ++window) {
    const double t0 = now_seconds();
    for (int i = 0; i < reps; ++i) {
      src[static_cast<size_t>(i) % src.size()] = static_cast<float>(i);
      compute::f32_to_f16(src.data(), dst.data(), n);
    }
    best = std::min(best, (now_seconds() - t0) / reps);
  }
  return best;
}

struct FileKey {
  std::string path;
  uint64_t size = 0, inode = 0;
  int64_t mtime_ns = 0;
};

FileKey file_key(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw IoError(fmt::format("{}: cannot stat", path));
  std::error_code ec;
  const auto abs = fs::absolute(path, ec);
  return FileKey{ec ? path : abs.lexically_normal().string(), static_cast<uint64_t>(st.st_size),
                 static_cast<uint64_t>(st.st_ino),
                 static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

json cache_key(const ProfilerOptions& o, int threads) {
  const auto k = file_key(o.model_path);
  return json{{"schema", kCacheSchema},
              {"version", o.version},
              {"threads", threads},
              {"model",
               {{"path", k.path}, {"size", k.size}, {"inode", k.inode}, {"mtime_ns", k.mtime_ns}}}};
}

void apply_memory(DeviceProfile& d, const MemoryInfo& m) {
  d.ram_total_bytes = m.total_bytes;
  d.ram_available_bytes = m.available_bytes;
  d.swap_available_bytes = m.swap_free_bytes;
  // d^swapout (paper v2 Eq. 17): Android swaps other apps' anonymous memory to zram before it
  // drops our file pages. At profile time hearth itself holds little anonymous memory, so all
  // of AnonPages is the figure; the cost model takes its minimum with the free swap.
  if (d.os == OsClass::kAndroid) d.swappable_bytes = m.anon_bytes;
}

}  // namespace

int usable_cores(const MemoryRoots& roots) {
  int n = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  if (n <= 0) n = static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  // cgroup v2 quota of the root the process sees: "max 100000" or "200000 100000".
  std::ifstream in(fs::path(roots.cgroup_root) / "cpu.max");
  std::string quota;
  long period = 0;
  if (in >> quota >> period && quota != "max" && period > 0) {
    const long q = std::strtol(quota.c_str(), nullptr, 10);
    if (q > 0) n = std::clamp(static_cast<int>((q + period - 1) / period), 1, n);
  }
  return n;
}

std::string cache_path_for(const ProfilerOptions& o) {
  fs::path dir;
  if (!o.cache_dir.empty()) {
    dir = o.cache_dir;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    dir = fs::path(x) / "hearth";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    dir = fs::path(h) / ".cache" / "hearth";
  } else {
    dir = fs::temp_directory_path() / "hearth-cache";
  }
  return (dir / ("profile-" + host_name() + ".json")).string();
}

DeviceProfile measure_device(const ProfilerOptions& o, std::string* disk_method) {
  if (o.model_path.empty()) throw UsageError("profiler: a model file is needed (-m FILE)");
  const int threads = o.threads > 0 ? o.threads : usable_cores(o.memory);
  DeviceProfile d;
  d.name = o.name.empty() ? host_name() : o.name;
  d.os = OsClass::kLinux;
#if defined(__ANDROID__)
  d.os = OsClass::kAndroid;
#endif
  d.cores = static_cast<uint32_t>(usable_cores(o.memory));
  const auto mem = read_memory_info(o.memory);
  apply_memory(d, mem);

  uint32_t kv_dim = 1024;
  {
    const auto file = gguf::GgufFile::open(o.model_path);
    const auto hp = model::load_hparams(file);
    kv_dim = hp.kv_dim();
  }
  const auto disk = measure_disk_reads(o.model_path, o.disk_budget_s);
  d.disk_seq_read_bps = disk.seq_bps;
  d.disk_random_read_bps = disk.random_bps;
  d.disk_burst_bytes = static_cast<double>(disk.burst_bytes);
  d.disk_peak_read_bps = disk.peak_bps;
  if (disk_method) *disk_method = disk.method;

  // FLOP/s of each type: the best of three windows (on a shared machine the best window is
  // the one nobody preempted), taken in rounds over the types, so that a slow spell of the
  // machine falls on one window of several types rather than on every window of one.
  compute::ThreadPool pool(threads);
  std::vector<MatvecBench> benches;
  for (const auto type : kTypes)
    if (quant::is_supported(type)) benches.emplace_back(type);
  for (int round = 0; round < 3; ++round) {
    for (auto& b : benches) b.window(pool, o.kernel_budget_s / 3);
    for (auto& b : benches) b.matmul_window(pool, o.kernel_budget_s / 9);
  }
  for (const auto& b : benches) {
    d.cpu.flops[b.type] = b.best;
    d.cpu.matmul_flops[b.type] = b.best_matmul;
  }
  // Larger than any cache a test machine reports, smaller than a quarter of what is free.
  const size_t bw_bytes = static_cast<size_t>(
      std::clamp<uint64_t>(mem.available_bytes / 4, uint64_t{64} << 20, uint64_t{512} << 20));
  d.cpu.mem_read_bps = compute::measure_memory_read_gbps(pool, bw_bytes, 2) * 1e9;
  d.cpu.kv_copy_s = kv_copy_seconds(kv_dim);

  d.link.rtt_s = 0;
  d.link.bandwidth_bps = 10000e6 / 8;
  d.notes = fmt::format(
      "measured by hearth profile with {} threads; memory from {}; disk reads of {} via {}, {} "
      "sequential reads outstanding; link not measured here (the head measures it at ring "
      "set-up)",
      threads, mem.source, o.model_path, disk.method, disk.seq_queue_depth);
  return d;
}

ProfileResult device_profile(const ProfilerOptions& o) {
  if (o.model_path.empty()) throw UsageError("profiler: a model file is needed (-m FILE)");
  ProfileResult r;
  const int threads = o.threads > 0 ? o.threads : usable_cores(o.memory);
  const json key = cache_key(o, threads);
  if (o.use_cache) r.cache_path = cache_path_for(o);
  if (o.use_cache && !o.refresh) {
    std::ifstream in(r.cache_path);
    if (in) {
      try {
        const json j = json::parse(in);
        if (j.at("key") == key) {
          r.profile = profile::device_from_json(j.at("profile"), r.cache_path);
          if (!o.name.empty()) r.profile.name = o.name;
          apply_memory(r.profile, read_memory_info(o.memory));
          r.from_cache = true;
          return r;
        }
      } catch (const std::exception& e) {
        log::warn("profile cache {} ignored: {}", r.cache_path, e.what());
      }
    }
  }
  const double t0 = now_ms();
  r.profile = measure_device(o, &r.disk_method);
  r.measure_ms = now_ms() - t0;
  if (o.use_cache) {
    std::error_code ec;
    fs::create_directories(fs::path(r.cache_path).parent_path(), ec);
    const std::string tmp = fmt::format("{}.tmp{}", r.cache_path, ::getpid());
    {
      std::ofstream out(tmp);
      out << json{{"key", key}, {"profile", profile::device_to_json(r.profile)}}.dump(1) << "\n";
    }
    fs::rename(tmp, r.cache_path, ec);
    if (ec) log::warn("profile cache {} not written: {}", r.cache_path, ec.message());
  }
  return r;
}

}  // namespace hearth::profiler
