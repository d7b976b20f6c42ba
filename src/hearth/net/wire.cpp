#include "hearth/net/wire.h"

#include <algorithm>
#include <cstring>
#include <limits>

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

// Payload field layouts, one write_body / read_body pair per message type. The byte layout is
// documented in docs/wire-protocol.md; keep the two in step.

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

// Wire sizes of fixed-size elements, used to bound counts before allocating.
constexpr size_t kLayerRangeBytes = 8;
constexpr size_t kKvCommandBytes = 13;
constexpr size_t kSegmentBytes = 12;       // Activations segment: seq, pos0, n_tokens
constexpr size_t kMetricMinBytes = 4 + 8;  // empty key + value

void check_string(std::string_view type, std::string_view field, std::string_view s,
                  size_t max = kMaxStringBytes) {
  if (s.size() > max) {
    throw UsageError(fmt::format("wire encode {}.{}: string of {} bytes exceeds limit {}", type,
                                 field, s.size(), max));
  }
}

// ---- Hello / HelloAck

void write_hello(Writer& w, const Hello& m, std::string_view type) {
  check_string(type, "device_name", m.device_name);
  check_string(type, "data_endpoint", m.data_endpoint);
  if (m.protocol_version != kProtocolVersion) {
    throw UsageError(fmt::format("wire encode {}.protocol_version: {} is not this build's {}", type,
                                 m.protocol_version, kProtocolVersion));
  }
  w.u16(m.protocol_version);
  w.u64(m.model.file_size);
  w.u64(m.model.hash);
  w.u64(m.capabilities);
  w.str(m.device_name);
  w.str(m.data_endpoint);
}

void read_body(Reader& r, Hello& m) {
  m.protocol_version = r.u16("protocol_version");
  if (m.protocol_version != kProtocolVersion) {
    r.fail("protocol_version", fmt::format("peer speaks protocol {}, this build speaks {}",
                                           m.protocol_version, kProtocolVersion));
  }
  m.model.file_size = r.u64("model.file_size");
  m.model.hash = r.u64("model.hash");
  m.capabilities = r.u64("capabilities");
  m.device_name = r.str("device_name", kMaxStringBytes);
  m.data_endpoint = r.str("data_endpoint", kMaxStringBytes);
}

// ---- Assign

void check_windows(const Assign& m, auto&& fail) {
  if (m.n_devices == 0) fail("n_devices", "must be at least 1");
  if (m.ring_position >= m.n_devices) {
    fail("ring_position",
         fmt::format("{} is not below n_devices {}", m.ring_position, m.n_devices));
  }
  if (m.n_layers > kMaxLayers) {
    fail("n_layers", fmt::format("{} exceeds limit {}", m.n_layers, kMaxLayers));
  }
  if (m.n_seq_max == 0) fail("n_seq_max", "must be at least 1");
  uint32_t prev_end = 0;
  for (size_t i = 0; i < m.windows.size(); ++i) {
    const LayerRange& w = m.windows[i];
    if (w.begin > w.end || w.end > m.n_layers) {
      fail("windows", fmt::format("window {} is [{}, {}), not a range inside [0, {})", i, w.begin,
                                  w.end, m.n_layers));
    }
    if (w.begin == w.end) continue;
    if (w.begin < prev_end) {
      fail("windows", fmt::format("window {} [{}, {}) overlaps or precedes the previous one", i,
                                  w.begin, w.end));
    }
    prev_end = w.end;
  }
}

void write_body(Writer& w, const Assign& m) {
  check_windows(m, [](std::string_view field, const std::string& problem) {
    throw UsageError(fmt::format("wire encode Assign.{}: {}", field, problem));
  });
  if (m.windows.size() > kMaxLayers) {
    throw UsageError(fmt::format("wire encode Assign.windows: {} windows exceed limit {}",
                                 m.windows.size(), kMaxLayers));
  }
  check_string("Assign", "successor_endpoint", m.successor_endpoint);
  check_string("Assign", "wrap_endpoint", m.wrap_endpoint);
  w.u32(m.ring_position);
  w.u32(m.n_devices);
  w.u32(m.n_layers);
  w.u32(static_cast<uint32_t>(m.windows.size()));
  for (const LayerRange& r : m.windows) {
    w.u32(r.begin);
    w.u32(r.end);
  }
  w.str(m.successor_endpoint);
  w.str(m.wrap_endpoint);
  w.boolean(m.prefetch);
  w.u32(m.n_ctx);
  w.u32(m.n_threads);
  w.u32(m.n_seq_max);
  w.u32(m.n_gpu_layers);
  w.u8(m.kv_type_k);
  w.u8(m.kv_type_v);
}

