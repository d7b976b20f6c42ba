// Disk read throughput measured on a given file (the model itself) with the page cache
// bypassed, so the figure is what reloading evicted weights costs (cost model T_disk).
//
// Bypass: O_DIRECT reads into a 4 KiB-aligned buffer. Where the file system refuses
// O_DIRECT (tmpfs, some FUSE mounts) the file is read buffered after
// posix_fadvise(POSIX_FADV_DONTNEED) drops its cached pages; `method` says which was used.
// A file that lives in RAM (tmpfs) then reports RAM speed, which is also what reloading
// costs there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hearth::profiler {

struct DiskReadRates {
  double seq_bps = 0;      // bytes/s, 1 MiB reads in order, seq_queue_depth at once (below)
  double random_bps = 0;   // bytes/s, 64 KiB reads at random 4 KiB-aligned offsets
  uint64_t seq_bytes = 0;  // bytes read for each figure
  uint64_t random_bytes = 0;
  int seq_queue_depth = 1;  // sequential reads outstanding at once
  // Bytes a reader gets beyond seq_bps when it starts again after a short idle gap, as the
  // weight streamer does between rounds: storage that accounts its rate over a time slice (a
  // cgroup's blkio throttle, a drive's burst buffer) serves them at once; a disk of constant
  // rate gives about 0. The median of kBurstRounds reads after kBurstIdleMs of idling.
  uint64_t burst_bytes = 0;
  // The rate the burst itself is read at (bytes/s; the median of the same reads, at least
  // seq_bps): a burst is not free, it comes at the storage's peak rate.
  double peak_bps = 0;
  std::string method;  // "O_DIRECT" or "fadvise DONTNEED"
};

inline constexpr int kBurstRounds = 3;
inline constexpr double kBurstIdleMs = 20;

// One read's progress: ms since it began, bytes completed by then.
struct ReadSample {
  double ms = 0;
  uint64_t bytes = 0;
};
// What a read got beyond a constant rate: max over its samples of bytes - rate_bps x time,
// at least 0 (samples in completion order).
double bytes_beyond_rate(const std::vector<ReadSample>& samples, double rate_bps);
// How fast the burst came: the rate of the read up to the sample where it was furthest beyond
// rate_bps, from the read's start or from its first completion (the latency before it is paid
// once per read), whichever is faster. Above rate_bps wherever the read got beyond it;
// rate_bps when it never did.
double burst_rate_bps(const std::vector<ReadSample>& samples, double rate_bps);

// The rate a long read settles at: the least-squares slope of bytes over time after the first
// quarter of the read, which a burst at its start (storage that was idle) does not lift and
// which averages over the time slices of storage that accounts its rate per slice (all of
// the read when it has fewer than 8 completions there).
double steady_rate_bps(const std::vector<ReadSample>& samples);

// Reads for about `budget_s` per pattern (at most 256 MiB sequential), then kBurstRounds
// bursts of at most 64 MiB or budget_s / 2. IoError naming the file when it cannot be opened
// or read, or is empty.
DiskReadRates measure_disk_reads(const std::string& path, double budget_s = 0.4);

}  // namespace hearth::profiler
