// GGUF reader: maps a file read-only, validates everything before use, and exposes the
// metadata and zero-copy tensor views into the mapping.
//
// Layout (little-endian, v2/v3): magic "GGUF", u32 version, u64 tensor_count,
// u64 kv_count, kv_count x (string key, u32 value type, value), tensor_count x (string name,
// u32 n_dims, n_dims x u64 dims (ne0 = innermost), u32 type, u64 offset), padding to
// general.alignment (default 32), then the data section; tensor offsets are relative to it.
//
// Non-goals: big-endian files (refused with a message that says so), GGUF v1 (refused).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hearth/gguf/tensor_type.h"

namespace hearth::gguf {

enum class ValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
std::string_view value_type_name(ValueType type);

struct Value;
// An array value: element type plus elements (nested arrays allowed).
struct Array {
  ValueType elem_type = ValueType::kU8;
  std::vector<Value> items;
};

struct Value {
  ValueType type = ValueType::kU8;
  // Integers of every width are held in the widest type of their signedness; the original
  // width is `type`, so a writer can reproduce the file exactly.
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> data;

  std::optional<uint64_t> as_u64() const;  // any integer type that fits, non-negative
  std::optional<int64_t> as_i64() const;   // any integer type that fits
  std::optional<double> as_f64() const;    // any numeric type
  const std::string* as_string() const;
  const Array* as_array() const;
  std::optional<bool> as_bool() const;

  static Value u8(uint8_t v) { return {ValueType::kU8, uint64_t{v}}; }
  static Value u16(uint16_t v) { return {ValueType::kU16, uint64_t{v}}; }
  static Value u32(uint32_t v) { return {ValueType::kU32, uint64_t{v}}; }
  static Value u64(uint64_t v) { return {ValueType::kU64, v}; }
  static Value i8(int8_t v) { return {ValueType::kI8, int64_t{v}}; }
  static Value i16(int16_t v) { return {ValueType::kI16, int64_t{v}}; }
  static Value i32(int32_t v) { return {ValueType::kI32, int64_t{v}}; }
  static Value i64(int64_t v) { return {ValueType::kI64, v}; }
  static Value f32(float v) { return {ValueType::kF32, double{v}}; }
  static Value f64(double v) { return {ValueType::kF64, v}; }
  static Value boolean(bool v) { return {ValueType::kBool, v}; }
  static Value string(std::string v) { return {ValueType::kString, std::move(v)}; }
  static Value array(ValueType elem_type, std::vector<Value> items) {
    return {ValueType::kArray, Array{elem_type, std::move(items)}};
  }
  bool operator==(const Value& other) const;
};

inline bool operator==(const Array& a, const Array& b) {
  return a.elem_type == b.elem_type && a.items == b.items;
}
inline bool Value::operator==(const Value& other) const {
  return type == other.type && data == other.data;
}

struct KeyValue {
  std::string key;
  Value value;
};

struct TensorInfo {
  std::string name;
  TensorType type = TensorType::kF32;
  std::vector<uint64_t> shape;    // ne0 (innermost, contiguous) first; 1..4 dims
  uint64_t offset = 0;            // relative to the data section
  uint64_t bytes = 0;             // validated against type and shape
  const uint8_t* data = nullptr;  // (bytes) into the mapping, valid while the file lives

  uint64_t elements() const;
  uint64_t rows() const { return elements() / (shape.empty() ? 1 : shape[0]); }
};

// Limits that keep a hostile file from exhausting memory before it is rejected.
struct ReadLimits {
  uint64_t max_string_bytes = 1ull << 26;  // 64 MiB for one string (chat templates are KiB)
  uint64_t max_array_items = 1ull << 26;   // vocabularies are ~10^5..10^6
  uint32_t max_array_depth = 8;
  uint64_t max_tensors = 1ull << 20;
  uint64_t max_kv = 1ull << 20;
};

class GgufFile {
 public:
  // Maps `path` read-only and validates it. Throws IoError (cannot open/map) or FormatError
  // (message names the path, field and byte offset).
  static GgufFile open(const std::string& path, const ReadLimits& limits = {});
  // Parses a buffer the caller keeps alive (tests, fuzzing). `name` appears in errors.
  static GgufFile parse(std::span<const uint8_t> bytes, std::string name = "<memory>",
                        const ReadLimits& limits = {});

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of the data section
  uint64_t file_size() const { return bytes_.size(); }
  std::span<const uint8_t> bytes() const { return bytes_; }  // the whole mapping

  const std::vector<KeyValue>& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<uint64_t> get_u64(std::string_view key) const;  // any non-negative integer
  std::optional<int64_t> get_i64(std::string_view key) const;
  std::optional<double> get_f64(std::string_view key) const;  // any number
  std::optional<bool> get_bool(std::string_view key) const;
  // Typed array getters; nullopt when absent, FormatError when present with another type.
  std::optional<std::vector<std::string>> get_string_array(std::string_view key) const;
  std::optional<std::vector<double>> get_f64_array(std::string_view key) const;
  std::optional<std::vector<int64_t>> get_i64_array(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  // Throws FormatError naming the file when the tensor is absent.
  const TensorInfo& tensor(std::string_view name) const;

 private:
  GgufFile() = default;
  struct Mapping;
  std::unique_ptr<Mapping> mapping_;
  std::span<const uint8_t> bytes_;
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<KeyValue> metadata_;
  std::vector<TensorInfo> tensors_;

  friend class Parser;
};

}  // namespace hearth::gguf
