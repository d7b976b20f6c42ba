#include "hearth/gguf/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/core.h>
#include <cstdio>
#include <cstring>
#include <memory>

#include "hearth/base/checked_math.h"
#include "hearth/base/error.h"
#include "hearth/gguf/number_types.h"

namespace hearth::gguf {

namespace {

constexpr uint32_t kVersion = 3;

// Appends little-endian encodings to a byte vector (the header and metadata are small).
struct Bytes {
  std::vector<uint8_t> out;
  template <typename T>
  void raw(T v) {
    const size_t at = out.size();
    out.resize(at + sizeof(T));
    std::memcpy(out.data() + at, &v, sizeof(T));
  }
  void str(const std::string& s) {
    raw<uint64_t>(s.size());
    const size_t at = out.size();
    out.resize(at + s.size());
    if (!s.empty()) std::memcpy(out.data() + at, s.data(), s.size());
  }
};

void encode_value(Bytes& b, const Value& v);

void encode_payload(Bytes& b, const Value& v) {
  if (visit_number_type(v.type, [&](auto zero) { b.raw(stored_number<decltype(zero)>(v)); })) {
    return;
  }
  switch (v.type) {
    case ValueType::kBool:
      b.raw<uint8_t>(*v.as_bool() ? 1 : 0);
      break;
    case ValueType::kString:
      b.str(*v.as_string());
      break;
    case ValueType::kArray: {
      const Array& a = *v.as_array();
      b.raw<uint32_t>(static_cast<uint32_t>(a.elem_type));
      b.raw<uint64_t>(a.items.size());
      for (const auto& item : a.items) {
        if (item.type != a.elem_type) throw UsageError("GGUF array holds an item of another type");
        encode_payload(b, item);
      }
      break;
    }
    default:
      break;
  }
}

void encode_value(Bytes& b, const Value& v) {
  b.raw<uint32_t>(static_cast<uint32_t>(v.type));
  encode_payload(b, v);
}

struct FileSink {
  std::FILE* f;
  std::string path;
  void write(const uint8_t* p, size_t n) {
    if (n != 0 && std::fwrite(p, 1, n, f) != n)
      throw IoError(errno_message("cannot write '" + path + "'"));
  }
};

struct MemorySink {
  std::vector<uint8_t> out;
  void write(const uint8_t* p, size_t n) {
    const size_t at = out.size();
    out.resize(at + n);
    if (n != 0) std::memcpy(out.data() + at, p, n);
  }
};

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    throw UsageError(fmt::format("GGUF alignment {} is not a power of two", alignment));
  }
  if (alignment != 32) set("general.alignment", Value::u32(alignment));
}

void GgufWriter::set(const std::string& key, Value value) {
  for (auto& kv : metadata_) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  metadata_.push_back({key, std::move(value)});
}

void GgufWriter::add_tensor(const std::string& name, TensorType type, std::vector<uint64_t> shape,
                            Fill fill) {
  if (shape.empty() || shape.size() > 4) {
    throw UsageError(fmt::format("tensor '{}': {} dimensions (must be 1..4)", name, shape.size()));
  }
  uint64_t elems = 1;
  for (uint64_t d : shape) {
    if (d == 0) throw UsageError(fmt::format("tensor '{}': zero-sized dimension", name));
    elems *= d;
  }
  const auto row = row_bytes(type, shape[0]);
  if (!row) {
    throw UsageError(fmt::format("tensor '{}': ne0 = {} is not a multiple of the {} block size {}",
                                 name, shape[0], tensor_type_name(type),
                                 tensor_type_info(type).block_elems));
  }
  const uint64_t bytes = *row * (elems / shape[0]);
  const uint64_t offset = *checked_align_up(data_bytes_, alignment_);
  tensors_.push_back({name, type, std::move(shape), bytes, offset, std::move(fill)});
  data_bytes_ = offset + bytes;
}

void GgufWriter::add_tensor_bytes(const std::string& name, TensorType type,
                                  std::vector<uint64_t> shape, std::vector<uint8_t> bytes) {
  auto data = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  const std::string label = name;
  add_tensor(name, type, std::move(shape), [data, label](uint8_t* dst, uint64_t n) {
    if (data->size() != n) {
      throw UsageError(
          fmt::format("tensor '{}': {} bytes given, {} expected", label, data->size(), n));
    }
    std::memcpy(dst, data->data(), n);
  });
}

uint64_t GgufWriter::tensor_data_bytes() const {
  return data_bytes_;
}

template <typename Sink>
void GgufWriter::emit(Sink& sink) const {
  Bytes head;
  head.raw<uint32_t>(0x46554747u);  // "GGUF"
  head.raw<uint32_t>(kVersion);
  head.raw<uint64_t>(tensors_.size());
  head.raw<uint64_t>(metadata_.size());
  for (const auto& kv : metadata_) {
    head.str(kv.key);
    encode_value(head, kv.value);
  }
  for (const auto& t : tensors_) {
    head.str(t.name);
    head.raw<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (uint64_t d : t.shape) head.raw<uint64_t>(d);
    head.raw<uint32_t>(static_cast<uint32_t>(t.type));
    head.raw<uint64_t>(t.offset);
  }
  head.out.resize(*checked_align_up(head.out.size(), alignment_), 0);
  sink.write(head.out.data(), head.out.size());

  std::vector<uint8_t> buf;
  const std::vector<uint8_t> zeros(alignment_, 0);
  uint64_t written = 0;
  for (const auto& t : tensors_) {
    sink.write(zeros.data(), t.offset - written);
    buf.assign(t.bytes, 0);
    t.fill(buf.data(), t.bytes);
    sink.write(buf.data(), buf.size());
    written = t.offset + t.bytes;
  }
  // Pad the end too, as llama.cpp's writer does, so the file size is aligned.
  sink.write(zeros.data(), *checked_align_up(written, alignment_) - written);
}

void GgufWriter::write_file(const std::string& path) const {
  // Unique per process, so two writers of the same path never share a temporary file.
  const std::string tmp = path + ".partial." + std::to_string(getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) throw IoError(errno_message("cannot create '" + tmp + "'"));
  FileSink sink{f, tmp};
  try {
    emit(sink);
  } catch (...) {
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  if (std::fflush(f) != 0 || fsync(fileno(f)) != 0) {
    const auto msg = errno_message("cannot write '" + tmp + "'");
    std::fclose(f);
    std::remove(tmp.c_str());
    throw IoError(msg);
  }
  std::fclose(f);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const auto msg = errno_message("cannot rename '" + tmp + "' to '" + path + "'");
    std::remove(tmp.c_str());
    throw IoError(msg);
  }
}

std::vector<uint8_t> GgufWriter::write_memory() const {
  MemorySink sink;
  emit(sink);
  return std::move(sink.out);
}

}  // namespace hearth::gguf
