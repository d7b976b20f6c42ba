#include "hearth/gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/core.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <unordered_set>

#include "hearth/base/checked_math.h"
#include "hearth/base/enum_names.h"
#include "hearth/base/error.h"
#include "hearth/base/huge_buffer.h"
#include "hearth/gguf/number_types.h"

namespace hearth::gguf {

namespace {
constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;
}  // namespace

std::string_view value_type_name(ValueType type) {
  static constexpr EnumName<ValueType> kNames[] = {
      {ValueType::kU8, "u8"},       {ValueType::kI8, "i8"},     {ValueType::kU16, "u16"},
      {ValueType::kI16, "i16"},     {ValueType::kU32, "u32"},   {ValueType::kI32, "i32"},
      {ValueType::kF32, "f32"},     {ValueType::kBool, "bool"}, {ValueType::kString, "string"},
      {ValueType::kArray, "array"}, {ValueType::kU64, "u64"},   {ValueType::kI64, "i64"},
      {ValueType::kF64, "f64"}};
  return enum_name(kNames, type);
}

std::optional<uint64_t> Value::as_u64() const {
  if (const auto* u = std::get_if<uint64_t>(&data)) return *u;
  if (const auto* i = std::get_if<int64_t>(&data)) {
    if (*i >= 0) return static_cast<uint64_t>(*i);
  }
  return std::nullopt;
}

std::optional<int64_t> Value::as_i64() const {
  if (const auto* i = std::get_if<int64_t>(&data)) return *i;
  if (const auto* u = std::get_if<uint64_t>(&data)) {
    if (*u <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(*u);
  }
  return std::nullopt;
}

std::optional<double> Value::as_f64() const {
  if (const auto* d = std::get_if<double>(&data)) return *d;
  if (const auto* i = std::get_if<int64_t>(&data)) return static_cast<double>(*i);
  if (const auto* u = std::get_if<uint64_t>(&data)) return static_cast<double>(*u);
  return std::nullopt;
}

const std::string* Value::as_string() const {
  return std::get_if<std::string>(&data);
}
const Array* Value::as_array() const {
  return std::get_if<Array>(&data);
}
std::optional<bool> Value::as_bool() const {
  if (const auto* b = std::get_if<bool>(&data)) return *b;
  return std::nullopt;
}

uint64_t TensorInfo::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;  // validated not to overflow at parse time
  return n;
}

// The mapping owns the mmap'd region (or nothing, for parse()).
struct GgufFile::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr != nullptr && addr != MAP_FAILED) munmap(addr, size);
  }
};

GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

// Reads the header, metadata and tensor table with every length checked against the bytes
// that remain before it is used. Errors name the file, the field and its byte offset.
class Parser {
 public:
  Parser(std::span<const uint8_t> bytes, const std::string& name, const ReadLimits& limits)
      : bytes_(bytes), name_(name), limits_(limits) {}

