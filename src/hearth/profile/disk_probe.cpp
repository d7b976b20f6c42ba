#include "hearth/profile/disk_probe.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "hearth/base/clock.h"
#include "hearth/base/error.h"

namespace hearth::profile {
namespace {

constexpr size_t kAlign = 4096;
constexpr size_t kSeqChunk = size_t{1} << 20;
constexpr size_t kRandomChunk = size_t{64} << 10;
constexpr uint64_t kSeqMax = uint64_t{256} << 20;
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

}  // namespace

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
  std::unique_ptr<uint8_t, FreeDeleter> buf(
      static_cast<uint8_t*>(std::aligned_alloc(kAlign, kSeqChunk)));  // (1 MiB) u8 scratch
  if (!buf) throw IoError("disk probe: out of memory for a 1 MiB buffer");
  auto drop_cache = [&] {
    if (!direct) ::posix_fadvise(f.fd, 0, 0, POSIX_FADV_DONTNEED);
  };

  // Sequential: passes over the file from the start until the budget or 256 MiB is spent (a
  // small file is read several times; each pass still misses the page cache), with
  // kSeqQueueDepth reads of 1 MiB outstanding, as the weight streamer keeps them: storage
  // behind a queue (virtual disks, NVMe, throttled cgroups) reaches its rate only so, and a
  // single reader would under-state what streaming gets.
  drop_cache();
  std::atomic<uint64_t> next{0};  // chunk counter over all passes
  std::atomic<uint64_t> total{0};
  std::atomic<bool> empty{false};
  std::mutex err_mu;
  std::string err;
  const uint64_t chunks_per_pass = (size + kSeqChunk - 1) / kSeqChunk;
  const double t0 = now_ms();
  auto seq_reader = [&](uint8_t* b) {
    try {
      for (;;) {
        if (total.load() >= kSeqMax || (now_ms() - t0) >= budget_s * 1e3) return;
        const uint64_t i = next.fetch_add(1);
        // A new pass drops the cache again (buffered fallback only; readers still finishing
        // the previous pass add at most a few hits).
        if (i % chunks_per_pass == 0 && i > 0) drop_cache();
        const uint64_t off = (i % chunks_per_pass) * kSeqChunk;
        const size_t got = read_at(f.fd, b, kSeqChunk, off, path);
        if (got == 0 && off == 0) {
          empty = true;
          return;
        }
        total += got;
      }
    } catch (const std::exception& e) {
      const std::lock_guard lock(err_mu);
      if (err.empty()) err = e.what();
    }
  };
  std::vector<std::unique_ptr<uint8_t, FreeDeleter>> bufs;
  bufs.push_back(std::move(buf));
  for (int i = 1; i < kSeqQueueDepth; ++i) {
    bufs.emplace_back(static_cast<uint8_t*>(std::aligned_alloc(kAlign, kSeqChunk)));
    if (!bufs.back()) throw IoError("disk probe: out of memory for a 1 MiB buffer");
  }
  {
    std::vector<std::thread> readers;
    for (int i = 1; i < kSeqQueueDepth; ++i) readers.emplace_back(seq_reader, bufs[i].get());
    seq_reader(bufs[0].get());
    for (auto& t : readers) t.join();
  }
  if (!err.empty()) throw IoError(err);
  if (empty) throw IoError(fmt::format("{}: read no bytes", path));
  out.seq_bytes = total.load();
  out.seq_bps = static_cast<double>(out.seq_bytes) / ((now_ms() - t0) / 1e3);
  out.seq_queue_depth = kSeqQueueDepth;

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

}  // namespace hearth::profile
