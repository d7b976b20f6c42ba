// Round trips of every wire message type, golden encodings, and the header layout.
#include "hearth/net/wire.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>

#include "hearth/base/error.h"
#include "hearth/net/crc32c.h"
#include "net/sample_messages.h"

namespace hearth::net {
namespace {

using testing::sample_messages;

std::string fixture_path(MsgType type) {
  return std::string(HEARTH_SOURCE_DIR) + "/tests/fixtures/wire/" +
         std::string(msg_type_name(type)) + ".bin";
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Crc32c, MatchesKnownCheckValues) {
  // The standard check value of CRC-32C: "123456789" -> 0xE3069283.
  const std::string s = "123456789";
  EXPECT_EQ(crc32c({reinterpret_cast<const uint8_t*>(s.data()), s.size()}), 0xE3069283u);
  // 32 zero bytes (RFC 3720 test vector).
  const std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  // Continuing a CRC over two halves equals one pass (the decoder relies on this).
  std::vector<uint8_t> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 3);
  const uint32_t whole = crc32c(data);
  const uint32_t split = crc32c(std::span(data).subspan(333), crc32c(std::span(data).first(333)));
  EXPECT_EQ(whole, split);
}

TEST(Crc32c, DispatchedPathMatchesPortableReference) {
  std::mt19937 rng(3);
  std::vector<uint8_t> data(5003);  // room for the largest length at the largest offset
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (size_t len : {0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 1000, 4999}) {
    for (size_t off : {0, 1, 3}) {
      const auto s = std::span(data).subspan(off, len);
      EXPECT_EQ(crc32c(s), crc32c_portable(s)) << len << " at " << off;
      EXPECT_EQ(crc32c(s, 0x12345678u), crc32c_portable(s, 0x12345678u));
    }
  }
}

TEST(Wire, SampleIndexMatchesType) {
  const auto msgs = sample_messages();
  ASSERT_EQ(msgs.size(), size_t{kMaxMsgType});
  for (size_t i = 0; i < msgs.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(type_of(msgs[i])), i + 1);
    EXPECT_NE(msg_type_name(type_of(msgs[i])), "Unknown");
  }
}

TEST(Wire, EveryTypeRoundTrips) {
  uint64_t id = 1;
  for (const Message& m : sample_messages()) {
    const auto bytes = encode(m, id);
    const Envelope env = decode(bytes, "test-peer");
    EXPECT_EQ(env.header.type, type_of(m));
    EXPECT_EQ(env.header.request_id, id);
    EXPECT_EQ(env.header.payload_len, bytes.size() - kHeaderBytes);
    EXPECT_TRUE(env.body == m) << msg_type_name(type_of(m));
    // Canonical: re-encoding the decoded message gives the same bytes.
    EXPECT_EQ(encode(env.body, id), bytes) << msg_type_name(type_of(m));
    ++id;
  }
}

TEST(Wire, HeaderLayoutIsLittleEndianAndDocumented) {
  const auto bytes = encode(Ping{0x0102030405060708ull, 9}, 0xA1A2A3A4A5A6A7A8ull);
  ASSERT_EQ(bytes.size(), kHeaderBytes + 16);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 4), "HRTH");
  EXPECT_EQ(bytes[4], kProtocolVersion & 0xFF);
  EXPECT_EQ(bytes[5], kProtocolVersion >> 8);
  EXPECT_EQ(bytes[6], static_cast<uint8_t>(MsgType::kPing));
  EXPECT_EQ(bytes[7], 0);
  for (int i = 8; i < 12; ++i) EXPECT_EQ(bytes[i], 0) << "flags byte " << i;
  EXPECT_EQ(bytes[16], 16);  // payload_len, little-endian
  for (int i = 17; i < 24; ++i) EXPECT_EQ(bytes[i], 0);
  EXPECT_EQ(bytes[24], 0xA8);  // request_id low byte first
  EXPECT_EQ(bytes[31], 0xA1);
  EXPECT_EQ(bytes[32], 0x08);  // Ping.nonce low byte first
  // The checksum field is the CRC-32C of the message with that field zeroed.
  std::vector<uint8_t> zeroed = bytes;
  for (int i = 12; i < 16; ++i) zeroed[i] = 0;
  const uint32_t crc = crc32c(zeroed);
  EXPECT_EQ(bytes[12] | bytes[13] << 8 | bytes[14] << 16 | uint32_t{bytes[15]} << 24, crc);
}

