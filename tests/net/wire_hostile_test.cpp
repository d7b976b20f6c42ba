// Hostile and broken messages: every one must be refused with a FormatError that names the
// peer and the field, and nothing else may happen (no crash, no other exception, no huge
// allocation). The same cases run under ASan+UBSan (label "sanitize").
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include "hearth/base/error.h"
#include "hearth/net/crc32c.h"
#include "hearth/net/wire.h"
#include "hearth/net/wire_codec.h"
#include "net/sample_messages.h"

namespace hearth::net {
namespace {

// Builds a message with a valid header and checksum around an arbitrary payload, so the
// payload decoder itself is what is tested.
std::vector<uint8_t> frame(MsgType type, const std::vector<uint8_t>& payload,
                           uint16_t version = kProtocolVersion, uint32_t flags = 0) {
  std::vector<uint8_t> out;
  detail::Writer w(out);
  w.u32(kMagic);
  w.u16(version);
  w.u16(static_cast<uint16_t>(type));
  w.u32(flags);
  w.u32(0);
  w.u64(payload.size());
  w.u64(0);
  out.insert(out.end(), payload.begin(), payload.end());
  const uint32_t crc = crc32c(out);
  for (int i = 0; i < 4; ++i) out[12 + i] = static_cast<uint8_t>(crc >> (8 * i));
  return out;
}

// Rewrites the checksum after a test edited the bytes.
void reseal(std::vector<uint8_t>& m) {
  for (int i = 12; i < 16; ++i) m[i] = 0;
  const uint32_t crc = crc32c(m);
  for (int i = 0; i < 4; ++i) m[12 + i] = static_cast<uint8_t>(crc >> (8 * i));
}

// Decoding must throw FormatError whose text contains every one of `needles`.
void expect_refused(const std::vector<uint8_t>& bytes, std::initializer_list<std::string> needles,
                    const std::string& what) {
  try {
    decode(bytes, "peer-7");
    ADD_FAILURE() << what << ": decoded without error";
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("peer-7"), std::string::npos) << what << ": " << msg;
    for (const auto& n : needles) {
      EXPECT_NE(msg.find(n), std::string::npos) << what << ": '" << n << "' not in: " << msg;
    }
  }
}

std::vector<uint8_t> payload(auto&& fill) {
  std::vector<uint8_t> p;
  detail::Writer w(p);
  fill(w);
  return p;
}

TEST(WireHostile, TruncatedAtEveryByteOfEveryMessage) {
  for (const Message& m : testing::sample_messages()) {
    const auto bytes = encode(m, 5);
    for (size_t len = 0; len < bytes.size(); ++len) {
      const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(len));
      expect_refused(cut, {"truncated"},
                     std::string(msg_type_name(type_of(m))) + " cut at " + std::to_string(len));
    }
  }
}

TEST(WireHostile, TrailingBytesAfterTheDeclaredPayload) {
  auto bytes = encode(Ping{1, 2});
  bytes.push_back(0);
  expect_refused(bytes, {"payload_len", "declares 16"}, "one extra byte");
}

TEST(WireHostile, WrongMagicVersionTypeFlags) {
  const auto good = encode(Ping{1, 2});
  auto m = good;
  m[0] = 'G';
  expect_refused(m, {"magic", "not a hearth peer"}, "magic");
  m = good;
  m[4] = kProtocolVersion + 1;
  reseal(m);
  expect_refused(m, {"version", "protocol " + std::to_string(kProtocolVersion + 1)}, "version");
  for (uint16_t t : {0, kMaxMsgType + 1, 0xFFFF}) {
    m = good;
    m[6] = static_cast<uint8_t>(t);
    m[7] = static_cast<uint8_t>(t >> 8);
    reseal(m);
    expect_refused(m, {"header.type", "unknown message type"}, "type " + std::to_string(t));
  }
  m = good;
  m[11] = 0x80;
  reseal(m);
  expect_refused(m, {"flags"}, "flags");
}