  void parse(GgufFile& out) {
    const uint32_t magic = read_u32("magic");
    if (magic != kMagic) {
      fail(0, "magic", fmt::format("not a GGUF file (magic {:#010x}, expected \"GGUF\")", magic));
    }
    const uint32_t version = read_u32("version");
    if (version == 0x02000000u || version == 0x03000000u || version == 0x01000000u) {
      fail(4, "version",
           "big-endian GGUF files are not supported (convert it on a little-endian "
           "machine)");
    }
    if (version == 1) fail(4, "version", "GGUF v1 is not supported (re-convert to v3)");
    if (version != 2 && version != 3)
      fail(4, "version", fmt::format("unknown version {}", version));
    out.version_ = version;

    const uint64_t n_tensors = read_u64("tensor_count");
    const uint64_t n_kv = read_u64("metadata_kv_count");
    if (n_tensors > limits_.max_tensors) {
      fail(8, "tensor_count",
           fmt::format("{} tensors exceeds the limit {}", n_tensors, limits_.max_tensors));
    }
    if (n_kv > limits_.max_kv) {
      fail(16, "metadata_kv_count",
           fmt::format("{} entries exceeds the limit {}", n_kv, limits_.max_kv));
    }
    // Each kv needs at least 8 (key length) + 4 (type) + 1 byte; each tensor info at least
    // 8 + 4 + 4 + 8 bytes. Reject impossible counts before allocating anything.
    if (n_kv > remaining() / 13) {
      fail(16, "metadata_kv_count",
           fmt::format("{} entries cannot fit in the {} bytes left", n_kv, remaining()));
    }

    out.metadata_.reserve(n_kv);
    std::unordered_set<std::string> seen_keys;
    for (uint64_t i = 0; i < n_kv; ++i) {
      const uint64_t at = pos_;
      KeyValue kv;
      kv.key = read_string(fmt::format("metadata[{}].key", i));
      if (kv.key.empty()) fail(at, fmt::format("metadata[{}].key", i), "empty key");
      if (!seen_keys.insert(kv.key).second)
        fail(at, "metadata key '" + kv.key + "'", "duplicate key");
      const uint64_t type_at = pos_;
      const uint32_t raw_type = read_u32("metadata '" + kv.key + "' type");
      kv.value = read_value(raw_type, type_at, kv.key, 0);
      out.metadata_.push_back(std::move(kv));
    }

    uint64_t alignment = kDefaultAlignment;
    if (const Value* a = out.find("general.alignment")) {
      if (a->type != ValueType::kU32) fail(0, "general.alignment", "must be a u32");
      alignment = *a->as_u64();
      if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
        fail(0, "general.alignment", fmt::format("{} is not a power of two", alignment));
      }
    }
    out.alignment_ = alignment;