TEST(Wire, ActivationsKeepFloatBitsAndShape) {
  Activations a = testing::sample_activations(5, 16);
  a.final = true;
  const Envelope env = decode(encode(a), "p");
  const auto& b = std::get<Activations>(env.body);
  EXPECT_EQ(b.n_tokens(), 5u);
  EXPECT_EQ(b.hidden.size(), 5u * 16u);
  EXPECT_TRUE(b.final);
  ASSERT_EQ(b.segments.size(), 3u);  // 1 + 2 + 2 rows
  EXPECT_EQ(b.segments[2], (SeqSegment{24, 300, 2}));
  EXPECT_TRUE(a == b);
  // Payload size is exactly the documented layout: 17 fixed bytes + 12 per segment + 4 * dim
  // per row.
  EXPECT_EQ(env.header.payload_len, 17u + 3u * 12u + 5u * 4u * 16u);
}

TEST(Wire, EncoderRefusesMessagesThatBreakLimits) {
  Activations a = testing::sample_activations(2, 4);
  a.hidden.pop_back();
  EXPECT_THROW(encode(a), UsageError);
  a = testing::sample_activations(3, 4);
  a.segments[1].seq = a.segments[0].seq;  // one sequence twice
  EXPECT_THROW(encode(a), UsageError);
  a = testing::sample_activations(3, 4);
  a.segments[1].n_tokens = 0;
  EXPECT_THROW(encode(a), UsageError);
  a = testing::sample_activations(1, 4);
  a.segments[0].pos0 = UINT32_MAX;  // positions past u32
  EXPECT_THROW(encode(a), UsageError);
  a.segments[0].pos0 = 0;
  a.dim = 0;
  EXPECT_THROW(encode(a), UsageError);
  EXPECT_THROW(encode(Activations{}), UsageError);
  Assign bad;
  bad.n_layers = 10;
  bad.windows = {{4, 8}, {2, 3}};  // not ascending
  EXPECT_THROW(encode(bad), UsageError);
  bad.windows = {{4, 11}};  // past n_layers
  EXPECT_THROW(encode(bad), UsageError);
  EXPECT_THROW(encode(Refuse{std::string(kMaxStringBytes + 1, 'x')}), UsageError);
  KvControl kv;
  kv.commands = {{KvOp::kRemove, 1, 9, 3}};
  EXPECT_THROW(encode(kv), UsageError);
}

// The committed files pin the byte encoding: a change to the format that forgets to bump
// kProtocolVersion fails here. Regenerate with HEARTH_REGEN_WIRE_FIXTURES=1 after a bump.
TEST(Wire, GoldenEncodingsMatchCommittedFixtures) {
  const bool regen = std::getenv("HEARTH_REGEN_WIRE_FIXTURES") != nullptr;
  uint64_t id = 100;
  for (const Message& m : sample_messages()) {
    const auto bytes = encode(m, id++);
    const std::string path = fixture_path(type_of(m));
    if (regen) {
      std::ofstream(path, std::ios::binary)
          .write(reinterpret_cast<const char*>(bytes.data()),
                 static_cast<std::streamsize>(bytes.size()));
    }
    const auto golden = read_file(path);
    ASSERT_FALSE(golden.empty()) << "missing fixture " << path;
    EXPECT_EQ(golden, bytes) << path;
    EXPECT_TRUE(decode(golden, path).body == m) << path;
  }
}

}  // namespace
}  // namespace hearth::net
