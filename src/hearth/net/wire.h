// Versioned wire messages of the ring (control plane and data plane). docs/wire-protocol.md
// is the reference; this header is its code.
//
// Every message is a fixed 32-byte header followed by a typed payload, all little-endian and
// encoded field by field (never a memcpy of a padded struct):
//
//   off size field
//     0    4 magic        "HRTH" (bytes 48 52 54 48)
//     4    2 version      kProtocolVersion; a different version is refused, not guessed at
//     6    2 type         MsgType
//     8    4 flags        no bits are defined in version 1; a set bit is refused
//    12    4 crc32c       CRC-32C over header (with this field zeroed) + payload
//    16    8 payload_len  <= kMaxPayloadBytes and <= the per-type limit
//    24    8 request_id   correlates replies and ring steps; opaque to the codec
//
// Goals: a hostile or broken peer can never make the decoder read out of bounds, allocate
// more than the bytes it actually sent, or crash; every error names the peer, the message
// type and the field. Decoding is canonical: decode(encode(m)) == m and a message that
// decodes re-encodes to the same bytes (the fuzz target checks this).
// Non-goals: compatibility between protocol versions (all devices run the same build).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace hearth::net {

inline constexpr uint32_t kMagic = 0x48545248u;  // "HRTH" read as a little-endian u32
inline constexpr uint16_t kProtocolVersion = 4;  // 4: Assign carries the KV cache types
inline constexpr size_t kHeaderBytes = 32;
inline constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 30;  // 1 GiB, any type
inline constexpr size_t kMaxStringBytes = 64 * 1024;             // any string field
inline constexpr uint32_t kMaxHiddenDim = 1u << 20;              // Activations.dim
inline constexpr uint8_t kMaxKvType = 3;  // Assign.kv_type_*: compute::KvType::kQ4_0
inline constexpr uint32_t kMaxLayers = 1u << 16;                 // layer indices and ranges
inline constexpr uint32_t kMaxSegments = 1u << 16;               // Activations.segments

enum class MsgType : uint16_t {
  kHello = 1,        // head -> worker: who I am and which model I run
  kHelloAck = 2,     // worker -> head: the same facts about the worker, plus its data address
  kRefuse = 3,       // either way: handshake refused (reason)
  kProfile = 4,      // worker -> head: device profile, opaque JSON
  kAssign = 5,       // head -> worker: layer windows, ring position, successor
  kLoad = 6,         // head -> worker: map the model and warm the first window
  kReady = 7,        // worker -> head: loaded
  kActivations = 8,  // data plane: hidden states of a batch of tokens
  kKvControl = 9,    // head -> worker: clear / trim KV cache of sequences
  kStats = 10,       // worker -> head: per-token metrics
  kStop = 11,        // head -> worker: end the session
  kError = 12,       // either way: fatal error text
  kPing = 13,
  kPong = 14,
};
inline constexpr uint16_t kMaxMsgType = 14;

std::string_view msg_type_name(MsgType type);
// Largest payload a message of this type may declare (the transport uses the largest of all
// types to set its socket limit).
uint64_t max_payload_bytes(MsgType type);

struct Header {
  uint16_t version = kProtocolVersion;
  MsgType type = MsgType::kPing;
  uint32_t flags = 0;
  uint32_t crc = 0;
  uint64_t payload_len = 0;
  uint64_t request_id = 0;
};

// Identity of a model file: every device must run the same one.
struct ModelIdentity {
  uint64_t file_size = 0;
  uint64_t hash = 0;  // 64-bit hash of the GGUF header and tensor table
  bool operator==(const ModelIdentity&) const = default;
};

// Capability bits in Hello.capabilities.
inline constexpr uint64_t kCapPrefetch = 1u << 0;  // can prefetch its next window
inline constexpr uint64_t kCapGpu = 1u << 1;       // has a GPU backend
inline constexpr uint64_t kCapBatching = 1u << 2;  // Activations with several sequences
inline constexpr uint64_t kCapCurve = 1u << 3;     // CURVE encryption configured

struct Hello {
  uint16_t protocol_version = kProtocolVersion;
  ModelIdentity model;
  uint64_t capabilities = 0;
  std::string device_name;
  std::string data_endpoint;  // where this device's data-plane inbox listens ("" for none)
  bool operator==(const Hello&) const = default;
};

// The worker's answer carries the same facts about itself.
struct HelloAck : Hello {
  bool operator==(const HelloAck&) const = default;
};

struct Refuse {
  std::string reason;
  bool operator==(const Refuse&) const = default;
};

struct Profile {
  std::string json;  // opaque to the wire layer (profile/ owns the schema)
  bool operator==(const Profile&) const = default;
};

// Half-open layer range [begin, end).
struct LayerRange {
  uint32_t begin = 0;
  uint32_t end = 0;
  bool operator==(const LayerRange&) const = default;
};

