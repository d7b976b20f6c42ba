// GGUF writer (v3, little-endian): metadata in insertion order, tensors aligned to
// general.alignment. Tensor bytes are produced one tensor at a time by a fill callback, so a
// multi-GiB synthetic model is written without holding it in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hearth/gguf/gguf_file.h"

namespace hearth::gguf {

class GgufWriter {
 public:
  // Fills `bytes` bytes of one tensor's data at `dst`.
  using Fill = std::function<void(uint8_t* dst, uint64_t bytes)>;

  explicit GgufWriter(uint32_t alignment = 32);

  // Adds or replaces a metadata key (order of first insertion is kept).
  void set(const std::string& key, Value value);
  // Declares a tensor; `shape` is ne0-first. Throws UsageError on a bad shape for the type.
  void add_tensor(const std::string& name, TensorType type, std::vector<uint64_t> shape, Fill fill);
  // Convenience: a tensor whose bytes are already in memory.
  void add_tensor_bytes(const std::string& name, TensorType type, std::vector<uint64_t> shape,
                        std::vector<uint8_t> bytes);

  // Writes to `path` through a temporary file renamed into place, so an interrupted write
  // never leaves a truncated file under the final name. Throws IoError.
  void write_file(const std::string& path) const;
  std::vector<uint8_t> write_memory() const;

  uint64_t tensor_data_bytes() const;

 private:
  struct PendingTensor {
    std::string name;
    TensorType type;
    std::vector<uint64_t> shape;
    uint64_t bytes;
    uint64_t offset;  // within the data section
    Fill fill;
  };
  template <typename Sink>
  void emit(Sink& sink) const;

  uint32_t alignment_;
  std::vector<KeyValue> metadata_;
  std::vector<PendingTensor> tensors_;
  uint64_t data_bytes_ = 0;
};

}  // namespace hearth::gguf
