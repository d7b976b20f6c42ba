#include "hearth/residency/page_ranges.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include <fmt/core.h>

#include "hearth/base/enum_names.h"
#include "hearth/base/error.h"
#include "hearth/base/log.h"

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21  // Linux 5.4 uapi value; older libc headers lack it
#endif

namespace hearth::residency {

namespace {
constexpr EnumName<PrefetchMethod> kPrefetchMethodNames[] = {
    {PrefetchMethod::kWillNeed, "willneed"},
    {PrefetchMethod::kTouch, "touch"},
    {PrefetchMethod::kBoth, "both"}};
constexpr EnumName<ReleaseMethod> kReleaseMethodNames[] = {{ReleaseMethod::kFadvise, "fadvise"},
                                                           {ReleaseMethod::kPageout, "pageout"},
                                                           {ReleaseMethod::kNone, "none"}};
}  // namespace

PrefetchMethod parse_prefetch_method(std::string_view text) {
  return parse_enum(kPrefetchMethodNames, text, "--prefetch-method");
}

std::string_view prefetch_method_name(PrefetchMethod m) {
  return enum_name(kPrefetchMethodNames, m);
}

std::string_view release_method_name(ReleaseMethod m) {
  return enum_name(kReleaseMethodNames, m);
}

MappedPages::MappedPages(std::span<const uint8_t> mapping, const std::string& path)
    : mapping_(mapping), page_(static_cast<uint64_t>(::sysconf(_SC_PAGESIZE))) {
  if (!path.empty()) fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ >= 0) return;
  // Probe MADV_PAGEOUT on the first page: EINVAL means this kernel does not know it.
  release_method_ = ReleaseMethod::kNone;
  if (!mapping_.empty()) {
    void* first = const_cast<uint8_t*>(mapping_.data());
    if (::madvise(first, page_, MADV_PAGEOUT) == 0) release_method_ = ReleaseMethod::kPageout;
  }
}

MappedPages::~MappedPages() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<MappedPages::Span> MappedPages::pages_of(std::span<const ByteRange> ranges) const {
  const uintptr_t mb = reinterpret_cast<uintptr_t>(mapping_.data());
  // The mapping covers whole pages even when the file ends mid-page.
  const uintptr_t me = (mb + mapping_.size() + page_ - 1) & ~(page_ - 1);
  std::vector<Span> out;
  for (const auto& r : ranges) {
    if (r.size == 0) continue;
    const uintptr_t p = reinterpret_cast<uintptr_t>(r.data);
    // A range outside the mapping (a caller's bug) is clipped rather than trusted.
    const uintptr_t b = std::max(p & ~(page_ - 1), mb);
    const uintptr_t e = std::min((p + r.size + page_ - 1) & ~(page_ - 1), me);
    if (e > b) out.push_back(Span{b, e});
  }
  std::sort(out.begin(), out.end(), [](const Span& x, const Span& y) { return x.begin < y.begin; });
  std::vector<Span> merged;
  for (const auto& s : out) {
    if (!merged.empty() && s.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, s.end);
    } else {
      merged.push_back(s);
    }
  }
  return merged;
}

uint64_t MappedPages::span_bytes(std::span<const ByteRange> ranges) const {
  uint64_t n = 0;
  for (const auto& s : pages_of(ranges)) n += s.end - s.begin;
  return n;
}

uint64_t MappedPages::resident_bytes(std::span<const ByteRange> ranges) const {
  constexpr uint64_t kChunkPages = 1u << 16;
  std::vector<unsigned char> vec(kChunkPages);  // (pages) mincore flags, bit 0 = resident
  uint64_t resident = 0;
  for (const auto& s : pages_of(ranges)) {
    for (uintptr_t b = s.begin; b < s.end; b += kChunkPages * page_) {
      const uint64_t len = std::min<uint64_t>(s.end - b, kChunkPages * page_);
      if (::mincore(reinterpret_cast<void*>(b), len, vec.data()) != 0) {
        throw IoError(fmt::format("mincore of {} bytes at mapping offset {}: errno {}", len,
                                  b - reinterpret_cast<uintptr_t>(mapping_.data()), errno));
      }
      const uint64_t n = len / page_;
      for (uint64_t i = 0; i < n; ++i) resident += vec[i] & 1u;
    }
  }
  return resident * page_;
}

