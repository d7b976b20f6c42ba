// Bounds on what a ring peer may ask of a device (issue 17). Anyone who can reach a device's
// ports can send it messages, so every size and count a peer sends is checked before it is
// used (addresses: check_peer_endpoint in endpoints.h): a worker refuses an Assign it could
// not honour and drops data-plane messages that do not fit its session, and each socket takes
// no more bytes per message than an honest peer could need.
#pragma once

#include <cstdint>
#include "hearth/model/hparams.h"
#include "hearth/net/wire.h"

namespace hearth::cluster {

// Control links carry Hello, Assign, KvControl, Stats, Profile and single-row link probes:
// never more than this per message.
inline constexpr uint64_t kControlMessageBytes = uint64_t{1} << 20;

// Most sequences one session may keep a KV cache for (Assign.n_seq_max is checked against it
// and against memory).
inline constexpr uint32_t kMaxSessionSequences = 1024;

// Rows of hidden state one Activations message may carry to a device of model `hp` whose
// context is not known yet (a worker's inbox exists before its Assign): a whole prompt at the
// model's training context, at least 4096, at most 65536.
uint64_t inbox_rows_bound(const model::HParams& hp);

// Largest Activations message of up to `rows` rows of width `dim`: header, fields, one
// segment per row at worst, the floats.
uint64_t data_message_bytes(uint32_t dim, uint64_t rows);

}  // namespace hearth::cluster
