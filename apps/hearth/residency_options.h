// Residency flags of a ring device (hearth run/serve with --workers for the head, hearth worker
// for each worker): how the device keeps its weights in memory (cluster/stage.h,
// docs/residency.md).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "hearth/cluster/stage.h"
#include "hearth/residency/page_ranges.h"
#include "hearth/residency/release_policy.h"

namespace hearth::cli {

struct ResidencyFlags {
  std::string mode = "auto";
  double weight_memory_mib = 0;
  double stream_buffer_mib = 0;
  std::string stream_io = "direct";
  std::string release = "auto";
  std::string method = "willneed";
};

inline void add_residency_options(CLI::App& app, ResidencyFlags& f) {
  app.add_option("--residency", f.mode,
                 "how this device keeps its weights: auto (stream what does not fit its weight "
                 "memory), stream, mmap (page in on use; the scheme before streaming)")
      ->check(CLI::IsMember({"auto", "stream", "mmap"}));
  app.add_option("--weight-memory", f.weight_memory_mib,
                 "MiB this device gives its weights, resident part and stream buffer (default: "
                 "available memory, cgroup-aware, minus KV cache and working buffers)")
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--stream-buffer", f.stream_buffer_mib,
                 "MiB of stream buffer (default: the minimum with one round; with k > 1 the "
                 "streamed part of one window)")
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--stream-io", f.stream_io,
                 "how the streamed part is read: direct (O_DIRECT into an anonymous buffer, "
                 "least CPU) or cache (through the page cache, dropped after use: memory the OS "
                 "can reclaim at any time, more CPU per byte)")
      ->check(CLI::IsMember({"direct", "cache"}));
  app.add_option("--release", f.release,
                 "--residency mmap, k > 1: release each window after use: auto (when this "
                 "device's layers do not fit in its memory), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_option("--prefetch-method", f.method,
                 "--residency mmap, k > 1: how to prefetch the next window")
      ->check(CLI::IsMember({"willneed", "touch", "both"}));
}

// Fills everything but .prefetch and .repack.
inline void apply_residency_options(const ResidencyFlags& f, cluster::ResidencyOptions& o) {
  constexpr double kMiB = 1024.0 * 1024.0;
  o.mode = cluster::parse_residency_mode(f.mode);
  o.weight_memory = static_cast<uint64_t>(f.weight_memory_mib * kMiB);
  o.stream_buffer = static_cast<uint64_t>(f.stream_buffer_mib * kMiB);
  o.stream_io = cluster::parse_stream_io(f.stream_io);
  o.release = residency::parse_release_mode(f.release);
  o.method = residency::parse_prefetch_method(f.method);
}

}  // namespace hearth::cli
