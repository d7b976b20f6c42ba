// Identity of a model file, so every device of a ring provably runs the same model: the file
// size plus a 64-bit hash of the bytes before the data section (GGUF header, metadata and
// tensor table). Hashing the whole weights would cost a full read of a 40 GB file at start;
// the table pins names, shapes, types and offsets, and the size pins the data length.
#pragma once

#include <string>

#include "hearth/gguf/gguf_file.h"
#include "hearth/net/wire.h"

namespace hearth::cluster {

net::ModelIdentity model_identity(const gguf::GgufFile& file);

// "412.3 MiB, hash 0123456789abcdef" for messages.
std::string describe(const net::ModelIdentity& id);

}  // namespace hearth::cluster
