// Little-endian field writer and bounds-checked reader used by wire.cpp. Internal to net/.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>

#include "hearth/base/error.h"

namespace hearth::net::detail {

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) { put_le(v, 2); }
  void u32(uint32_t v) { put_le(v, 4); }
  void u64(uint64_t v) { put_le(v, 8); }
  void f64(double v) { u64(std::bit_cast<uint64_t>(v)); }
  void boolean(bool v) { u8(v ? 1 : 0); }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void f32_array(std::span<const float> v) {
    if constexpr (std::endian::native == std::endian::little) {
      append_raw(v.data(), v.size_bytes());
    } else {
      for (float x : v) u32(std::bit_cast<uint32_t>(x));
    }
  }

 private:
  void put_le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void append_raw(const void* p, size_t n) {
    const size_t at = out_.size();
    out_.resize(at + n);
    if (n > 0) std::memcpy(out_.data() + at, p, n);
  }
  std::vector<uint8_t>& out_;
};

// Reads fields of one payload; every read checks the remaining length first and throws a
// FormatError naming the peer, the message type and the field.
class Reader {
 public:
  Reader(std::span<const uint8_t> bytes, std::string_view peer, std::string_view type)
      : bytes_(bytes), peer_(peer), type_(type) {}

  [[noreturn]] void fail(std::string_view field, std::string_view problem) const {
    throw FormatError(fmt::format("wire message from {}: {}.{}: {} (payload offset {} of {})",
                                  peer_, type_, field, problem, pos_, bytes_.size()));
  }

  size_t remaining() const { return bytes_.size() - pos_; }

  uint8_t u8(std::string_view field) { return static_cast<uint8_t>(get_le(field, 1)); }
  uint16_t u16(std::string_view field) { return static_cast<uint16_t>(get_le(field, 2)); }
  uint32_t u32(std::string_view field) { return static_cast<uint32_t>(get_le(field, 4)); }
  uint64_t u64(std::string_view field) { return get_le(field, 8); }
  double f64(std::string_view field) { return std::bit_cast<double>(get_le(field, 8)); }
  bool boolean(std::string_view field) {
    const uint8_t v = u8(field);
    if (v > 1) fail(field, fmt::format("boolean byte is {}, must be 0 or 1", v));
    return v == 1;
  }
  std::string str(std::string_view field, size_t max_len) {
    const uint32_t n = u32(field);
    if (n > max_len) fail(field, fmt::format("string length {} exceeds limit {}", n, max_len));
    need(field, n);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  // Reads an element count and checks that `count * min_elem_bytes` bytes actually follow,
  // so a huge count cannot make the decoder allocate memory the sender never sent.
  uint32_t count(std::string_view field, size_t min_elem_bytes, uint32_t max_count) {
    const uint32_t n = u32(field);
    if (n > max_count) fail(field, fmt::format("count {} exceeds limit {}", n, max_count));
    if (min_elem_bytes > 0 && n > remaining() / min_elem_bytes) {
      fail(field, fmt::format("count {} needs at least {} bytes but only {} remain", n,
                              uint64_t{n} * min_elem_bytes, remaining()));
    }
    return n;
  }
  void f32_array(std::string_view field, std::vector<float>& out, size_t n) {
    need(field, n * 4);
    out.resize(n);
    if constexpr (std::endian::native == std::endian::little) {
      if (n > 0) std::memcpy(out.data(), bytes_.data() + pos_, n * 4);
      pos_ += n * 4;
    } else {
      for (auto& x : out) x = std::bit_cast<float>(u32(field));
    }
  }
  void expect_end() const {
    if (pos_ != bytes_.size()) {
      fail("(end)", fmt::format("{} trailing bytes after the last field", remaining()));
    }
  }

 private:
  void need(std::string_view field, size_t n) const {
    if (n > remaining()) {
      fail(field, fmt::format("needs {} bytes but only {} remain (truncated)", n, remaining()));
    }
  }
  uint64_t get_le(std::string_view field, int n) {
    need(field, static_cast<size_t>(n));
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{bytes_[pos_ + i]} << (8 * i);
    pos_ += static_cast<size_t>(n);
    return v;
  }

  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
  std::string_view peer_;
  std::string_view type_;
};

}  // namespace hearth::net::detail
