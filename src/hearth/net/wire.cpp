#include "hearth/net/wire.h"

#include <algorithm>
#include <concepts>
#include <cstring>
#include <limits>
#include <type_traits>

#include <fmt/core.h>

#include "hearth/base/checked_math.h"
#include "hearth/base/enum_names.h"
#include "hearth/base/error.h"
#include "hearth/net/crc32c.h"
#include "hearth/net/wire_codec.h"

namespace hearth::net {

using detail::Reader;
using detail::Writer;

namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

// Wire sizes of fixed-size elements, used to bound counts before allocating.
constexpr size_t kLayerRangeBytes = 8;
constexpr size_t kKvCommandBytes = 13;
constexpr size_t kSegmentBytes = 12;       // Activations segment: seq, pos0, n_tokens
constexpr size_t kMetricMinBytes = 4 + 8;  // empty key + value

constexpr uint32_t kMaxKvCommands = 1'000'000;
constexpr uint32_t kMaxMetrics = 4096;
constexpr size_t kMaxMetricKey = 256;
constexpr size_t kMaxProfileJson = 16 * kMiB - 4;  // the whole Profile payload is this string

// ---- the two directions
//
// Each message's payload layout is written once, as a fields(io, m) function below, and run
// by two Ios: Encoder writes the fields of a const message, Decoder reads them into an empty
// one. Writing and reading therefore cannot disagree on the order or the types of the
// fields, and a check in fields() refuses a bad message at the sender (UsageError: the
// sender's bug is reported where it is made) as well as at the receiver (FormatError naming
// the peer and the payload offset). Checks are placed right after the fields they look at,
// so the decoder refuses before reading (or allocating for) anything that follows.
// docs/wire-protocol.md documents the layouts.

class Encoder {
 public:
  Encoder(Writer& w, std::string_view type) : w_(w), type_(type) {}

  [[noreturn]] void fail(std::string_view field, std::string_view problem) const {
    throw UsageError(fmt::format("wire encode {}.{}: {}", type_, field, problem));
  }

  void u8(std::string_view, uint8_t v) { w_.u8(v); }
  template <class E>
  requires std::is_enum_v<E>
  void u8(std::string_view, E v) { w_.u8(static_cast<uint8_t>(v)); }
  void u32(std::string_view, uint32_t v) { w_.u32(v); }
  void u64(std::string_view, uint64_t v) { w_.u64(v); }
  void f64(std::string_view, double v) { w_.f64(v); }
  void boolean(std::string_view, bool v) { w_.boolean(v); }
  void str(std::string_view field, std::string_view s, size_t max_len) {
    if (s.size() > max_len) {
      fail(field, fmt::format("string of {} bytes exceeds limit {}", s.size(), max_len));
    }
    w_.str(s);
  }
  // A u16 that must be this build's protocol version.
  void version(std::string_view field, uint16_t v) {
    if (v != kProtocolVersion) {
      fail(field, fmt::format("{} is not this build's {}", v, kProtocolVersion));
    }
    w_.u16(v);
  }
  // The u32 element count of `v`, whose elements the caller then lists.
  template <class T>
  void count(std::string_view field, const std::vector<T>& v, size_t /*min_elem_bytes*/,
             uint32_t max_count) {
    if (v.size() > max_count) {
      fail(field, fmt::format("{} {} exceed limit {}", v.size(), field, max_count));
    }
    w_.u32(static_cast<uint32_t>(v.size()));
  }
  // The last field of a payload: `rows` rows of `dim` f32 (dim >= 1).
  void trailing_f32_rows(std::string_view field, std::span<const float> v, uint64_t rows,
                         uint32_t dim) {
    if (v.size() / dim != rows || v.size() % dim != 0) {
      fail(field, fmt::format("{} floats, expected {} x {}", v.size(), rows, dim));
    }
    w_.f32_array(v);
  }

 private:
  Writer& w_;
  std::string_view type_;
};

class Decoder {
 public:
  explicit Decoder(Reader& r) : r_(r) {}

  [[noreturn]] void fail(std::string_view field, std::string_view problem) const {
    r_.fail(field, problem);
  }