    if (n_tensors > remaining() / 24) {
      fail(8, "tensor_count",
           fmt::format("{} tensors cannot fit in the {} bytes left", n_tensors, remaining()));
    }
    out.tensors_.reserve(n_tensors);
    std::vector<uint64_t> info_offsets;
    std::unordered_set<std::string> seen_names;
    for (uint64_t i = 0; i < n_tensors; ++i) {
      const uint64_t at = pos_;
      info_offsets.push_back(at);
      TensorInfo t;
      t.name = read_string(fmt::format("tensor[{}].name", i));
      const std::string field = "tensor '" + t.name + "'";
      if (t.name.empty()) fail(at, fmt::format("tensor[{}].name", i), "empty name");
      const uint64_t dims_at = pos_;
      const uint32_t n_dims = read_u32(field + " n_dims");
      if (n_dims == 0 || n_dims > kMaxDims) {
        fail(dims_at, field + " n_dims",
             fmt::format("{} dimensions (must be 1..{})", n_dims, kMaxDims));
      }
      uint64_t elems = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        const uint64_t dim_at = pos_;
        const uint64_t dim = read_u64(fmt::format("{} ne[{}]", field, d));
        if (dim == 0) fail(dim_at, fmt::format("{} ne[{}]", field, d), "zero-sized dimension");
        const auto e = checked_mul(elems, dim);
        if (!e || *e > (1ull << 50))
          fail(dim_at, fmt::format("{} ne[{}]", field, d), "element count overflows");
        elems = *e;
        t.shape.push_back(dim);
      }
      const uint64_t type_at = pos_;
      const uint32_t raw_type = read_u32(field + " type");
      const auto info = tensor_type_info(raw_type);
      if (!info) fail(type_at, field + " type", fmt::format("unknown tensor type {}", raw_type));
      t.type = info->type;
      if (t.shape[0] % info->block_elems != 0) {
        fail(dims_at, field + " ne[0]",
             fmt::format("{} is not a multiple of the {} block size {}", t.shape[0], info->name,
                         info->block_elems));
      }
      t.bytes = elems / info->block_elems * info->block_bytes;
      const uint64_t off_at = pos_;
      t.offset = read_u64(field + " offset");
      if (t.offset % alignment != 0) {
        fail(off_at, field + " offset",
             fmt::format("{} is not aligned to {}", t.offset, alignment));
      }
      if (!seen_names.insert(t.name).second) fail(at, field, "duplicate tensor name");
      out.tensors_.push_back(std::move(t));
    }

    const auto data_start = checked_align_up(pos_, alignment);
    if (!data_start || (!out.tensors_.empty() && *data_start > bytes_.size())) {
      fail(pos_, "data section",
           fmt::format("starts past the end of the file ({} bytes)", bytes_.size()));
    }
    out.data_offset_ = *data_start;
    const uint64_t data_size = *data_start <= bytes_.size() ? bytes_.size() - *data_start : 0;

    // Every tensor inside the data section, and no two overlapping.
    std::vector<size_t> order(out.tensors_.size());
    std::iota(order.begin(), order.end(), 0);
    for (size_t i = 0; i < out.tensors_.size(); ++i) {
      auto& t = out.tensors_[i];
      const auto end = checked_add(t.offset, t.bytes);
      if (!end || *end > data_size) {
        fail(info_offsets[i], "tensor '" + t.name + "' data",
             fmt::format(
                 "bytes [{}, +{}) of the data section run past its end ({} bytes; file truncated?)",
                 t.offset, t.bytes, data_size));
      }
      t.data = bytes_.data() + *data_start + t.offset;
    }
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return out.tensors_[a].offset < out.tensors_[b].offset; });
    for (size_t i = 1; i < order.size(); ++i) {
      const auto& a = out.tensors_[order[i - 1]];
      const auto& b = out.tensors_[order[i]];
      if (a.offset + a.bytes > b.offset) {
        fail(info_offsets[order[i]], "tensor '" + b.name + "' offset",
             fmt::format("data overlaps tensor '{}' ([{}, {}) vs [{}, {}))", a.name, a.offset,
                         a.offset + a.bytes, b.offset, b.offset + b.bytes));
      }
    }
  }

 private:
  [[noreturn]] void fail(uint64_t offset, const std::string& field, const std::string& what) const {
    throw FormatError(fmt::format("{}: {} at byte {}: {}", name_, field, offset, what));
  }

  uint64_t remaining() const { return bytes_.size() - pos_; }

  void need(uint64_t n, const std::string& field) const {
    if (n > remaining()) {
      fail(pos_, field,
           fmt::format("needs {} bytes but only {} remain (file truncated?)", n, remaining()));
    }
  }

  template <typename T>
  T read_raw(const std::string& field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  uint32_t read_u32(const std::string& field) { return read_raw<uint32_t>(field); }
  uint64_t read_u64(const std::string& field) { return read_raw<uint64_t>(field); }

  std::string read_string(const std::string& field) {
    const uint64_t at = pos_;
    const uint64_t len = read_u64(field + " length");
    if (len > limits_.max_string_bytes) {
      fail(at, field,
           fmt::format("string length {} exceeds the limit {}", len, limits_.max_string_bytes));
    }
    need(len, field);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return s;
  }

  Value read_value(uint32_t raw_type, uint64_t type_at, const std::string& key, uint32_t depth) {
    const std::string field = "metadata '" + key + "'";
    const auto type = static_cast<ValueType>(raw_type);
    Value number;
    if (visit_number_type(type, [&](auto zero) {
          number = number_value(type, read_raw<decltype(zero)>(field));
        })) {
      return number;
    }
    switch (type) {
      case ValueType::kBool: {
        const uint64_t at = pos_;
        const uint8_t b = read_raw<uint8_t>(field);
        if (b > 1) fail(at, field, fmt::format("bool value {} is not 0 or 1", b));
        return Value::boolean(b != 0);
      }
      case ValueType::kString:
        return Value::string(read_string(field));
      case ValueType::kArray: {
        if (depth >= limits_.max_array_depth) fail(type_at, field, "arrays nested too deeply");
        const uint64_t elem_at = pos_;
        const uint32_t elem_raw = read_u32(field + " array type");
        if (elem_raw > static_cast<uint32_t>(ValueType::kF64)) {
          fail(elem_at, field, fmt::format("unknown array element type {}", elem_raw));
        }
        const uint64_t count_at = pos_;
        const uint64_t count = read_u64(field + " array length");
        if (count > limits_.max_array_items) {
          fail(count_at, field,
               fmt::format("array length {} exceeds the limit {}", count, limits_.max_array_items));
        }
        const auto elem_type = static_cast<ValueType>(elem_raw);
        const uint64_t min_size = elem_min_size(elem_type);
        if (count > remaining() / min_size) {
          fail(count_at, field,
               fmt::format("array of {} {} cannot fit in the {} bytes left", count,
                           value_type_name(elem_type), remaining()));
        }
        std::vector<Value> items;
        items.reserve(count);
        for (uint64_t i = 0; i < count; ++i) {
          items.push_back(read_value(elem_raw, elem_at, key, depth + 1));
        }
        return Value::array(elem_type, std::move(items));
      }
      default:
        break;
    }
    fail(type_at, field, fmt::format("unknown value type {}", raw_type));
  }

  // Smallest encoding of one element: a number's width, 1 byte for a bool, 8 for an empty
  // string (its length), 12 for an empty array (element type and length).
  static uint64_t elem_min_size(ValueType t) {
    uint64_t size = 1;
    if (visit_number_type(t, [&](auto zero) { size = sizeof(zero); })) return size;
    return t == ValueType::kString ? 8 : t == ValueType::kArray ? 12 : 1;
  }

  std::span<const uint8_t> bytes_;
  const std::string& name_;
  const ReadLimits& limits_;
  uint64_t pos_ = 0;
};

