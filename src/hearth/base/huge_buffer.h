// Anonymous memory for large, long-lived arrays that are streamed every token (repacked
// weights, benchmark matrices): 2 MiB-aligned and advised MADV_HUGEPAGE, because streaming
// through 4 KiB pages costs a TLB miss per page, expensive under a hypervisor (two-level
// walks; docs/kernels.md, "Huge pages", has the figures). Pages are committed on first write.
// HEARTH_NO_HUGEPAGE=1 leaves out the advice (A/B runs: `HEARTH_NO_HUGEPAGE=1 hearth bench
// kernels` measures on 4 KiB pages).
#pragma once

#include <cstddef>
#include <cstdint>

namespace hearth {

// False when HEARTH_NO_HUGEPAGE is set (and not "0"): the model mapping and HugeBuffer then
// use plain 4 KiB pages.
bool huge_pages_wanted();

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