  void u8(std::string_view field, uint8_t& v) { v = r_.u8(field); }
  template <class E>
  requires std::is_enum_v<E>
  void u8(std::string_view field, E& v) { v = static_cast<E>(r_.u8(field)); }
  void u32(std::string_view field, uint32_t& v) { v = r_.u32(field); }
  void u64(std::string_view field, uint64_t& v) { v = r_.u64(field); }
  void f64(std::string_view field, double& v) { v = r_.f64(field); }
  void boolean(std::string_view field, bool& v) { v = r_.boolean(field); }
  void str(std::string_view field, std::string& s, size_t max_len) { s = r_.str(field, max_len); }
  void version(std::string_view field, uint16_t& v) {
    v = r_.u16(field);
    if (v != kProtocolVersion) {
      fail(field,
           fmt::format("peer speaks protocol {}, this build speaks {}", v, kProtocolVersion));
    }
  }
  // Sizes `v` to the count read, once the bytes of that many elements are known to follow.
  template <class T>
  void count(std::string_view field, std::vector<T>& v, size_t min_elem_bytes, uint32_t max_count) {
    v.resize(r_.count(field, min_elem_bytes, max_count));
  }
  void trailing_f32_rows(std::string_view field, std::vector<float>& v, uint64_t rows,
                         uint32_t dim) {
    // The rest of the payload must be exactly `rows` rows of `dim` floats, checked before
    // anything is allocated. Activations' rows can reach 2^48 (2^16 segments of 2^32 rows)
    // and dim 2^20: the byte count can overflow u64, hence the checked products.
    const auto total = checked_mul(checked_mul(rows, uint64_t{dim}).value_or(UINT64_MAX), 4);
    if (!total || *total != r_.remaining()) {
      fail(field, fmt::format("{} tokens of dim {} need {} bytes but {} remain", rows, dim,
                              total ? fmt::format("{}", *total) : std::string("overflowing"),
                              r_.remaining()));
    }
    r_.f32_array(field, v, static_cast<size_t>(rows) * dim);
  }