void read_body(Reader& r, Assign& m) {
  m.ring_position = r.u32("ring_position");
  m.n_devices = r.u32("n_devices");
  m.n_layers = r.u32("n_layers");
  const uint32_t n = r.count("windows", kLayerRangeBytes, kMaxLayers);
  m.windows.resize(n);
  for (LayerRange& w : m.windows) {
    w.begin = r.u32("windows.begin");
    w.end = r.u32("windows.end");
  }
  m.successor_endpoint = r.str("successor_endpoint", kMaxStringBytes);
  m.wrap_endpoint = r.str("wrap_endpoint", kMaxStringBytes);
  m.prefetch = r.boolean("prefetch");
  m.n_ctx = r.u32("n_ctx");
  m.n_threads = r.u32("n_threads");
  m.n_seq_max = r.u32("n_seq_max");
  m.n_gpu_layers = r.u32("n_gpu_layers");
  m.kv_type_k = r.u8("kv_type_k");
  m.kv_type_v = r.u8("kv_type_v");
  if (m.kv_type_k > kMaxKvType)
    r.fail("kv_type_k", fmt::format("{} is not a KV cache type", m.kv_type_k));
  if (m.kv_type_v > kMaxKvType)
    r.fail("kv_type_v", fmt::format("{} is not a KV cache type", m.kv_type_v));
  check_windows(
      m, [&r](std::string_view field, const std::string& problem) { r.fail(field, problem); });
}

// ---- Activations

// Segments must be non-empty, not overflow u32 positions and name distinct sequences; returns
// the total rows, or reports the first problem through `fail`.
uint64_t check_segments(const std::vector<SeqSegment>& segs, auto&& fail) {
  if (segs.empty()) fail("segments", "empty batch");
  std::vector<uint32_t> seqs;
  seqs.reserve(segs.size());
  uint64_t rows = 0;
  for (size_t i = 0; i < segs.size(); ++i) {
    const SeqSegment& s = segs[i];
    if (s.n_tokens == 0)
      fail("segments", fmt::format("segment {} (seq {}) has no tokens", i, s.seq));
    // The sequence's length after the segment must still be a u32.
    if (uint64_t{s.pos0} + s.n_tokens > UINT32_MAX) {
      fail("segments", fmt::format("segment {} (seq {}): positions {} + {} overflow u32", i, s.seq,
                                   s.pos0, s.n_tokens));
    }
    seqs.push_back(s.seq);
    rows += s.n_tokens;
  }
  std::sort(seqs.begin(), seqs.end());
  const auto dup = std::adjacent_find(seqs.begin(), seqs.end());
  if (dup != seqs.end()) fail("segments", fmt::format("sequence {} appears twice", *dup));
  return rows;
}

void write_body(Writer& w, const Activations& m) {
  const auto fail = [](std::string_view field, const std::string& problem) {
    throw UsageError(fmt::format("wire encode Activations.{}: {}", field, problem));
  };
  if (m.dim == 0 || m.dim > kMaxHiddenDim) {
    fail("dim", fmt::format("{} not in [1, {}]", m.dim, kMaxHiddenDim));
  }
  if (m.segments.size() > kMaxSegments) {
    fail("segments", fmt::format("{} segments exceed limit {}", m.segments.size(), kMaxSegments));
  }
  const uint64_t n = check_segments(m.segments, fail);
  if (m.next_layer > kMaxLayers) {
    fail("next_layer", fmt::format("{} exceeds limit {}", m.next_layer, kMaxLayers));
  }
  if (m.hidden.size() / m.dim != n || m.hidden.size() % m.dim != 0) {
    fail("hidden", fmt::format("{} floats, expected {} x {}", m.hidden.size(), n, m.dim));
  }
  w.u32(m.round);
  w.u32(m.next_layer);
  w.boolean(m.final);
  w.u32(m.dim);
  w.u32(static_cast<uint32_t>(m.segments.size()));
  for (const SeqSegment& s : m.segments) {
    w.u32(s.seq);
    w.u32(s.pos0);
    w.u32(s.n_tokens);
  }
  w.f32_array(m.hidden);
}

