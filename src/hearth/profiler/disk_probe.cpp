#include "hearth/profiler/disk_probe.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "hearth/base/clock.h"
#include "hearth/base/error.h"

namespace hearth::profiler {
namespace {

constexpr size_t kAlign = 4096;
constexpr size_t kSeqChunk = size_t{1} << 20;
constexpr size_t kRandomChunk = size_t{64} << 10;
constexpr uint64_t kSeqMax = uint64_t{256} << 20;
constexpr uint64_t kBurstMax = uint64_t{64} << 20;
// The weight streamer's requests outstanding at once (cluster/weight_streamer.cpp).
constexpr int kSeqQueueDepth = 4;

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// Reads [off, off + len) fully (short only at end of file); returns the bytes read.
size_t read_at(int fd, uint8_t* buf, size_t len, uint64_t off, const std::string& path) {
  size_t got = 0;
  while (got < len) {
    const ssize_t r = ::pread(fd, buf + got, len - got, static_cast<off_t>(off + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw IoError(
          fmt::format("{}: read at offset {}: {}", path, off + got, std::strerror(errno)));
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
    // O_DIRECT reads past the last aligned block return short; nothing more to read.
    if (static_cast<size_t>(r) % kAlign != 0) break;
  }
  return got;
}

// Reads the file in order from chunk `first` (wrapping at its end) with one reader per
// buffer, each keeping one 1 MiB request outstanding, until `max_bytes` or `budget_ms`;
// returns the completions in order. `drop_cache` runs when a pass starts again at the front
// (the buffered fallback's bypass).
struct InOrderRead {
  std::vector<ReadSample> samples;
  uint64_t next_chunk = 0;
};
template <typename DropCache>
InOrderRead read_in_order(int fd, const std::string& path, uint64_t size, uint64_t first,
                          uint64_t max_bytes, double budget_ms,
                          const std::vector<std::unique_ptr<uint8_t, FreeDeleter>>& bufs,
                          DropCache drop_cache) {
  InOrderRead out;
  std::atomic<uint64_t> next{first};  // chunk counter over all passes
  std::atomic<uint64_t> claimed{0};   // bytes asked for so far
  uint64_t total = 0;                 // under mu
  std::mutex mu;
  std::string err;
  bool empty = false;
  const uint64_t chunks_per_pass = (size + kSeqChunk - 1) / kSeqChunk;
  const double t0 = now_ms();
  auto reader = [&](uint8_t* b) {
    try {
      for (;;) {
        if (claimed.fetch_add(kSeqChunk) >= max_bytes || (now_ms() - t0) >= budget_ms) return;
        const uint64_t i = next.fetch_add(1);
        // A new pass drops the cache again (buffered fallback only; readers still finishing
        // the previous pass add at most a few hits).
        if (i % chunks_per_pass == 0 && i > 0) drop_cache();
        const uint64_t off = (i % chunks_per_pass) * kSeqChunk;
        const size_t got = read_at(fd, b, kSeqChunk, off, path);
        const std::lock_guard lock(mu);
        if (got == 0 && off == 0) {
          empty = true;
          return;
        }
        total += got;
        out.samples.push_back({now_ms() - t0, total});
      }
    } catch (const std::exception& e) {
      const std::lock_guard lock(mu);
      if (err.empty()) err = e.what();
    }
  };
  {
    std::vector<std::thread> readers;
    for (size_t i = 1; i < bufs.size(); ++i) readers.emplace_back(reader, bufs[i].get());
    reader(bufs[0].get());
    for (auto& t : readers) t.join();
  }
  if (!err.empty()) throw IoError(err);
  if (empty || out.samples.empty()) throw IoError(fmt::format("{}: read no bytes", path));
  out.next_chunk = next.load();
  return out;
}

}  // namespace

namespace {
// The burst's end: the first sample with the most bytes beyond rate_bps x its time, and that
// excess (*most); null when no sample is beyond the rate.
const ReadSample* burst_end(const std::vector<ReadSample>& samples, double rate_bps, double* most) {
  *most = 0;
  const ReadSample* end = nullptr;
  for (const auto& s : samples) {
    const double beyond = static_cast<double>(s.bytes) - rate_bps * s.ms / 1e3;
    if (beyond > *most + 0.5 && s.ms > 0) {
      *most = beyond;
      end = &s;
    }
  }
  return end;
}
}  // namespace

double bytes_beyond_rate(const std::vector<ReadSample>& samples, double rate_bps) {
  double most = 0;
  burst_end(samples, rate_bps, &most);
  return most;
}

double burst_rate_bps(const std::vector<ReadSample>& samples, double rate_bps) {
  double most = 0;
  const ReadSample* end = burst_end(samples, rate_bps, &most);
  if (end == nullptr) return rate_bps;
  // Also from the first completion on: the latency before it is paid once per read, not per
  // byte. The faster of the two; the first alone is above rate_bps wherever there is a burst.
  const ReadSample& first = samples.front();
  double rate = static_cast<double>(end->bytes) / (end->ms / 1e3);
  if (end->ms > first.ms) {
    rate = std::max(rate,
                    static_cast<double>(end->bytes - first.bytes) / ((end->ms - first.ms) / 1e3));
  }
  return std::max(rate, rate_bps);
}

double steady_rate_bps(const std::vector<ReadSample>& samples) {
  if (samples.empty()) return 0;
  const double end_ms = std::max(samples.back().ms, 1e-3);
  // Least squares over the completions after the first quarter of the read.
  double n = 0, st = 0, sb = 0, stt = 0, stb = 0;
  for (const auto& s : samples) {
    if (s.ms < end_ms / 4) continue;
    const double b = static_cast<double>(s.bytes);
    n += 1;
    st += s.ms;
    sb += b;
    stt += s.ms * s.ms;
    stb += s.ms * b;
  }
  const double var = n * stt - st * st;
  if (n < 8 || var <= 0) return static_cast<double>(samples.back().bytes) / (end_ms / 1e3);
  return (n * stb - st * sb) / var * 1e3;
}

DiskReadRates measure_disk_reads(const std::string& path, double budget_s) {
  DiskReadRates out;
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  const bool direct = f.fd >= 0;
  if (!direct) f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) throw IoError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  out.method = direct ? "O_DIRECT" : "fadvise DONTNEED";
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || st.st_size <= 0)
    throw IoError(fmt::format("{}: empty or unreadable file", path));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  std::vector<std::unique_ptr<uint8_t, FreeDeleter>> bufs;
  for (int i = 0; i < kSeqQueueDepth; ++i) {
    bufs.emplace_back(static_cast<uint8_t*>(std::aligned_alloc(kAlign, kSeqChunk)));
    if (!bufs.back()) throw IoError("disk probe: out of memory for a 1 MiB buffer");
  }
  auto drop_cache = [&] {
    if (!direct) ::posix_fadvise(f.fd, 0, 0, POSIX_FADV_DONTNEED);
  };

