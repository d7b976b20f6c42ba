// Handcrafted corrupt GGUF files: each is a small valid file with one thing broken. Shared by
// the reader unit test, the CLI test and the fuzzer's seed corpus.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace hearth::testing {

// Builds GGUF bytes field by field, so a test can write anything, valid or not.
struct RawGguf {
  std::vector<uint8_t> b;
  template <typename T>
  RawGguf& raw(T v) {
    const size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
    return *this;
  }
  RawGguf& str(const std::string& s) {
    raw<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  RawGguf& pad_to(size_t align) {
    while (b.size() % align != 0) b.push_back(0);
    return *this;
  }
  RawGguf& zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
};

struct Corruption {
  std::string name;
  std::vector<uint8_t> bytes;
  std::string expect;  // a substring the error message must contain
};

// Knobs of the base file: two f32 tensors "a" (8 floats) and "b" (4x2 floats), one u32 and
// one string metadata key.
struct BaseSpec {
  uint32_t magic = 0x46554747;
  uint32_t version = 3;
  uint64_t n_tensors = 2;
  uint64_t n_kv = 2;
  std::string key0 = "general.architecture";
  uint32_t key0_type = 8;  // string
  std::string key0_value = "llama";
  std::string key1 = "test.count";
  uint32_t key1_type = 4;  // u32
  uint32_t key1_value = 7;
  std::string name_a = "a";
  std::string name_b = "b";
  uint32_t dims_a = 1;
  uint64_t ne_a = 8;
  uint32_t type_a = 0;
  uint64_t off_a = 0;
  uint64_t off_b = 32;
  uint64_t ne_b1 = 2;
  size_t data_bytes = 64;
};

inline std::vector<uint8_t> build_base(const BaseSpec& s) {
  RawGguf g;
  g.raw(s.magic).raw(s.version).raw(s.n_tensors).raw(s.n_kv);
  g.str(s.key0).raw(s.key0_type).str(s.key0_value);
  g.str(s.key1).raw(s.key1_type).raw(s.key1_value);
  g.str(s.name_a).raw(s.dims_a);
  for (uint32_t d = 0; d < s.dims_a && d < 8; ++d) g.raw<uint64_t>(d == 0 ? s.ne_a : 1);
  g.raw(s.type_a).raw(s.off_a);
  g.str(s.name_b).raw<uint32_t>(2).raw<uint64_t>(4).raw<uint64_t>(s.ne_b1).raw<uint32_t>(0).raw(
      s.off_b);
  g.pad_to(32);
  g.zeros(s.data_bytes);
  return g.b;
}

// A header that starts like the base file but replaces the first metadata value.
inline std::vector<uint8_t> with_first_value(const std::vector<uint8_t>& value_bytes,
                                             uint32_t type) {
  RawGguf g;
  g.raw<uint32_t>(0x46554747).raw<uint32_t>(3).raw<uint64_t>(0).raw<uint64_t>(1);
  g.str("k").raw(type);
  g.b.insert(g.b.end(), value_bytes.begin(), value_bytes.end());
  return g.b;
}

inline std::vector<Corruption> corrupt_files() {
  std::vector<Corruption> out;
  auto add = [&](std::string name, std::vector<uint8_t> bytes, std::string expect) {
    out.push_back({std::move(name), std::move(bytes), std::move(expect)});
  };
  auto spec = [](auto mutate) {
    BaseSpec s;
    mutate(s);
    return build_base(s);
  };
  const auto base = build_base(BaseSpec{});
  auto truncated = [&](size_t n) { return std::vector<uint8_t>(base.begin(), base.begin() + n); };

  add("empty", {}, "magic");
  add("truncated_magic", truncated(2), "truncated");
  add("bad_magic", spec([](BaseSpec& s) { s.magic = 0x46554746; }), "not a GGUF file");
  add("big_endian", spec([](BaseSpec& s) { s.version = 0x03000000; }), "big-endian");
  add("version_1", spec([](BaseSpec& s) { s.version = 1; }), "v1");
  add("version_99", spec([](BaseSpec& s) { s.version = 99; }), "unknown version");
  add("truncated_tensor_count", truncated(12), "tensor_count");
  add("truncated_kv_count", truncated(20), "metadata_kv_count");
  add("huge_kv_count", spec([](BaseSpec& s) { s.n_kv = ~0ull; }), "metadata_kv_count");
  add("huge_tensor_count", spec([](BaseSpec& s) { s.n_tensors = 1ull << 40; }), "tensor_count");
  // The third "key" is read from the tensor table, so the tensor table starts inside a tensor.
  add("kv_count_past_end", spec([](BaseSpec& s) { s.n_kv = 3; }), "tensor[0]");
  // Counts that cannot fit in what is left are refused before anything is allocated.
  add("truncated_key_length", truncated(28), "cannot fit");
  {
    auto b = base;
    const uint64_t huge = 1ull << 62;
    std::memcpy(b.data() + 24, &huge, 8);
    add("huge_key_length", b, "exceeds the limit");
  }
  add("truncated_key", truncated(24 + 8 + 5), "cannot fit");
  add("empty_key", spec([](BaseSpec& s) { s.key0 = ""; }), "empty key");
  add("unknown_value_type", spec([](BaseSpec& s) { s.key0_type = 13; }), "unknown value type");
  add("type_past_end", spec([](BaseSpec& s) { s.key1_type = 0xffffffffu; }), "unknown value type");
  {
    // Cut inside the u32 value of the second key.
    const size_t at = 24 + 8 + 20 + 4 + 8 + 5 + 8 + 10 + 4 + 2;
    add("truncated_value", truncated(at), "test.count");
  }
  {
    RawGguf v;
    v.raw<uint64_t>(1ull << 40);
    add("huge_string_value", with_first_value(v.b, 8), "exceeds the limit");
  }
  {
    RawGguf v;
    v.raw<uint64_t>(100).raw<uint32_t>(0);
    add("string_value_past_end", with_first_value(v.b, 8), "truncated");
  }
  {
    RawGguf v;
    v.raw<uint32_t>(77).raw<uint64_t>(1);
    add("array_unknown_elem_type", with_first_value(v.b, 9), "unknown array element type");
  }
  {
    RawGguf v;
    v.raw<uint32_t>(6).raw<uint64_t>(1ull << 60);
    add("array_huge_count", with_first_value(v.b, 9), "array length");
  }
  {
    RawGguf v;
    v.raw<uint32_t>(6).raw<uint64_t>(1000).raw<float>(1.0f);
    add("array_count_past_end", with_first_value(v.b, 9), "cannot fit");
  }
  {
    RawGguf v;
    for (int i = 0; i < 12; ++i) v.raw<uint32_t>(9).raw<uint64_t>(1);
    v.raw<uint32_t>(0).raw<uint64_t>(0);
    add("array_nested_too_deep", with_first_value(v.b, 9), "nested too deeply");
  }
  {
    RawGguf v;
    v.raw<uint8_t>(2);
    add("bool_not_0_or_1", with_first_value(v.b, 7), "bool value 2");
  }
  add("duplicate_key", spec([](BaseSpec& s) {
        s.key1 = s.key0;
        s.key1_type = 8;
      }),
      "duplicate key");
  {
    // general.alignment = 48 (not a power of two) as the u32 key.
    add("alignment_not_power_of_two", spec([](BaseSpec& s) {
          s.key1 = "general.alignment";
          s.key1_value = 48;
        }),
        "power of two");
    add("alignment_zero", spec([](BaseSpec& s) {
          s.key1 = "general.alignment";
          s.key1_value = 0;
        }),
        "power of two");
    add("alignment_wrong_type", spec([](BaseSpec& s) {
          s.key0 = "general.alignment";
          s.key1 = "x";
        }),
        "must be a u32");
  }
  add("tensor_zero_dims", spec([](BaseSpec& s) { s.dims_a = 0; }), "dimensions");
  add("tensor_five_dims", spec([](BaseSpec& s) { s.dims_a = 5; }), "dimensions");
  add("tensor_zero_dim", spec([](BaseSpec& s) { s.ne_a = 0; }), "zero-sized");
  add("tensor_dims_overflow", spec([](BaseSpec& s) { s.ne_b1 = 1ull << 62; }), "overflows");
  add("tensor_unknown_type", spec([](BaseSpec& s) { s.type_a = 31; }), "unknown tensor type");
  add("tensor_type_huge", spec([](BaseSpec& s) { s.type_a = 0x7fffffff; }), "unknown tensor type");
  add("tensor_ne0_not_block_multiple", spec([](BaseSpec& s) {
        s.type_a = 12;
        s.ne_a = 100;
      }),
      "block size");
  add("tensor_offset_unaligned", spec([](BaseSpec& s) { s.off_b = 33; }), "not aligned");
  add("tensor_past_end", spec([](BaseSpec& s) { s.off_b = 64; }), "past its end");
  add("tensor_offset_huge", spec([](BaseSpec& s) { s.off_b = ~0ull - 31; }), "past its end");
  add("tensors_overlap", spec([](BaseSpec& s) { s.ne_a = 16; }), "overlaps");
  add("tensors_same_offset", spec([](BaseSpec& s) { s.off_b = 0; }), "overlaps");
  add("duplicate_tensor_name", spec([](BaseSpec& s) { s.name_b = "a"; }), "duplicate tensor name");
  add("empty_tensor_name", spec([](BaseSpec& s) { s.name_a = ""; }), "empty name");
  add("data_truncated", truncated(base.size() - 40), "past its end");
  add("header_only", spec([](BaseSpec& s) { s.data_bytes = 0; }), "past");
  {
    // Cut at every byte inside the tensor table: each must fail, never crash.
    const size_t table_start = 24 + 8 + 20 + 4 + 8 + 5 + 8 + 10 + 4 + 4;
    add("truncated_tensor_name", truncated(table_start + 4), "cannot fit");
    add("truncated_tensor_dims", truncated(table_start + 9 + 2), "cannot fit");
    add("truncated_tensor_offset", truncated(table_start + 9 + 4 + 8 + 4 + 3), "offset");
  }
  return out;
}

}  // namespace hearth::testing
