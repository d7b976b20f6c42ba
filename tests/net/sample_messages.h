// One deterministic sample of every wire message type, shared by the net tests and used to
// (re)generate the golden files in tests/fixtures/wire/.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "hearth/net/wire.h"

namespace hearth::net::testing {

inline Activations sample_activations(uint32_t n_tokens, uint32_t dim) {
  Activations a;
  a.round = 1;
  a.next_layer = 12;
  a.final = false;
  a.dim = dim;
  // Segments of 1, 2, 3, ... rows (the last one takes what is left), distinct sequences.
  for (uint32_t used = 0, k = 0; used < n_tokens; ++k) {
    const uint32_t rows = std::min(k + 1, n_tokens - used);
    a.segments.push_back(SeqSegment{10 + 7 * k, 100 * (k + 1), rows});
    used += rows;
  }
  a.hidden.resize(size_t{n_tokens} * dim);  // (n_tokens, dim) f32
  for (size_t i = 0; i < a.hidden.size(); ++i) {
    a.hidden[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 3.0);
  }
  return a;
}

// Index i holds the message of type i + 1, so names and order follow MsgType.
inline std::vector<Message> sample_messages() {
  Hello hello;
  hello.model = {123456789, 0xDEADBEEFCAFEF00Dull};
  hello.capabilities = kCapPrefetch | kCapBatching;
  hello.device_name = "laptop-head";
  hello.data_endpoint = "tcp://192.168.1.10:9101";
  HelloAck ack;
  static_cast<Hello&>(ack) = hello;
  ack.device_name = "phone-\xC3\xA9";  // non-ASCII survives as bytes
  ack.data_endpoint = "tcp://192.168.1.11:9201";

  Assign assign;
  assign.ring_position = 2;
  assign.n_devices = 3;
  assign.n_layers = 32;
  assign.windows = {{6, 10}, {16, 20}, {26, 30}, {32, 32}};
  assign.successor_endpoint = "tcp://192.168.1.10:9101";
  assign.wrap_endpoint = "tcp://192.168.1.11:9201";
  assign.prefetch = true;
  assign.n_ctx = 4096;
  assign.n_threads = 8;
  assign.n_seq_max = 4;
  assign.n_gpu_layers = 0;
  assign.kv_type_k = 2;  // q8_0
  assign.kv_type_v = 3;  // q4_0

  Activations act = sample_activations(3, 8);
  act.hidden[5] = -0.0f;
  act.hidden[6] = std::numeric_limits<float>::infinity();
  act.hidden[7] = std::numeric_limits<float>::quiet_NaN();

  KvControl kv;
  kv.commands = {{KvOp::kClear, 7, 0, 0}, {KvOp::kRemove, 2, 10, 0xFFFFFFFFu}};

  Stats stats;
  stats.device = 1;
  stats.token = 42;
  stats.metrics = {{"compute_ms", 12.5}, {"major_faults", 3}, {"pressure", -0.0}};

  return {hello,
          ack,
          Refuse{"model differs: file size 123 != 456"},
          Profile{R"({"schema":1,"device":"laptop","flops":1.5e11})"},
          assign,
          Load{},
          Ready{1234.5, 987654321},
          act,
          kv,
          stats,
          Stop{"generation finished"},
          ErrorMsg{"worker 2: out of memory"},
          Ping{77, 1'000'000'123},
          Pong{77, 1'000'000'123}};
}

}  // namespace hearth::net::testing