  // Sequential: passes over the file from the start until the budget or 256 MiB is spent (a
  // small file is read several times; each pass still misses the page cache), with
  // kSeqQueueDepth reads of 1 MiB outstanding, as the weight streamer keeps them: storage
  // behind a queue (virtual disks, NVMe, throttled cgroups) reaches its rate only so, and a
  // single reader would under-state what streaming gets.
  drop_cache();
  const auto seq = read_in_order(f.fd, path, size, 0, kSeqMax, budget_s * 1e3, bufs, drop_cache);
  out.seq_bytes = seq.samples.back().bytes;
  out.seq_bps = steady_rate_bps(seq.samples);
  out.seq_queue_depth = kSeqQueueDepth;

  // Bursts: the streamer reads a round's bytes, idles while the ring computes elsewhere, and
  // reads again. What storage serves beyond its rate right after such a gap hides reads as a
  // larger buffer would (the overlap cost model's disk_burst_bytes); it comes at the
  // storage's peak rate, not at once (disk_peak_read_bps).
  std::vector<double> bursts, peaks;
  uint64_t burst_from = seq.next_chunk;
  for (int r = 0; r < kBurstRounds; ++r) {
    drop_cache();
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(kBurstIdleMs));
    const auto b = read_in_order(f.fd, path, size, burst_from, kBurstMax, budget_s * 1e3 / 2, bufs,
                                 drop_cache);
    burst_from = b.next_chunk;
    bursts.push_back(bytes_beyond_rate(b.samples, out.seq_bps));
    peaks.push_back(burst_rate_bps(b.samples, out.seq_bps));
  }
  std::sort(bursts.begin(), bursts.end());
  std::sort(peaks.begin(), peaks.end());
  out.burst_bytes = static_cast<uint64_t>(bursts[bursts.size() / 2]);
  out.peak_bps = peaks[peaks.size() / 2];

  // Random: 64 KiB at aligned offsets, a size that mmap fault-around and read-ahead windows
  // issue when a reloaded layer is touched out of order.
  std::mt19937_64 rng(0x5eed);
  const uint64_t slots = size > kRandomChunk ? (size - kRandomChunk) / kAlign + 1 : 1;
  drop_cache();
  const double t1 = now_ms();
  int n = 0;
  while ((now_ms() - t1) < budget_s * 1e3 || n < 8) {
    const uint64_t at = (rng() % slots) * kAlign;
    if (!direct && n % 64 == 0) drop_cache();
    out.random_bytes += read_at(f.fd, bufs[0].get(), kRandomChunk, at, path);
    ++n;
  }
  out.random_bps = static_cast<double>(out.random_bytes) / ((now_ms() - t1) / 1e3);
  return out;
}

}  // namespace hearth::profiler
