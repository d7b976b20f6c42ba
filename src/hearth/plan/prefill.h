// Time to first token of a plan: the prompt goes around the ring in chunks that follow each
// other (cluster::RingSource's pipelined prefill), so every device works on one chunk while
// the next device works on the one before.
//
// One device's time for a chunk of c tokens, over all its windows:
//   t(c) = max(weights / RAM bandwidth, c * F / matmul rate) + streamed bytes / disk rate
//          + hops * (latency + c * hidden bytes / bandwidth)
// (the weights stream from memory once per chunk while the chunk's arithmetic runs; a device
// that streams part of its weights from disk reads that part once per chunk). The first chunk
// crosses every device; each later one leaves the slowest device one t(c) after the previous:
//   TTFT(c) = sum_m t_m(c_1) + sum_{j>1} max_m t_m(c_j)
// Serial prefill is the one chunk c = n. Small chunks overlap more but pay the weights' read
// and the hop latency per chunk; best_chunk() weighs both.
#pragma once

#include <cstdint>
#include <vector>

#include "hearth/plan/cost_model.h"

namespace hearth::plan {

struct PrefillDevice {
  double read_s = 0;               // its weights read from RAM once
  double compute_s_per_token = 0;  // one prompt token's arithmetic through its layers
  double disk_s = 0;               // the weights it streams from disk, read once
  double hop_latency_s = 0;        // its incoming hops' latency, per chunk
  double hop_s_per_token = 0;      // one token's hidden state over those hops
  double decode_compute_s = 0;     // the decode prediction's compute term (one row, matvec)
  double chunk_s(int64_t c) const;
};

struct PrefillModel {
  std::vector<PrefillDevice> devices;  // ring order, those with layers or relays
  // Predicted seconds from the prompt's start to its logits, for n tokens in chunks of
  // `chunk` (>= n: one trip) that follow each other, or (pipelined = false) that each make
  // the whole trip before the next starts: sum_j sum_m t_m(c_j).
  double ttft_s(int64_t n, int64_t chunk, bool pipelined = true) const;
  // The chunk (a power of two from 16, or n itself) with the least ttft_s(n, chunk).
  int64_t best_chunk(int64_t n) const;
};

// The prefill terms of the devices of a decode prediction (its windows, hops, streamed bytes).
PrefillModel prefill_model(const Problem& p, const Prediction& pred);

// Speculative decoding: seconds of one decoding trip that carries `rows` rows of one
// sequence (the token just chosen and its drafts). A verification reads the same weights
// as one token and does more arithmetic, so it costs the decode prediction's TPOT plus, on
// each device, the arithmetic of the rows beyond what its weight reads hide (rows x the
// matmul time per token, less the one-row compute term) and their hidden states on its hops.
double verify_trip_s(const Prediction& pred, const PrefillModel& m, int64_t rows);

// Expected tokens a trip gives with `drafts` drafts that each pass with probability
// `acceptance` while all before it passed: 1 + a + a^2 + ... + a^drafts.
double expected_tokens_per_trip(double acceptance, int64_t drafts);

}  // namespace hearth::plan