 private:
  Reader& r_;
};

// `Is<Hello> auto& m` takes a Hello or what extends it (HelloAck), const (to encode) or not
// (to decode).
template <class M, class T>
concept Is = std::derived_from<std::remove_const_t<M>, T>;

// ---- Hello / HelloAck

void fields(auto& io, Is<Hello> auto& m) {
  io.version("protocol_version", m.protocol_version);
  io.u64("model.file_size", m.model.file_size);
  io.u64("model.hash", m.model.hash);
  io.u64("capabilities", m.capabilities);
  io.str("device_name", m.device_name, kMaxStringBytes);
  io.str("data_endpoint", m.data_endpoint, kMaxStringBytes);
}

// ---- Assign

void check_windows(const Assign& m, const auto& io) {
  if (m.n_devices == 0) io.fail("n_devices", "must be at least 1");
  if (m.ring_position >= m.n_devices) {
    io.fail("ring_position",
            fmt::format("{} is not below n_devices {}", m.ring_position, m.n_devices));
  }
  if (m.n_layers > kMaxLayers) {
    io.fail("n_layers", fmt::format("{} exceeds limit {}", m.n_layers, kMaxLayers));
  }
  if (m.n_seq_max == 0) io.fail("n_seq_max", "must be at least 1");
  uint32_t prev_end = 0;
  for (size_t i = 0; i < m.windows.size(); ++i) {
    const LayerRange& w = m.windows[i];
    if (w.begin > w.end || w.end > m.n_layers) {
      io.fail("windows", fmt::format("window {} is [{}, {}), not a range inside [0, {})", i,
                                     w.begin, w.end, m.n_layers));
    }
    if (w.begin == w.end) continue;
    if (w.begin < prev_end) {
      io.fail("windows", fmt::format("window {} [{}, {}) overlaps or precedes the previous one", i,
                                     w.begin, w.end));
    }
    prev_end = w.end;
  }
}

void fields(auto& io, Is<Assign> auto& m) {
  io.u32("ring_position", m.ring_position);
  io.u32("n_devices", m.n_devices);
  io.u32("n_layers", m.n_layers);
  io.count("windows", m.windows, kLayerRangeBytes, kMaxLayers);
  for (auto& w : m.windows) {
    io.u32("windows.begin", w.begin);
    io.u32("windows.end", w.end);
  }
  io.str("successor_endpoint", m.successor_endpoint, kMaxStringBytes);
  io.str("wrap_endpoint", m.wrap_endpoint, kMaxStringBytes);
  io.boolean("prefetch", m.prefetch);
  io.u32("n_ctx", m.n_ctx);
  io.u32("n_threads", m.n_threads);
  io.u32("n_seq_max", m.n_seq_max);
  io.u32("n_gpu_layers", m.n_gpu_layers);
  io.u8("kv_type_k", m.kv_type_k);
  io.u8("kv_type_v", m.kv_type_v);
  if (m.kv_type_k > kMaxKvType) {
    io.fail("kv_type_k", fmt::format("{} is not a KV cache type", m.kv_type_k));
  }
  if (m.kv_type_v > kMaxKvType) {
    io.fail("kv_type_v", fmt::format("{} is not a KV cache type", m.kv_type_v));
  }
  check_windows(m, io);
}

// ---- Activations

// Segments must be non-empty, not overflow u32 positions and name distinct sequences; returns
// the total rows, or reports the first problem through `io`.
uint64_t check_segments(const std::vector<SeqSegment>& segs, const auto& io) {
  if (segs.empty()) io.fail("segments", "empty batch");
  std::vector<uint32_t> seqs;
  seqs.reserve(segs.size());
  uint64_t rows = 0;
  for (size_t i = 0; i < segs.size(); ++i) {
    const SeqSegment& s = segs[i];
    if (s.n_tokens == 0)
      io.fail("segments", fmt::format("segment {} (seq {}) has no tokens", i, s.seq));
    // The sequence's length after the segment must still be a u32.
    if (uint64_t{s.pos0} + s.n_tokens > UINT32_MAX) {
      io.fail("segments", fmt::format("segment {} (seq {}): positions {} + {} overflow u32", i,
                                      s.seq, s.pos0, s.n_tokens));
    }
    seqs.push_back(s.seq);
    rows += s.n_tokens;
  }
  std::sort(seqs.begin(), seqs.end());
  const auto dup = std::adjacent_find(seqs.begin(), seqs.end());
  if (dup != seqs.end()) io.fail("segments", fmt::format("sequence {} appears twice", *dup));
  return rows;
}

void fields(auto& io, Is<Activations> auto& m) {
  io.u32("round", m.round);
  io.u32("next_layer", m.next_layer);
  if (m.next_layer > kMaxLayers) {
    io.fail("next_layer", fmt::format("{} exceeds limit {}", m.next_layer, kMaxLayers));
  }
  io.boolean("final", m.final);
  io.u32("dim", m.dim);
  if (m.dim == 0 || m.dim > kMaxHiddenDim) {
    io.fail("dim", fmt::format("{} not in [1, {}]", m.dim, kMaxHiddenDim));
  }
  io.count("segments", m.segments, kSegmentBytes, kMaxSegments);
  for (auto& s : m.segments) {
    io.u32("segments.seq", s.seq);
    io.u32("segments.pos0", s.pos0);
    io.u32("segments.n_tokens", s.n_tokens);
  }
  const uint64_t rows = check_segments(m.segments, io);
  io.trailing_f32_rows("hidden", m.hidden, rows, m.dim);
}

// ---- KvControl

void check_kv(const KvCommand& c, size_t i, const auto& io) {
  if (c.op == KvOp::kClear) {
    if (c.p0 != 0 || c.p1 != 0)
      io.fail("commands", fmt::format("command {}: clear with p0/p1 set", i));
  } else if (c.op == KvOp::kRemove) {
    if (c.p0 > c.p1) {
      io.fail("commands",
              fmt::format("command {}: remove range [{}, {}) is reversed", i, c.p0, c.p1));
    }
  } else {
    io.fail("commands", fmt::format("command {}: unknown op {}", i, static_cast<int>(c.op)));
  }
}

void fields(auto& io, Is<KvControl> auto& m) {
  io.count("commands", m.commands, kKvCommandBytes, kMaxKvCommands);
  for (size_t i = 0; i < m.commands.size(); ++i) {
    auto& c = m.commands[i];
    io.u8("commands.op", c.op);
    io.u32("commands.seq_id", c.seq_id);
    io.u32("commands.p0", c.p0);
    io.u32("commands.p1", c.p1);
    check_kv(c, i, io);
  }
}

// ---- Stats

void fields(auto& io, Is<Stats> auto& m) {
  io.u32("device", m.device);
  io.u64("token", m.token);
  io.count("metrics", m.metrics, kMetricMinBytes, kMaxMetrics);
  for (auto& x : m.metrics) {
    io.str("metrics.key", x.key, kMaxMetricKey);
    io.f64("metrics.value", x.value);
  }
}

// ---- the small messages

void fields(auto& io, Is<Refuse> auto& m) {
  io.str("reason", m.reason, kMaxStringBytes);
}
void fields(auto& io, Is<Profile> auto& m) {
  io.str("json", m.json, kMaxProfileJson);
}
void fields(auto&, Is<Load> auto&) {}
void fields(auto& io, Is<Ready> auto& m) {
  io.f64("load_ms", m.load_ms);
  io.u64("resident_bytes", m.resident_bytes);
}
void fields(auto& io, Is<Stop> auto& m) {
  io.str("reason", m.reason, kMaxStringBytes);
}
void fields(auto& io, Is<ErrorMsg> auto& m) {
  io.str("text", m.text, kMaxStringBytes);
}
// Pong is a Ping echoed back: both take these.
void fields(auto& io, Is<Ping> auto& m) {
  io.u64("nonce", m.nonce);
  io.u64("send_ns", m.send_ns);
}

// ---- dispatch

// Message alternatives are in MsgType order (index + 1 == type), so the type picks the
// alternative to read.
template <size_t I = 0>
Message read_payload(MsgType type, Decoder& in) {
  if constexpr (I < std::variant_size_v<Message>) {
    if (static_cast<size_t>(type) != I + 1) return read_payload<I + 1>(type, in);
    std::variant_alternative_t<I, Message> m;
    fields(in, m);
    return m;
  } else {
    // decode_header() admits only known types, so this is unreachable for checked headers.
    in.fail("type", "unknown message type");
  }
}

void put_u32_at(std::vector<uint8_t>& out, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

uint32_t get_le32(std::span<const uint8_t> b, size_t at) {
  return uint32_t{b[at]} | uint32_t{b[at + 1]} << 8 | uint32_t{b[at + 2]} << 16 |
         uint32_t{b[at + 3]} << 24;
}
uint16_t get_le16(std::span<const uint8_t> b, size_t at) {
  return static_cast<uint16_t>(b[at] | b[at + 1] << 8);
}
uint64_t get_le64(std::span<const uint8_t> b, size_t at) {
  return uint64_t{get_le32(b, at)} | uint64_t{get_le32(b, at + 4)} << 32;
}

bool bits_equal(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

}  // namespace

std::string_view msg_type_name(MsgType type) {
  static constexpr EnumName<MsgType> kNames[] = {
      {MsgType::kHello, "Hello"},         {MsgType::kHelloAck, "HelloAck"},
      {MsgType::kRefuse, "Refuse"},       {MsgType::kProfile, "Profile"},
      {MsgType::kAssign, "Assign"},       {MsgType::kLoad, "Load"},
      {MsgType::kReady, "Ready"},         {MsgType::kActivations, "Activations"},
      {MsgType::kKvControl, "KvControl"}, {MsgType::kStats, "Stats"},
      {MsgType::kStop, "Stop"},           {MsgType::kError, "Error"},
      {MsgType::kPing, "Ping"},           {MsgType::kPong, "Pong"}};
  return enum_name(kNames, type, "Unknown");
}

uint64_t max_payload_bytes(MsgType type) {
  switch (type) {
    case MsgType::kHello:
    case MsgType::kHelloAck:
      return 2 * (4 + kMaxStringBytes) + 2 + 3 * 8;
    case MsgType::kRefuse:
    case MsgType::kStop:
    case MsgType::kError:
      return 4 + kMaxStringBytes;
    case MsgType::kProfile:
      return 4 + kMaxProfileJson;
    case MsgType::kAssign:
      return 6 * 4 + 4 + kLayerRangeBytes * uint64_t{kMaxLayers} + 4 + kMaxStringBytes + 1 + 4 * 4;
    case MsgType::kLoad:
      return 0;
    case MsgType::kReady:
      return 16;
    case MsgType::kActivations:
      return kMaxPayloadBytes;
    case MsgType::kKvControl:
      return 4 + kKvCommandBytes * uint64_t{kMaxKvCommands};
    case MsgType::kStats:
      return 4 + 8 + 4 + uint64_t{kMaxMetrics} * (4 + kMaxMetricKey + 8);
    case MsgType::kPing:
    case MsgType::kPong:
      return 16;
  }
  return 0;
}

size_t Activations::n_tokens() const {
  size_t n = 0;
  for (const SeqSegment& s : segments) n += s.n_tokens;
  return n;
}

bool Activations::operator==(const Activations& o) const {
  if (round != o.round || next_layer != o.next_layer || final != o.final || dim != o.dim ||
      segments != o.segments || hidden.size() != o.hidden.size()) {
    return false;
  }
  for (size_t i = 0; i < hidden.size(); ++i) {
    if (!bits_equal(hidden[i], o.hidden[i])) return false;
  }
  return true;
}

bool Metric::operator==(const Metric& o) const {
  return key == o.key && std::bit_cast<uint64_t>(value) == std::bit_cast<uint64_t>(o.value);
}

MsgType type_of(const Message& m) {
  return static_cast<MsgType>(m.index() + 1);
}

std::vector<uint8_t> encode(const Message& m, uint64_t request_id) {
  const MsgType type = type_of(m);
  std::vector<uint8_t> out;
  size_t hint = kHeaderBytes;
  if (const auto* a = std::get_if<Activations>(&m)) {
    hint += 17 + a->segments.size() * kSegmentBytes + a->hidden.size() * 4;
  }
  out.reserve(hint);
  Writer w(out);
  w.u32(kMagic);
  w.u16(kProtocolVersion);
  w.u16(static_cast<uint16_t>(type));
  w.u32(0);  // flags
  w.u32(0);  // crc, filled below
  w.u64(0);  // payload_len, filled below
  w.u64(request_id);
  Encoder encoder(w, msg_type_name(type));
  std::visit([&encoder](const auto& body) { fields(encoder, body); }, m);
  const uint64_t payload_len = out.size() - kHeaderBytes;
  if (payload_len > max_payload_bytes(type)) {
    throw UsageError(fmt::format("wire encode {}: payload of {} bytes exceeds limit {}",
                                 msg_type_name(type), payload_len, max_payload_bytes(type)));
  }
  for (int i = 0; i < 8; ++i) out[16 + i] = static_cast<uint8_t>(payload_len >> (8 * i));
  put_u32_at(out, 12, crc32c(out));
  return out;
}

Header decode_header(std::span<const uint8_t> bytes, std::string_view peer) {
  const auto fail = [&](std::string_view field, const std::string& problem) {
    throw FormatError(fmt::format("wire message from {}: header.{}: {}", peer, field, problem));
  };
  if (bytes.size() < kHeaderBytes) {
    fail("(size)", fmt::format("{} bytes is shorter than the {}-byte header (truncated)",
                               bytes.size(), kHeaderBytes));
  }
  const uint32_t magic = get_le32(bytes, 0);
  if (magic != kMagic) {
    fail("magic",
         fmt::format("0x{:08x} is not \"HRTH\" (0x{:08x}); not a hearth peer", magic, kMagic));
  }
  Header h;
  h.version = get_le16(bytes, 4);
  if (h.version != kProtocolVersion) {
    fail("version",
         fmt::format("peer speaks protocol {}, this build speaks {}", h.version, kProtocolVersion));
  }
  const uint16_t type = get_le16(bytes, 6);
  if (type == 0 || type > kMaxMsgType) fail("type", fmt::format("unknown message type {}", type));
  h.type = static_cast<MsgType>(type);
  h.flags = get_le32(bytes, 8);
  if (h.flags != 0) {
    fail("flags", fmt::format("0x{:08x} has bits this protocol version does not define", h.flags));
  }
  h.crc = get_le32(bytes, 12);
  h.payload_len = get_le64(bytes, 16);
  h.request_id = get_le64(bytes, 24);
  const uint64_t limit = std::min(max_payload_bytes(h.type), kMaxPayloadBytes);
  if (h.payload_len > limit) {
    fail("payload_len", fmt::format("{} bytes exceeds the {} limit of {} bytes", h.payload_len,
                                    msg_type_name(h.type), limit));
  }
  return h;
}

Envelope decode(std::span<const uint8_t> bytes, std::string_view peer) {
  Envelope env;
  env.header = decode_header(bytes, peer);
  const Header& h = env.header;
  const std::string_view type = msg_type_name(h.type);
  // payload_len is already bounded by 1 GiB, so the sum cannot overflow.
  if (bytes.size() != kHeaderBytes + h.payload_len) {
    throw FormatError(fmt::format(
        "wire message from {}: {} header.payload_len: declares {} payload bytes but {} arrived{}",
        peer, type, h.payload_len, bytes.size() - kHeaderBytes,
        bytes.size() < kHeaderBytes + h.payload_len ? " (truncated)" : ""));
  }
  // The checksum covers the header with its crc field zeroed, then the payload.
  std::array<uint8_t, kHeaderBytes> head;
  std::memcpy(head.data(), bytes.data(), kHeaderBytes);
  std::memset(head.data() + 12, 0, 4);
  const uint32_t crc = crc32c(bytes.subspan(kHeaderBytes), crc32c(head));
  if (crc != h.crc) {
    throw FormatError(fmt::format(
        "wire message from {}: {} header.crc32c: 0x{:08x} but the message sums to 0x{:08x} "
        "(corrupted)",
        peer, type, h.crc, crc));
  }
  Reader r(bytes.subspan(kHeaderBytes), peer, type);
  Decoder decoder(r);
  env.body = read_payload(h.type, decoder);
  r.expect_end();
  return env;
}

}  // namespace hearth::net
