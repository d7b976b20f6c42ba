// Residency operations on a real temp file: mincore counts follow prefetch and release.
#include "hearth/residency/page_ranges.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "hearth/base/error.h"
#include "hearth/residency/device_meter.h"
#include "support/scratch_dir.h"

namespace hearth::residency {
namespace {

namespace fs = std::filesystem;

// A synced temp file of `pages` pages mapped read-only and shared, as GgufFile maps models.
class TempMapping {
 public:
  explicit TempMapping(size_t pages) {
    path_ = (hearth::testing::scratch_dir() /
             ("hearth_residency_" + std::to_string(::getpid()) + "_" + std::to_string(++n_)))
                .string();
    page_ = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    size_ = pages * page_;
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    EXPECT_GE(fd, 0);
    std::vector<uint8_t> buf(size_);  // (size) u8 file contents
    for (size_t i = 0; i < size_; ++i) buf[i] = static_cast<uint8_t>(i * 131 + 7);
    EXPECT_EQ(::write(fd, buf.data(), size_), static_cast<ssize_t>(size_));
    ::fsync(fd);  // clean pages: dirty ones cannot be dropped from the cache
    addr_ = static_cast<const uint8_t*>(::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0));
    ::close(fd);
  }
  ~TempMapping() {
    ::munmap(const_cast<uint8_t*>(addr_), size_);
    fs::remove(path_);
  }
  std::span<const uint8_t> bytes() const { return {addr_, size_}; }
  const std::string& path() const { return path_; }
  size_t page() const { return page_; }

 private:
  static inline int n_ = 0;
  std::string path_;
  size_t page_ = 0, size_ = 0;
  const uint8_t* addr_ = nullptr;
};

TEST(MappedPages, SpanBytesRoundsClampsAndMerges) {
  TempMapping m(16);
  MappedPages pages(m.bytes(), m.path());
  const size_t P = m.page();
  const uint8_t* b = m.bytes().data();
  // Two ranges sharing page 1, and one that runs past the end of the mapping.
  const ByteRange rs[] = {{b + 10, P}, {b + P + 5, 10}, {b + 14 * P + 1, 10 * P}};
  EXPECT_EQ(pages.span_bytes(rs), 2 * P + 2 * P);
  const ByteRange empty{b, 0};
  EXPECT_EQ(pages.span_bytes({&empty, 1}), 0u);
}

TEST(MappedPages, ReleaseDropsAndPrefetchRestoresResidency) {
  for (PrefetchMethod method :
       {PrefetchMethod::kWillNeed, PrefetchMethod::kTouch, PrefetchMethod::kBoth}) {
    SCOPED_TRACE(std::string(prefetch_method_name(method)));
    TempMapping m(256);
    MappedPages pages(m.bytes(), m.path());
    const ByteRange all{m.bytes().data(), m.bytes().size()};
    const uint64_t total = pages.span_bytes({&all, 1});
    ASSERT_EQ(total, 256 * m.page());

    // Touch-prefetch makes it resident whatever the cache held before.
    pages.prefetch({&all, 1}, PrefetchMethod::kTouch);
    EXPECT_EQ(pages.resident_bytes({&all, 1}), total);

    const uint64_t released = pages.release({&all, 1});
    EXPECT_EQ(released, total);  // all were resident just before
    const uint64_t after_release = pages.resident_bytes({&all, 1});
    EXPECT_LT(after_release, total / 4)
        << "release method " << release_method_name(pages.release_method());

    pages.prefetch({&all, 1}, method);
    // WILLNEED is asynchronous: give the readahead a moment to land.
    uint64_t now = 0;
    for (int i = 0; i < 200; ++i) {
      now = pages.resident_bytes({&all, 1});
      if (now == total) break;
      ::usleep(5000);
    }
    EXPECT_EQ(now, total);
  }
}

// Large enough that the page cache's large folios (up to 2 MiB) do not straddle the halves:
// fadvise drops only folios wholly inside the range.
TEST(MappedPages, ReleaseOfPartOnlyDropsThatPart) {
  const size_t half_pages = (8u << 20) / static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  TempMapping m(2 * half_pages);
  MappedPages pages(m.bytes(), m.path());
  const uint64_t half = half_pages * m.page();
  const ByteRange all{m.bytes().data(), m.bytes().size()};
  const ByteRange first{m.bytes().data(), half};
  const ByteRange second{m.bytes().data() + half, half};
  pages.prefetch({&all, 1}, PrefetchMethod::kTouch);
  pages.release({&first, 1});
  EXPECT_EQ(pages.resident_bytes({&second, 1}), half);
  EXPECT_LT(pages.resident_bytes({&first, 1}), half / 8);
}

TEST(MappedPages, WithoutAFileReleaseFallsBackToPageoutOrNothing) {
  TempMapping m(8);
  MappedPages with_file(m.bytes(), m.path());
  EXPECT_EQ(with_file.release_method(), ReleaseMethod::kFadvise);
  MappedPages no_file(m.bytes(), "");
  EXPECT_NE(no_file.release_method(), ReleaseMethod::kFadvise);
  const ByteRange all{m.bytes().data(), m.bytes().size()};
  no_file.prefetch({&all, 1}, PrefetchMethod::kTouch);
  EXPECT_EQ(no_file.release({&all, 1}), m.bytes().size());  // resident before
}

TEST(DeviceMeter, CountsReloadBytesOfAReleasedWindow) {
  const size_t half_pages = (8u << 20) / static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  TempMapping m(2 * half_pages);
  MappedPages pages(m.bytes(), m.path());
  const ByteRange all{m.bytes().data(), m.bytes().size()};
  const ByteRange half{m.bytes().data(), half_pages * m.page()};
  DeviceMeter meter(pages);
  pages.prefetch({&all, 1}, PrefetchMethod::kTouch);
  pages.release({&half, 1});
  meter.compute_begin({&all, 1}, 0);
  pages.prefetch({&all, 1}, PrefetchMethod::kTouch);  // the "compute" reads the window
  meter.compute_end(0);
  meter.add_send(2.0);
  const auto s = meter.finish_step();
  EXPECT_GE(s.reload_bytes, 0.875 * static_cast<double>(half.size));
  EXPECT_LE(s.reload_bytes, static_cast<double>(half.size));
  EXPECT_GE(s.compute_ms, 0.0);
  EXPECT_EQ(s.comm_ms, 2.0);
  EXPECT_EQ(s.sends, 1.0);
  EXPECT_EQ(meter.totals().steps, 1u);
  // Nothing released: the next compute reloads nothing.
  meter.compute_begin({&all, 1}, 0);
  meter.compute_end(0);
  EXPECT_EQ(meter.finish_step().reload_bytes, 0.0);
}

TEST(PrefetchMethod, ParsesAndRejects) {
  EXPECT_EQ(parse_prefetch_method("willneed"), PrefetchMethod::kWillNeed);
  EXPECT_EQ(parse_prefetch_method("touch"), PrefetchMethod::kTouch);
  EXPECT_EQ(parse_prefetch_method("both"), PrefetchMethod::kBoth);
  EXPECT_THROW(parse_prefetch_method("all"), UsageError);
}

}  // namespace
}  // namespace hearth::residency
