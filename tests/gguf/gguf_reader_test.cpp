#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "gguf/corrupt_files.h"
#include "hearth/base/error.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/gguf/gguf_writer.h"

namespace hearth::gguf {
namespace {

TEST(GgufReader, BaseFixtureIsValid) {
  const auto bytes = testing::build_base({});
  const auto f = GgufFile::parse(bytes, "base");
  EXPECT_EQ(f.version(), 3u);
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_u64("test.count"), 7u);
  const auto& b = f.tensor("b");
  EXPECT_EQ(b.shape, (std::vector<uint64_t>{4, 2}));
  EXPECT_EQ(b.bytes, 32u);
  EXPECT_EQ(b.data, bytes.data() + f.data_offset() + 32);
}

TEST(GgufReader, EveryCorruptionIsRejectedWithItsReason) {
  const auto corruptions = testing::corrupt_files();
  ASSERT_GE(corruptions.size(), 30u);
  for (const auto& c : corruptions) {
    try {
      (void)GgufFile::parse(c.bytes, c.name);
      ADD_FAILURE() << c.name << ": accepted";
    } catch (const FormatError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(c.expect), std::string::npos) << c.name << ": message was: " << msg;
      EXPECT_NE(msg.find(c.name), std::string::npos)
          << c.name << ": message does not name the file";
      EXPECT_NE(msg.find("byte"), std::string::npos) << c.name << ": no byte offset: " << msg;
    }
  }
}

TEST(GgufReader, EveryTruncationOfAValidFileFailsCleanly) {
  GgufWriter w;
  w.set("a.string", Value::string("hello"));
  w.set("a.array", Value::array(ValueType::kString, {Value::string("x"), Value::string("yz")}));
  std::vector<uint8_t> data(64 * 4, 1);
  w.add_tensor_bytes("t", TensorType::kF32, {64}, data);
  const auto bytes = w.write_memory();
  for (size_t n = 0; n + 1 < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    EXPECT_THROW((void)GgufFile::parse(cut, "cut"), FormatError) << "length " << n;
  }
}

TEST(GgufReader, RandomByteFlipsNeverCrash) {
  const auto base = testing::build_base({});
  std::mt19937 rng(1234);
  int rejected = 0;
  for (int i = 0; i < 20000; ++i) {
    auto b = base;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) b[rng() % b.size()] = static_cast<uint8_t>(rng());
    try {
      const auto f = GgufFile::parse(b, "flip");
      for (const auto& t : f.tensors()) {
        ASSERT_GE(t.data, b.data());
        ASSERT_LE(t.data + t.bytes, b.data() + b.size());
      }
    } catch (const FormatError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
}

TEST(GgufReader, OpenReportsMissingFile) {
  try {
    (void)GgufFile::open("/nonexistent/model.gguf");
    FAIL() << "opened a missing file";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf"), std::string::npos);
  }
}

TEST(GgufReader, OpenRefusesDirectory) {
  EXPECT_THROW((void)GgufFile::open("/tmp"), IoError);
}

TEST(GgufReader, TypedGettersRejectWrongTypes) {
  const auto f = GgufFile::parse(testing::build_base({}), "base");
  EXPECT_THROW((void)f.get_u64("general.architecture"), FormatError);
  EXPECT_THROW((void)f.get_string("test.count"), FormatError);
  EXPECT_THROW((void)f.get_string_array("test.count"), FormatError);
  EXPECT_EQ(f.get_string("missing"), std::nullopt);
  EXPECT_THROW((void)f.tensor("missing"), FormatError);
}

}  // namespace
}  // namespace hearth::gguf