TEST(WireHostile, OversizedLengths) {
  // Over the global cap, on the biggest type.
  auto m = encode(testing::sample_activations(1, 4));
  const uint64_t huge = kMaxPayloadBytes + 1;
  for (int i = 0; i < 8; ++i) m[16 + i] = static_cast<uint8_t>(huge >> (8 * i));
  expect_refused(m, {"payload_len", "exceeds"}, "1 GiB + 1");
  for (int i = 0; i < 8; ++i) m[16 + i] = 0xFF;
  expect_refused(m, {"payload_len", "exceeds"}, "2^64 - 1");
  // Over a small type's own cap, even though far below 1 GiB.
  m = encode(Ping{1, 2});
  m[16] = 17;
  expect_refused(m, {"payload_len", "Ping limit of 16"}, "Ping 17");
  m = encode(Load{});
  m[16] = 1;
  expect_refused(m, {"payload_len", "Load limit of 0"}, "Load 1");
}

TEST(WireHostile, CorruptedPayloadFailsTheChecksum) {
  const auto good = encode(testing::sample_activations(2, 8));
  for (size_t pos : {kHeaderBytes, kHeaderBytes + 20, good.size() - 1}) {
    auto m = good;
    m[pos] ^= 0x10;
    expect_refused(m, {"crc32c", "corrupted"}, "flip at " + std::to_string(pos));
  }
  auto m = good;
  m[25] ^= 1;  // request_id is covered too
  expect_refused(m, {"crc32c"}, "request id flip");
}

