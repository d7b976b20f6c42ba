// Residency of a file mapping's pages (prima.cpp v2 A.1, A.2, A.14): how many bytes of a
// set of byte ranges are in the page cache (mincore), asking the kernel to read them in
// (prefetch), and giving them back (release) so that the next window is not evicted instead.
//
// Ranges are pointers into one read-only MAP_SHARED file mapping. Every operation rounds
// them out to whole pages, clamps them to the mapping and merges overlaps (two tensors may
// share a page), so bytes are counted once.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hearth::residency {

struct ByteRange {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
};

enum class PrefetchMethod {
  kWillNeed,  // madvise(MADV_WILLNEED): asynchronous readahead into the page cache
  kTouch,     // read one byte per page: synchronous, pages also mapped into our tables
  kBoth,      // WILLNEED first (queues all I/O at once), then touch (waits for it)
};

// How release() gives pages back. kFadvise is the default: MADV_DONTNEED only drops our
// page-table entries of the read-only shared mapping (no data is lost, the page cache keeps
// the pages), and POSIX_FADV_DONTNEED then drains the per-CPU LRU batches and drops the now
// unmapped clean pages from the cache. MADV_PAGEOUT alone proved best-effort (pages still in
// a per-CPU LRU batch cannot be isolated and stay resident), so it is only the fallback
// when the file cannot be opened for fadvise.
enum class ReleaseMethod {
  kFadvise,  // madvise(MADV_DONTNEED) + posix_fadvise(POSIX_FADV_DONTNEED) on the file range
  kPageout,  // madvise(MADV_PAGEOUT) (Linux >= 5.4), best-effort
  kNone,     // neither is available: release() does nothing
};

// "willneed" | "touch" | "both"; UsageError naming the value otherwise.
PrefetchMethod parse_prefetch_method(std::string_view text);
std::string_view prefetch_method_name(PrefetchMethod m);
std::string_view release_method_name(ReleaseMethod m);

// A view of one file mapping for residency operations. Does not own the mapping.
class MappedPages {
 public:
  // `mapping` is the whole mapping (page-aligned start) of the file at `path`, which is
  // opened read-only for posix_fadvise ("" or unopenable: MADV_PAGEOUT if the kernel has it).
  MappedPages(std::span<const uint8_t> mapping, const std::string& path);
  ~MappedPages();
  MappedPages(const MappedPages&) = delete;
  MappedPages& operator=(const MappedPages&) = delete;

  // Page-rounded, clamped and merged bytes of `ranges`.
  uint64_t span_bytes(std::span<const ByteRange> ranges) const;
  // Bytes of those pages that are in the page cache now (mincore).
  uint64_t resident_bytes(std::span<const ByteRange> ranges) const;
  // Asks for the pages; returns the bytes requested (page-rounded).
  uint64_t prefetch(std::span<const ByteRange> ranges, PrefetchMethod method) const;
  // Drops the pages from the page cache (where no other process maps them); returns the
  // bytes that were resident just before.
  uint64_t release(std::span<const ByteRange> ranges) const;
  // Tells the kernel to read only what a fault touches anywhere in the mapping
  // (MADV_NOHUGEPAGE, MADV_RANDOM): a device that streams most of the file touches it only
  // where it planned to, and readahead or a 2 MiB folio around a touch would read streamed
  // bytes into the cache. Best-effort.
  void advise_random() const;
  // The method release() uses.
  ReleaseMethod release_method() const { return release_method_; }

  uint64_t page_size() const { return page_; }

 private:
  struct Span {
    uintptr_t begin, end;  // page-aligned, inside the mapping
  };
  std::vector<Span> pages_of(std::span<const ByteRange> ranges) const;

  std::span<const uint8_t> mapping_;
  uint64_t page_;
  int fd_ = -1;
  ReleaseMethod release_method_ = ReleaseMethod::kFadvise;
};

}  // namespace hearth::residency