void read_body(Reader& r, Activations& m) {
  m.round = r.u32("round");
  m.next_layer = r.u32("next_layer");
  if (m.next_layer > kMaxLayers) {
    r.fail("next_layer", fmt::format("{} exceeds limit {}", m.next_layer, kMaxLayers));
  }
  m.final = r.boolean("final");
  m.dim = r.u32("dim");
  if (m.dim == 0 || m.dim > kMaxHiddenDim) {
    r.fail("dim", fmt::format("{} not in [1, {}]", m.dim, kMaxHiddenDim));
  }
  const uint32_t n_seg = r.count("segments", kSegmentBytes, kMaxSegments);
  m.segments.resize(n_seg);
  for (SeqSegment& s : m.segments) {
    s.seq = r.u32("segments.seq");
    s.pos0 = r.u32("segments.pos0");
    s.n_tokens = r.u32("segments.n_tokens");
  }
  const uint64_t n = check_segments(
      m.segments,
      [&r](std::string_view field, const std::string& problem) { r.fail(field, problem); });
  // The rest of the payload must be exactly n rows of `dim` floats, checked before anything
  // is allocated. n can reach 2^48 (2^16 segments of 2^32 rows) and dim 2^20: the byte count
  // can overflow u64, hence the checked products.
  const auto total = checked_mul(checked_mul(n, uint64_t{m.dim}).value_or(UINT64_MAX), 4);
  if (!total || *total != r.remaining()) {
    r.fail("hidden", fmt::format("{} tokens of dim {} need {} bytes but {} remain", n, m.dim,
                                 total ? fmt::format("{}", *total) : std::string("overflowing"),
                                 r.remaining()));
  }
  r.f32_array("hidden", m.hidden, static_cast<size_t>(n) * m.dim);
}

// ---- KvControl

void check_kv(const KvCommand& c, size_t i, auto&& fail) {
  if (c.op == KvOp::kClear) {
    if (c.p0 != 0 || c.p1 != 0)
      fail("commands", fmt::format("command {}: clear with p0/p1 set", i));
  } else if (c.op == KvOp::kRemove) {
    if (c.p0 > c.p1) {
      fail("commands", fmt::format("command {}: remove range [{}, {}) is reversed", i, c.p0, c.p1));
    }
  } else {
    fail("commands", fmt::format("command {}: unknown op {}", i, static_cast<int>(c.op)));
  }
}

void write_body(Writer& w, const KvControl& m) {
  if (m.commands.size() > 1'000'000) throw UsageError("wire encode KvControl: too many commands");
  w.u32(static_cast<uint32_t>(m.commands.size()));
  for (size_t i = 0; i < m.commands.size(); ++i) {
    const KvCommand& c = m.commands[i];
    check_kv(c, i, [](std::string_view field, const std::string& problem) {
      throw UsageError(fmt::format("wire encode KvControl.{}: {}", field, problem));
    });
    w.u8(static_cast<uint8_t>(c.op));
    w.u32(c.seq_id);
    w.u32(c.p0);
    w.u32(c.p1);
  }
}

void read_body(Reader& r, KvControl& m) {
  const uint32_t n = r.count("commands", kKvCommandBytes, 1'000'000);
  m.commands.resize(n);
  for (size_t i = 0; i < n; ++i) {
    KvCommand& c = m.commands[i];
    c.op = static_cast<KvOp>(r.u8("commands.op"));
    c.seq_id = r.u32("commands.seq_id");
    c.p0 = r.u32("commands.p0");
    c.p1 = r.u32("commands.p1");
    check_kv(c, i,
             [&r](std::string_view field, const std::string& problem) { r.fail(field, problem); });
  }
}

// ---- Stats

constexpr uint32_t kMaxMetrics = 4096;
constexpr size_t kMaxMetricKey = 256;