GgufFile GgufFile::parse(std::span<const uint8_t> bytes, std::string name,
                         const ReadLimits& limits) {
  GgufFile f;
  f.path_ = std::move(name);
  f.bytes_ = bytes;
  Parser(bytes, f.path_, limits).parse(f);
  return f;
}

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

// Maps the whole file read-only and shared at a 2 MiB-aligned address, advised MADV_HUGEPAGE.
// Why: decode streams every weight byte once per token, and with 4 KiB pages that costs a TLB
// miss per page (a two-level walk under a hypervisor). Kernels whose page cache holds large
// folios (ext4, xfs on Linux >= 6.x) then map 2 MiB folios with one PMD entry when file
// offset and address agree modulo 2 MiB (docs/kernels.md, "Huge pages", has the measured
// cost of 4 KiB pages). The pages stay in the page cache, so reclaim, residency's
// release/prefetch and mincore work as before. HEARTH_NO_HUGEPAGE=1 maps plainly (debugging,
// A/B runs).
void* map_file_huge_aligned(int fd, size_t size) {
  if (!huge_pages_wanted() || size < kHugePage) {
    return mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  }
  // Reserve size + 2 MiB of address space, place the file at the first aligned address in it,
  // and give the unused head and tail back.
  const size_t reserve = size + kHugePage;
  void* r = mmap(nullptr, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED) return mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  auto* base = static_cast<uint8_t*>(r);
  const auto addr_bits = reinterpret_cast<uintptr_t>(r);
  const size_t head = ((addr_bits + kHugePage - 1) & ~(uintptr_t{kHugePage} - 1)) - addr_bits;
  void* addr = mmap(base + head, size, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
  if (addr == MAP_FAILED) {
    munmap(r, reserve);
    return MAP_FAILED;
  }
  if (head > 0) munmap(base, head);
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t used = head + (size + page - 1) / page * page;  // the mapping ends on a page
  if (reserve > used) munmap(base + used, reserve - used);
  // Advice only: a kernel without file THP support ignores it or says EINVAL.
  (void)madvise(addr, size, MADV_HUGEPAGE);
  return addr;
}

}  // namespace

GgufFile GgufFile::open(const std::string& path, const ReadLimits& limits) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError(errno_message("cannot open '" + path + "'"));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const auto msg = errno_message("cannot stat '" + path + "'");
    ::close(fd);
    throw IoError(msg);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw IoError("'" + path + "' is not a regular file");
  }
  auto mapping = std::make_unique<Mapping>();
  mapping->size = static_cast<size_t>(st.st_size);
  if (mapping->size > 0) {
    // Read-only shared mapping: pages live in the page cache, so the OS can reclaim them under
    // pressure and re-read them from the file (DESIGN.md: mmap without copies).
    mapping->addr = map_file_huge_aligned(fd, mapping->size);
    if (mapping->addr == MAP_FAILED) {
      const auto msg = errno_message("cannot mmap '" + path + "'");
      ::close(fd);
      throw IoError(msg);
    }
  }
  ::close(fd);  // the mapping keeps the file alive
  std::span<const uint8_t> bytes(static_cast<const uint8_t*>(mapping->addr), mapping->size);
  if (mapping->size == 0) bytes = {};
  GgufFile f = parse(bytes, path, limits);
  f.mapping_ = std::move(mapping);
  return f;
}