uint64_t MappedPages::prefetch(std::span<const ByteRange> ranges, PrefetchMethod method) const {
  const auto spans = pages_of(ranges);
  uint64_t bytes = 0;
  if (method != PrefetchMethod::kTouch) {
    for (const auto& s : spans) {
      if (::madvise(reinterpret_cast<void*>(s.begin), s.end - s.begin, MADV_WILLNEED) != 0) {
        log::debug("residency: madvise(WILLNEED) of {} bytes failed: errno {}", s.end - s.begin,
                   errno);
      }
    }
  }
  if (method != PrefetchMethod::kWillNeed) {
    // One load per page faults it in; the sum keeps the loads from being optimized away.
    unsigned sum = 0;
    for (const auto& s : spans) {
      for (uintptr_t p = s.begin; p < s.end; p += page_) {
        sum += *reinterpret_cast<const volatile uint8_t*>(p);
      }
    }
    static std::atomic<unsigned> sink{0};
    sink.fetch_add(sum, std::memory_order_relaxed);
  }
  for (const auto& s : spans) bytes += s.end - s.begin;
  return bytes;
}

void MappedPages::advise_random() const {
  if (mapping_.empty()) return;
  const uintptr_t b = reinterpret_cast<uintptr_t>(mapping_.data()) & ~(page_ - 1);
  const uintptr_t e = reinterpret_cast<uintptr_t>(mapping_.data()) + mapping_.size();
  // A mapping advised MADV_HUGEPAGE faults in whole 2 MiB folios even under MADV_RANDOM
  // (the kernel's huge-page fault path reads a PMD folio regardless), so take that back first.
  if (::madvise(reinterpret_cast<void*>(b), e - b, MADV_NOHUGEPAGE) != 0) {
    log::debug("residency: madvise(NOHUGEPAGE) failed: errno {}", errno);
  }
  if (::madvise(reinterpret_cast<void*>(b), e - b, MADV_RANDOM) != 0) {
    log::debug("residency: madvise(RANDOM) failed: errno {}", errno);
  }
}

uint64_t MappedPages::release(std::span<const ByteRange> ranges) const {
  const uint64_t before = resident_bytes(ranges);
  const uintptr_t mb = reinterpret_cast<uintptr_t>(mapping_.data());
  for (const auto& s : pages_of(ranges)) {
    void* addr = reinterpret_cast<void*>(s.begin);
    const size_t len = s.end - s.begin;
    if (release_method_ == ReleaseMethod::kNone) break;
    if (release_method_ == ReleaseMethod::kPageout) {
      if (::madvise(addr, len, MADV_PAGEOUT) != 0) {
        log::debug("residency: madvise(PAGEOUT) of {} bytes failed: errno {}", len, errno);
      }
      continue;
    }
    // fadvise skips pages that are still mapped, so unmap our view of them first. The
    // mapping is read-only and file-backed: a later access faults the page back in from
    // the file, no data is lost.
    if (::madvise(addr, len, MADV_DONTNEED) != 0) {
      log::debug("residency: madvise(DONTNEED) of {} bytes failed: errno {}", len, errno);
    }
    if (::posix_fadvise(fd_, static_cast<off_t>(s.begin - mb), static_cast<off_t>(len),
                        POSIX_FADV_DONTNEED) != 0) {
      log::debug("residency: posix_fadvise(DONTNEED) of {} bytes failed", len);
    }
  }
  return before;
}

}  // namespace hearth::residency
