// Anonymous memory for large, long-lived arrays that are streamed every token (repacked
// weights, benchmark matrices): 2 MiB-aligned and advised MADV_HUGEPAGE, because streaming
// through 4 KiB pages costs a TLB miss per page, which under a hypervisor (two-level walks)
// measured ~20% of DRAM read bandwidth here. Pages are committed on first write.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hearth {

class HugeBuffer {
 public:
  HugeBuffer() = default;
  // IoError (naming the size) if the address space cannot be reserved.
  explicit HugeBuffer(size_t bytes);
  ~HugeBuffer();
  HugeBuffer(HugeBuffer&& o) noexcept;
  HugeBuffer& operator=(HugeBuffer&& o) noexcept;
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release();
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;  // the whole mapping (data_ is its 2 MiB-aligned part)
  size_t map_bytes_ = 0;
};

}  // namespace hearth