TEST(WireHostile, HugeCountsInsidePayloads) {
  // Counts claiming billions of elements must be refused before anything is allocated.
  expect_refused(frame(MsgType::kAssign,
                       payload([](auto& w) { w.u32(0), w.u32(2), w.u32(32), w.u32(0xFFFFFFFF); })),
                 {"Assign.windows", "count 4294967295"}, "assign windows");
  expect_refused(
      frame(MsgType::kAssign, payload([](auto& w) { w.u32(0), w.u32(2), w.u32(32), w.u32(1000); })),
      {"Assign.windows", "needs at least 8000 bytes"}, "assign windows short");
  expect_refused(frame(MsgType::kKvControl, payload([](auto& w) { w.u32(900'000); })),
                 {"KvControl.commands", "needs at least"}, "kv count");
  expect_refused(
      frame(MsgType::kStats, payload([](auto& w) { w.u32(0), w.u64(0), w.u32(0xFFFFFFFF); })),
      {"Stats.metrics", "exceeds limit"}, "stats count");
  // Segment count against the bytes left, then the rows the segments declare against the
  // bytes left, including counts whose byte size overflows u64.
  expect_refused(frame(MsgType::kActivations, payload([](auto& w) {
                         w.u32(0), w.u32(0), w.u8(0), w.u32(4096), w.u32(0xFFFF);
                         w.u32(1);
                       })),
                 {"Activations.segments", "needs at least"}, "activations segments short");
  expect_refused(frame(MsgType::kActivations, payload([](auto& w) {
                         w.u32(0), w.u32(0), w.u8(0), w.u32(4096), w.u32(0xFFFFFFFF);
                       })),
                 {"Activations.segments", "exceeds limit"}, "activations segments huge");
  expect_refused(frame(MsgType::kActivations, payload([](auto& w) {
                         w.u32(0), w.u32(0), w.u8(0), w.u32(4096), w.u32(1);
                         w.u32(3), w.u32(0xFFFFFFF0), w.u32(0x10);
                         w.u32(1);
                       })),
                 {"Activations.segments", "overflow"}, "activations positions overflow");
  expect_refused(frame(MsgType::kActivations, payload([](auto& w) {
                         w.u32(0), w.u32(0), w.u8(0), w.u32(4096), w.u32(1);
                         w.u32(3), w.u32(0), w.u32(0x7FFFFFFF);
                         w.u32(1);
                       })),
                 {"Activations.hidden", "need"}, "activations rows vs bytes");
  expect_refused(frame(MsgType::kActivations, payload([](auto& w) {
                         w.u32(0), w.u32(0), w.u8(0), w.u32(kMaxHiddenDim), w.u32(kMaxSegments);
                         for (uint32_t i = 0; i < kMaxSegments; ++i) {
                           w.u32(i), w.u32(0), w.u32(0xFFFFFFFE);
                         }
                       })),
                 {"Activations.hidden", "overflowing"}, "activations row bytes past u64");
  expect_refused(frame(MsgType::kActivations, payload([](auto& w) {
                         w.u32(0), w.u32(0), w.u8(0), w.u32(0xFFFFFFFF), w.u32(1);
                       })),
                 {"Activations.dim"}, "activations dim");
  expect_refused(frame(MsgType::kRefuse, payload([](auto& w) { w.u32(0xFFFFFFF0); })),
                 {"Refuse.reason", "exceeds limit"}, "string length");
  expect_refused(frame(MsgType::kRefuse, payload([](auto& w) { w.u32(100), w.u8('x'); })),
                 {"Refuse.reason", "truncated"}, "string short");
}

TEST(WireHostile, InvalidFieldValues) {
  auto assign = [](uint32_t pos, uint32_t n_dev, uint32_t n_layers,
                   std::vector<std::pair<uint32_t, uint32_t>> win, uint8_t prefetch,
                   uint32_t seq_max, uint8_t kv_k = 1, uint8_t kv_v = 1) {
    return frame(MsgType::kAssign, payload([&](auto& w) {
                   w.u32(pos), w.u32(n_dev), w.u32(n_layers);
                   w.u32(static_cast<uint32_t>(win.size()));
                   for (auto [b, e] : win) w.u32(b), w.u32(e);
                   w.str("tcp://x:1"), w.str(""), w.u8(prefetch), w.u32(512), w.u32(4),
                       w.u32(seq_max), w.u32(0), w.u8(kv_k), w.u8(kv_v);
                 }));
  };
  // A valid baseline, so each failure below is caused by the one bad field.
  EXPECT_NO_THROW(decode(assign(1, 2, 8, {{0, 4}, {4, 8}}, 1, 1), "p"));
  expect_refused(assign(2, 2, 8, {{0, 4}}, 1, 1), {"ring_position"}, "position");
  expect_refused(assign(0, 0, 8, {{0, 4}}, 1, 1), {"n_devices"}, "devices");
  expect_refused(assign(0, 1, 8, {{4, 2}}, 1, 1), {"windows"}, "reversed");
  expect_refused(assign(0, 1, 8, {{0, 9}}, 1, 1), {"windows"}, "past the end");
  expect_refused(assign(0, 1, 8, {{0, 4}, {3, 6}}, 1, 1), {"windows", "overlaps"}, "overlap");
  expect_refused(assign(0, 1, 8, {{0, 4}}, 2, 1), {"prefetch", "boolean"}, "bool byte");
  expect_refused(assign(0, 1, 8, {{0, 4}}, 1, 0), {"n_seq_max"}, "seq max");
  expect_refused(assign(0, 1, kMaxLayers + 1, {}, 1, 1), {"n_layers"}, "layers");
  EXPECT_NO_THROW(decode(assign(0, 1, 8, {{0, 4}}, 1, 1, 0, 3), "p"));
  expect_refused(assign(0, 1, 8, {{0, 4}}, 1, 1, 4, 1), {"kv_type_k", "not a KV cache type"},
                 "kv type k");
  expect_refused(assign(0, 1, 8, {{0, 4}}, 1, 1, 1, 255), {"kv_type_v"}, "kv type v");

  expect_refused(frame(MsgType::kKvControl,
                       payload([](auto& w) { w.u32(1), w.u8(9), w.u32(0), w.u32(0), w.u32(0); })),
                 {"commands", "unknown op 9"}, "kv op");
  expect_refused(frame(MsgType::kKvControl,
                       payload([](auto& w) { w.u32(1), w.u8(2), w.u32(0), w.u32(8), w.u32(3); })),
                 {"commands", "reversed"}, "kv range");
  expect_refused(frame(MsgType::kActivations,
                       payload([](auto& w) { w.u32(0), w.u32(0), w.u8(0), w.u32(4), w.u32(0); })),
                 {"segments", "empty"}, "empty batch");
  auto two_segments = [](uint32_t seq_a, uint32_t n_a, uint32_t seq_b, uint32_t n_b) {
    return frame(MsgType::kActivations, payload([&](auto& w) {
                   w.u32(0), w.u32(0), w.u8(0), w.u32(2), w.u32(2);
                   w.u32(seq_a), w.u32(0), w.u32(n_a);
                   w.u32(seq_b), w.u32(5), w.u32(n_b);
                   for (uint32_t i = 0; i < 2 * (n_a + n_b); ++i) w.u32(0x3F000000);  // 0.5f
                 }));
  };
  EXPECT_NO_THROW(decode(two_segments(1, 1, 2, 3), "p"));
  expect_refused(two_segments(4, 1, 4, 3), {"Activations.segments", "sequence 4 appears twice"},
                 "duplicate seq");
  expect_refused(two_segments(1, 0, 2, 3), {"Activations.segments", "no tokens"}, "empty segment");
  expect_refused(frame(MsgType::kHello, payload([](auto& w) {
                         w.u16(kProtocolVersion + 3), w.u64(0), w.u64(0), w.u64(0), w.str(""),
                             w.str("");
                       })),
                 {"Hello.protocol_version", "protocol " + std::to_string(kProtocolVersion + 3)},
                 "hello version");
}

// Every byte string must either decode or throw FormatError; the random inputs include
// ones with a valid header and checksum, so the payload decoders are reached.
TEST(WireHostile, RandomBytesNeverEscapeAsAnythingButFormatError) {
  std::mt19937_64 rng(1234);
  const auto samples = testing::sample_messages();
  size_t decoded = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> m;
    if (iter % 2 == 0) {
      m.resize(rng() % 96);
      for (auto& b : m) b = static_cast<uint8_t>(rng());
    } else {
      // Mutate a valid message, then fix up length and checksum so decoding goes deep.
      m = encode(samples[rng() % samples.size()], iter);
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips && m.size() > kHeaderBytes; ++f) {
        m[kHeaderBytes + rng() % (m.size() - kHeaderBytes)] = static_cast<uint8_t>(rng());
      }
      if (rng() % 4 == 0) m.resize(kHeaderBytes + rng() % (m.size() - kHeaderBytes + 8));
      const uint64_t len = m.size() - kHeaderBytes;
      for (int i = 0; i < 8; ++i) m[16 + i] = static_cast<uint8_t>(len >> (8 * i));
      reseal(m);
    }
    try {
      const Envelope env = decode(m, "fuzz");
      ++decoded;
      EXPECT_EQ(encode(env.body, env.header.request_id), m) << "non-canonical decode";
    } catch (const FormatError&) {
    }
  }
  // Some mutations (e.g. inside float data or strings) stay valid: the deep path ran.
  EXPECT_GT(decoded, 100u);
}

// Handcrafted bad inputs committed as files (tests/fixtures/wire/bad_*.bin), each listed
// with a piece of the expected error in bad_inputs.txt.
TEST(WireHostile, CommittedBadInputsAreRefused) {
  const std::string dir = std::string(HEARTH_SOURCE_DIR) + "/tests/fixtures/wire/";
  std::ifstream list(dir + "bad_inputs.txt");
  ASSERT_TRUE(list) << "missing " << dir << "bad_inputs.txt";
  std::string line;
  int n = 0;
  while (std::getline(list, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.find(' ');
    ASSERT_NE(space, std::string::npos) << line;
    const std::string file = line.substr(0, space);
    const std::string needle = line.substr(space + 1);
    std::ifstream in(dir + file, std::ios::binary);
    ASSERT_TRUE(in) << file;
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in),
                                     std::istreambuf_iterator<char>()};
    expect_refused(bytes, {needle}, file);
    ++n;
  }
  EXPECT_GE(n, 8);
}

}  // namespace
}  // namespace hearth::net
