#include "hearth/base/huge_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "hearth/base/error.h"

namespace hearth {

namespace {
constexpr size_t kHuge = size_t{2} << 20;
}

bool huge_pages_wanted() {
  static const bool wanted = [] {
    const char* off = std::getenv("HEARTH_NO_HUGEPAGE");
    return off == nullptr || off[0] == '\0' || (off[0] == '0' && off[1] == '\0');
  }();
  return wanted;
}

HugeBuffer::HugeBuffer(size_t bytes) {
  if (bytes == 0) return;
  // Over-allocate by one huge page so the data can start on a 2 MiB boundary.
  map_bytes_ = bytes + kHuge;
  map_ = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw IoError("cannot map " + std::to_string(bytes) +
                  " bytes of memory: " + std::strerror(errno));
  }
  const auto base = reinterpret_cast<uintptr_t>(map_);
  const uintptr_t skip = ((base + kHuge - 1) & ~(uintptr_t{kHuge} - 1)) - base;
  data_ = static_cast<uint8_t*>(map_) + skip;
  size_ = bytes;
  if (huge_pages_wanted()) (void)madvise(data_, bytes, MADV_HUGEPAGE);  // advice only
}

HugeBuffer::~HugeBuffer() {
  release();
}

HugeBuffer::HugeBuffer(HugeBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      map_(std::exchange(o.map_, nullptr)),
      map_bytes_(std::exchange(o.map_bytes_, 0)) {}

HugeBuffer& HugeBuffer::operator=(HugeBuffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    map_ = std::exchange(o.map_, nullptr);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
  }
  return *this;
}

void HugeBuffer::release() {
  if (map_ != nullptr) munmap(map_, map_bytes_);
  map_ = nullptr;
  data_ = nullptr;
  size_ = 0;
  map_bytes_ = 0;
}

}  // namespace hearth
