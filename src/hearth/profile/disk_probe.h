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

namespace hearth::profile {

struct DiskReadRates {
  double seq_bps = 0;      // bytes/s, 1 MiB reads in order, seq_queue_depth at once
  double random_bps = 0;   // bytes/s, 64 KiB reads at random 4 KiB-aligned offsets
  uint64_t seq_bytes = 0;  // bytes read for each figure
  uint64_t random_bytes = 0;
  int seq_queue_depth = 1;  // sequential reads outstanding at once
  std::string method;       // "O_DIRECT" or "fadvise DONTNEED"
};

// Reads for about `budget_s` per pattern (at most 256 MiB sequential). IoError naming the
// file when it cannot be opened or read, or is empty.
DiskReadRates measure_disk_reads(const std::string& path, double budget_s = 0.4);

}  // namespace hearth::profile
