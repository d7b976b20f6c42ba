#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>

#include "hearth/base/error.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/gguf/gguf_writer.h"
#include "support/scratch_dir.h"

namespace hearth::gguf {
namespace {

void expect_equal(const Value& a, const Value& b, const std::string& where) {
  ASSERT_EQ(a.type, b.type) << where;
  if (a.type == ValueType::kArray) {
    const auto& x = *a.as_array();
    const auto& y = *b.as_array();
    ASSERT_EQ(x.elem_type, y.elem_type) << where;
    ASSERT_EQ(x.items.size(), y.items.size()) << where;
    for (size_t i = 0; i < x.items.size(); ++i) expect_equal(x.items[i], y.items[i], where + "[]");
  } else if (a.type == ValueType::kF32 || a.type == ValueType::kF64) {
    EXPECT_EQ(*a.as_f64(), *b.as_f64()) << where;
  } else {
    EXPECT_TRUE(a.data == b.data) << where;
  }
}

TEST(GgufRoundTrip, EveryMetadataType) {
  GgufWriter w;
  std::vector<KeyValue> kvs = {
      {"u8", Value::u8(255)},
      {"i8", Value::i8(-128)},
      {"u16", Value::u16(65535)},
      {"i16", Value::i16(-32768)},
      {"u32", Value::u32(4000000000u)},
      {"i32", Value::i32(-2000000000)},
      {"f32", Value::f32(3.25f)},
      {"bool.t", Value::boolean(true)},
      {"bool.f", Value::boolean(false)},
      {"string", Value::string("héllo \xF0\x9F\x94\xA5")},
      {"string.empty", Value::string("")},
      {"u64", Value::u64(std::numeric_limits<uint64_t>::max())},
      {"i64", Value::i64(std::numeric_limits<int64_t>::min())},
      {"f64", Value::f64(-1e300)},
      {"array.f32", Value::array(ValueType::kF32, {Value::f32(1), Value::f32(-2.5f)})},
      {"array.string", Value::array(ValueType::kString, {Value::string("a"), Value::string("")})},
      {"array.empty", Value::array(ValueType::kI32, {})},
      {"array.nested",
       Value::array(ValueType::kArray, {Value::array(ValueType::kU8, {Value::u8(1), Value::u8(2)}),
                                        Value::array(ValueType::kU8, {})})},
      {"array.bool", Value::array(ValueType::kBool, {Value::boolean(true)})},
  };
  for (const auto& kv : kvs) w.set(kv.key, kv.value);
  const auto bytes = w.write_memory();
  const auto f = GgufFile::parse(bytes, "rt");
  ASSERT_EQ(f.metadata().size(), kvs.size());
  for (size_t i = 0; i < kvs.size(); ++i) {
    EXPECT_EQ(f.metadata()[i].key, kvs[i].key);
    expect_equal(f.metadata()[i].value, kvs[i].value, kvs[i].key);
  }
  EXPECT_EQ(f.get_i64("i8"), -128);
  EXPECT_EQ(f.get_u64("u32"), 4000000000u);
  EXPECT_EQ(f.get_f64("f32"), 3.25);
  EXPECT_EQ(f.get_bool("bool.t"), true);
  EXPECT_EQ(f.get_string_array("array.string"), (std::vector<std::string>{"a", ""}));
  EXPECT_EQ(f.get_f64_array("array.f32"), (std::vector<double>{1.0, -2.5}));
}

// Every tensor type this build knows: random bytes in, same bytes out at an aligned offset.
TEST(GgufRoundTrip, EveryTensorTypeAndAlignment) {
  for (uint32_t alignment : {32u, 64u, 4096u}) {
    GgufWriter w(alignment);
    std::mt19937 rng(alignment);
    std::vector<std::pair<std::string, std::vector<uint8_t>>> expected;
    for (uint32_t raw = 0; raw < 64; ++raw) {
      const auto info = tensor_type_info(raw);
      if (!info) continue;
      const uint64_t ne0 = info->block_elems * 2, ne1 = 3;
      std::vector<uint8_t> data(*row_bytes(info->type, ne0) * ne1);
      for (auto& b : data) b = static_cast<uint8_t>(rng());
      const std::string name = "t." + std::string(info->name);
      w.add_tensor_bytes(name, info->type, {ne0, ne1}, data);
      expected.emplace_back(name, std::move(data));
    }
    const auto bytes = w.write_memory();
    EXPECT_EQ(bytes.size() % alignment, 0u);
    const auto f = GgufFile::parse(bytes, "types");
    EXPECT_EQ(f.alignment(), alignment);
    ASSERT_EQ(f.tensors().size(), expected.size());
    for (const auto& [name, data] : expected) {
      const auto& t = f.tensor(name);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data - bytes.data() - f.data_offset()) % alignment,
                0u);
      ASSERT_EQ(t.bytes, data.size()) << name;
      EXPECT_EQ(0, std::memcmp(t.data, data.data(), data.size())) << name;
    }
  }
}

TEST(GgufRoundTrip, WriteFileIsAtomicAndMapsBack) {
  const auto dir = hearth::testing::scratch_dir() / ("hearth_gguf_rt_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / "model.gguf").string();
  GgufWriter w;
  w.set("general.name", Value::string("rt"));
  w.add_tensor("x", TensorType::kF32, {16, 4}, [](uint8_t* dst, uint64_t n) {
    for (uint64_t i = 0; i < n / 4; ++i) {
      const float v = static_cast<float>(i);
      std::memcpy(dst + 4 * i, &v, 4);
    }
  });
  w.write_file(path);
  auto no_partial_left = [&] {
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().string().find(".partial") != std::string::npos) return false;
    }
    return true;
  };
  EXPECT_TRUE(no_partial_left());
  const auto f = GgufFile::open(path);
  const auto& x = f.tensor("x");
  float last;
  std::memcpy(&last, x.data + x.bytes - 4, 4);
  EXPECT_EQ(last, 63.0f);

  // A failing fill leaves the existing file untouched.
  GgufWriter bad;
  bad.add_tensor("y", TensorType::kF32, {4}, [](uint8_t*, uint64_t) { throw IoError("boom"); });
  EXPECT_THROW(bad.write_file(path), IoError);
  EXPECT_NO_THROW((void)GgufFile::open(path).tensor("x"));
  EXPECT_TRUE(no_partial_left());
  std::filesystem::remove_all(dir);
}

TEST(GgufWriter, RejectsBadShapes) {
  GgufWriter w;
  EXPECT_THROW(w.add_tensor_bytes("q", TensorType::kQ4_K, {100}, {}), UsageError);
  EXPECT_THROW(w.add_tensor_bytes("z", TensorType::kF32, {0}, {}), UsageError);
  EXPECT_THROW(w.add_tensor_bytes("d", TensorType::kF32, {1, 1, 1, 1, 1}, {}), UsageError);
  EXPECT_THROW(GgufWriter(3), UsageError);
}

}  // namespace
}  // namespace hearth::gguf