void write_body(Writer& w, const Stats& m) {
  if (m.metrics.size() > kMaxMetrics) {
    throw UsageError(fmt::format("wire encode Stats: {} metrics exceed limit {}", m.metrics.size(),
                                 kMaxMetrics));
  }
  w.u32(m.device);
  w.u64(m.token);
  w.u32(static_cast<uint32_t>(m.metrics.size()));
  for (const Metric& x : m.metrics) {
    check_string("Stats", "metrics.key", x.key, kMaxMetricKey);
    w.str(x.key);
    w.f64(x.value);
  }
}

void read_body(Reader& r, Stats& m) {
  m.device = r.u32("device");
  m.token = r.u64("token");
  const uint32_t n = r.count("metrics", kMetricMinBytes, kMaxMetrics);
  m.metrics.resize(n);
  for (Metric& x : m.metrics) {
    x.key = r.str("metrics.key", kMaxMetricKey);
    x.value = r.f64("metrics.value");
  }
}

// ---- the small messages

void write_body(Writer& w, const Hello& m) {
  write_hello(w, m, "Hello");
}
void write_body(Writer& w, const HelloAck& m) {
  write_hello(w, m, "HelloAck");
}
void write_body(Writer& w, const Refuse& m) {
  check_string("Refuse", "reason", m.reason);
  w.str(m.reason);
}
void read_body(Reader& r, Refuse& m) {
  m.reason = r.str("reason", kMaxStringBytes);
}
void write_body(Writer& w, const Profile& m) {
  check_string("Profile", "json", m.json, max_payload_bytes(MsgType::kProfile) - 4);
  w.str(m.json);
}
void read_body(Reader& r, Profile& m) {
  m.json = r.str("json", max_payload_bytes(MsgType::kProfile));
}
void write_body(Writer&, const Load&) {}
void read_body(Reader&, Load&) {}
void write_body(Writer& w, const Ready& m) {
  w.f64(m.load_ms);
  w.u64(m.resident_bytes);
}
void read_body(Reader& r, Ready& m) {
  m.load_ms = r.f64("load_ms");
  m.resident_bytes = r.u64("resident_bytes");
}
void write_body(Writer& w, const Stop& m) {
  check_string("Stop", "reason", m.reason);
  w.str(m.reason);
}
void read_body(Reader& r, Stop& m) {
  m.reason = r.str("reason", kMaxStringBytes);
}
void write_body(Writer& w, const ErrorMsg& m) {
  check_string("Error", "text", m.text);
  w.str(m.text);
}
void read_body(Reader& r, ErrorMsg& m) {
  m.text = r.str("text", kMaxStringBytes);
}
// Pong is a Ping echoed back: both take these.
void write_body(Writer& w, const Ping& m) {
  w.u64(m.nonce);
  w.u64(m.send_ns);
}
void read_body(Reader& r, Ping& m) {
  m.nonce = r.u64("nonce");
  m.send_ns = r.u64("send_ns");
}

// ---- dispatch

// Message alternatives are in MsgType order (index + 1 == type), so the type picks the
// alternative to read; HelloAck and Pong read as the Hello and Ping they extend.
template <size_t I = 0>
Message read_payload(MsgType type, Reader& r) {
  if constexpr (I < std::variant_size_v<Message>) {
    if (static_cast<size_t>(type) != I + 1) return read_payload<I + 1>(type, r);
    std::variant_alternative_t<I, Message> m;
    read_body(r, m);
    return m;
  } else {
    // decode_header() admits only known types, so this is unreachable for checked headers.
    r.fail("type", "unknown message type");
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
      return 16 * kMiB;
    case MsgType::kAssign:
      return 6 * 4 + 4 + kLayerRangeBytes * uint64_t{kMaxLayers} + 4 + kMaxStringBytes + 1 + 4 * 4;
    case MsgType::kLoad:
      return 0;
    case MsgType::kReady:
      return 16;
    case MsgType::kActivations:
      return kMaxPayloadBytes;
    case MsgType::kKvControl:
      return 4 + kKvCommandBytes * 1'000'000;
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
  std::visit([&w](const auto& body) { write_body(w, body); }, m);
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
  env.body = read_payload(h.type, r);
  r.expect_end();
  return env;
}

}  // namespace hearth::net
