// Warms a model's pages into the page cache before the first token, with a progress bar on
// stderr when it is a terminal. Only when the file fits comfortably in available memory: for
// a model larger than memory (the case the ring exists for), reading it all would only evict
// pages the next window needs.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <string>

#include "hearth/gguf/gguf_file.h"
#include "hearth/residency/memory_status.h"

namespace hearth::cli {

// Touches one byte per page of the tensor data (the kernel reads ahead in larger blocks).
// Returns true when it warmed the file.
inline bool warm_model_pages(const gguf::GgufFile& file) {
  const auto bytes = file.bytes();
  if (bytes.size() > residency::read_memory_status().available / 2) return false;
  const bool bar = isatty(STDERR_FILENO) != 0;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t step = 64ull << 20;  // report every 64 MiB
  volatile uint8_t sink = 0;
  for (size_t start = 0; start < bytes.size(); start += step) {
    const size_t end = std::min(bytes.size(), start + step);
    for (size_t i = start; i < end; i += page) sink = sink + bytes[i];
    if (bar) {
      const int pct = static_cast<int>(100.0 * end / bytes.size());
      std::fprintf(stderr, "\rloading %s [%-40s] %3d%%", file.path().c_str(),
                   std::string(pct * 40 / 100, '#').c_str(), pct);
    }
  }
  if (bar) std::fprintf(stderr, "\n");
  return true;
}

}  // namespace hearth::cli