struct Assign {
  uint32_t ring_position = 0;       // 0 = head
  uint32_t n_devices = 1;           // ring size
  uint32_t n_layers = 0;            // layers of the model, to check the windows against
  std::vector<LayerRange> windows;  // (n_rounds) this device's window per round, ascending;
                                    // an empty range means no layers in that round
  std::string successor_endpoint;   // where to send Activations after our window
  // The last device only: where a hidden state that goes on to another round goes when the
  // head has no layers (the first worker's inbox, so the head's hop is paid once per token,
  // not once per round). Empty: back to the head, which forwards it.
  std::string wrap_endpoint;
  bool prefetch = true;
  uint32_t n_ctx = 0;
  uint32_t n_threads = 0;
  uint32_t n_seq_max = 1;  // sequences the KV cache must hold (continuous batching)
  uint32_t n_gpu_layers = 0;
  // KV cache element types of K and V (compute::KvType: 0 f32, 1 f16, 2 q8_0, 3 q4_0); every
  // device of a ring uses the head's, so a sequence's results do not depend on the plan.
  uint8_t kv_type_k = 1;
  uint8_t kv_type_v = 1;
  bool operator==(const Assign&) const = default;
};

struct Load {
  bool operator==(const Load&) const = default;
};

struct Ready {
  double load_ms = 0;
  uint64_t resident_bytes = 0;
  bool operator==(const Ready&) const = default;
};

// One sequence's rows inside an Activations batch: n_tokens consecutive rows at positions
// pos0 .. pos0 + n_tokens - 1 of sequence `seq`.
struct SeqSegment {
  uint32_t seq = 0;
  uint32_t pos0 = 0;
  uint32_t n_tokens = 0;  // >= 1; pos0 + n_tokens <= 2^32 - 1
  bool operator==(const SeqSegment&) const = default;
};

// A batch of tokens' hidden states travelling the ring: one continuous-batching step. Rows
// are stacked segment after segment; each sequence appears in at most one segment.
struct Activations {
  uint32_t round = 0;                // round index the receiver continues in
  uint32_t next_layer = 0;           // first layer the receiver computes
  bool final = false;                // true: the hidden state after the last layer, for the head
  uint32_t dim = 0;                  // hidden size e
  std::vector<SeqSegment> segments;  // (n_segments) in row order
  std::vector<float> hidden;         // (n_tokens, dim) f32, row-major
  size_t n_tokens() const;           // rows: sum of the segments' n_tokens
  bool operator==(const Activations&) const;  // bitwise on floats (NaNs compare by bits)
};

enum class KvOp : uint8_t {
  kClear = 1,   // drop every cell of seq_id
  kRemove = 2,  // drop cells of seq_id with position in [p0, p1); p1 = UINT32_MAX: to the end
};

struct KvCommand {
  KvOp op = KvOp::kClear;
  uint32_t seq_id = 0;
  uint32_t p0 = 0;
  uint32_t p1 = 0;
  bool operator==(const KvCommand&) const = default;
};

struct KvControl {
  std::vector<KvCommand> commands;
  bool operator==(const KvControl&) const = default;
};

struct Metric {
  std::string key;
  double value = 0;
  bool operator==(const Metric&) const;  // bitwise on value
};

struct Stats {
  uint32_t device = 0;  // ring position
  uint64_t token = 0;   // token index in the generation
  std::vector<Metric> metrics;
  bool operator==(const Stats&) const = default;
};

struct Stop {
  std::string reason;
  bool operator==(const Stop&) const = default;
};

struct ErrorMsg {
  std::string text;
  bool operator==(const ErrorMsg&) const = default;
};

struct Ping {
  uint64_t nonce = 0;
  uint64_t send_ns = 0;  // sender's monotonic clock, echoed back for RTT
  bool operator==(const Ping&) const = default;
};

// The answer echoes the ping's fields.
struct Pong : Ping {
  bool operator==(const Pong&) const = default;
};

// Alternatives are in MsgType order: index + 1 == MsgType value.
using Message = std::variant<Hello, HelloAck, Refuse, Profile, Assign, Load, Ready, Activations,
                             KvControl, Stats, Stop, ErrorMsg, Ping, Pong>;

MsgType type_of(const Message& m);

struct Envelope {
  Header header;
  Message body;
};

// Encodes header + payload. Throws UsageError if `m` breaks a limit (the sender's bug is
// reported at the sender, not discovered by the receiver).
std::vector<uint8_t> encode(const Message& m, uint64_t request_id = 0);

// Validates the fixed header (magic, version, type, flags, length limits) of a message whose
// first kHeaderBytes are `bytes`. `peer` names the sender in errors. Throws FormatError.
Header decode_header(std::span<const uint8_t> bytes, std::string_view peer);

// Decodes one whole message (exactly header + payload_len bytes, checksum verified).
// Throws FormatError naming peer, type and field; never reads outside `bytes`.
Envelope decode(std::span<const uint8_t> bytes, std::string_view peer);

}  // namespace hearth::net