const Value* GgufFile::find(std::string_view key) const {
  for (const auto& kv : metadata_) {
    if (kv.key == key) return &kv.value;
  }
  return nullptr;
}

namespace {

// The value `v` of `key` converted by `as`, or nullopt when the key is absent; a FormatError
// naming the file, the key and the `wanted` type when `as` finds the value of another type
// (returns nullopt).
template <class As>
auto typed(const Value* v, const std::string& path, std::string_view key, std::string_view wanted,
           As&& as) -> decltype(std::invoke(as, *v)) {
  if (v == nullptr) return std::nullopt;
  if (auto out = std::invoke(as, *v)) return out;
  throw FormatError(fmt::format("{}: metadata '{}' is {}, expected {}", path, key,
                                value_type_name(v->type), wanted));
}

// The items of an array value converted by `item`, or nullopt when `v` is not an array or
// `elem_ok` refuses its element type.
template <class Item>
auto array_of(const Value& v, bool elem_ok(ValueType), Item item)
    -> std::optional<std::vector<decltype(item(v))>> {
  const Array* a = v.as_array();
  if (a == nullptr || !elem_ok(a->elem_type)) return std::nullopt;
  std::vector<decltype(item(v))> out;
  out.reserve(a->items.size());
  for (const Value& x : a->items) out.push_back(item(x));
  return out;
}

bool is_string(ValueType t) {
  return t == ValueType::kString;
}
bool is_number(ValueType t) {
  return t != ValueType::kString && t != ValueType::kArray && t != ValueType::kBool;
}
// u64 items are refused: one that does not fit an i64 would have no value.
bool is_signed_integer(ValueType t) {
  return is_number(t) && t != ValueType::kF32 && t != ValueType::kF64 && t != ValueType::kU64;
}

}  // namespace

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  return typed(find(key), path_, key, "a string", [](const Value& v) -> std::optional<std::string> {
    if (const auto* s = v.as_string()) return *s;
    return std::nullopt;
  });
}

std::optional<uint64_t> GgufFile::get_u64(std::string_view key) const {
  return typed(find(key), path_, key, "a non-negative integer", &Value::as_u64);
}

std::optional<int64_t> GgufFile::get_i64(std::string_view key) const {
  return typed(find(key), path_, key, "an integer", &Value::as_i64);
}

std::optional<double> GgufFile::get_f64(std::string_view key) const {
  return typed(find(key), path_, key, "a number", &Value::as_f64);
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  return typed(find(key), path_, key, "a bool", &Value::as_bool);
}

std::optional<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  return typed(find(key), path_, key, "an array of strings", [](const Value& v) {
    return array_of(v, is_string, [](const Value& x) { return *x.as_string(); });
  });
}

std::optional<std::vector<double>> GgufFile::get_f64_array(std::string_view key) const {
  return typed(find(key), path_, key, "an array of numbers", [](const Value& v) {
    return array_of(v, is_number, [](const Value& x) { return *x.as_f64(); });
  });
}

std::optional<std::vector<int64_t>> GgufFile::get_i64_array(std::string_view key) const {
  return typed(find(key), path_, key, "an array of integers", [](const Value& v) {
    return array_of(v, is_signed_integer, [](const Value& x) { return *x.as_i64(); });
  });
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const TensorInfo& GgufFile::tensor(std::string_view name) const {
  if (const auto* t = find_tensor(name)) return *t;
  throw FormatError(fmt::format("{}: tensor '{}' is missing", path_, name));
}

}  // namespace hearth::gguf
