#include "hearth/serve/metrics.h"

#include <fmt/core.h>

#include <algorithm>

namespace hearth::serve {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(const std::string& name, const std::string& help, std::string& out) const {
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cum);
  }
  cum += counts_.back();
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, cum, name, sum_,
                     name, count_);
}

Metrics::Metrics()
    : ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      tpot_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}) {}

void Metrics::request_started() {
  std::lock_guard lock(mu_);
  ++requests_;
}
void Metrics::request_finished(const std::string& finish_reason) {
  std::lock_guard lock(mu_);
  for (auto& [reason, n] : finished_) {
    if (reason == finish_reason) {
      ++n;
      return;
    }
  }
  finished_.emplace_back(finish_reason, 1);
}
void Metrics::rejected() {
  std::lock_guard lock(mu_);
  ++rejected_;
}
void Metrics::prompt_tokens(int64_t n) {
  std::lock_guard lock(mu_);
  prompt_tokens_ += static_cast<uint64_t>(n);
}
void Metrics::prompt_tokens_cached(int64_t n) {
  std::lock_guard lock(mu_);
  prompt_tokens_cached_ += static_cast<uint64_t>(n);
}
void Metrics::generated_tokens(int64_t n) {
  std::lock_guard lock(mu_);
  generated_tokens_ += static_cast<uint64_t>(n);
}
void Metrics::ttft(double seconds) {
  std::lock_guard lock(mu_);
  ttft_.observe(seconds);
}
void Metrics::tpot(double seconds) {
  std::lock_guard lock(mu_);
  tpot_.observe(seconds);
  last_tpot_s_ = seconds;
}
void Metrics::requests_set_back(int64_t n) {
  std::lock_guard lock(mu_);
  set_back_ += static_cast<uint64_t>(n);
}
void Metrics::set_kv_blocks(int64_t in_use, int64_t capacity, int64_t block_rows) {
  std::lock_guard lock(mu_);
  kv_in_use_ = in_use;
  kv_capacity_ = capacity;
  kv_block_rows_ = block_rows;
}
void Metrics::set_queue(int64_t waiting, int64_t active) {
  std::lock_guard lock(mu_);
  waiting_ = waiting;
  active_ = active;
}

void Metrics::set_devices(std::vector<DevicePressure> devices) {
  std::lock_guard lock(mu_);
  devices_ = std::move(devices);
}

MetricsSnapshot Metrics::snapshot() const {
  std::lock_guard lock(mu_);
  return {generated_tokens_, waiting_, active_, last_tpot_s_, devices_};
}

namespace {
// A Prometheus label value: backslash, double quote and newline escaped (device names come
// from peers).
std::string label_value(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}
}  // namespace

void Metrics::batch(int64_t sequences, int64_t rows) {
  std::lock_guard lock(mu_);
  ++passes_;
  pass_sequences_ += static_cast<uint64_t>(sequences);
  pass_rows_ += static_cast<uint64_t>(rows);
}

void Metrics::decode_trip(int64_t drafted, int64_t accepted) {
  std::lock_guard lock(mu_);
  ++decode_trips_;
  drafted_ += static_cast<uint64_t>(drafted);
  draft_accepted_ += static_cast<uint64_t>(accepted);
}

std::string Metrics::render() const {
  std::lock_guard lock(mu_);
  std::string out;
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, v);
  };
  auto gauge = [&](const char* name, const char* help, int64_t v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, v);
  };
  counter("hearth_requests_total", "Generation requests accepted.", requests_);
  counter("hearth_requests_rejected_total", "Requests refused because the queue was full.",
          rejected_);
  counter("hearth_prompt_tokens_total", "Prompt tokens of accepted requests.", prompt_tokens_);
  counter("hearth_prompt_tokens_cached_total",
          "Prompt tokens not computed again: a cached sequence (a finished request's, or with "
          "paged KV a running one's) held them.",
          prompt_tokens_cached_);
  counter("hearth_tokens_generated_total", "Tokens generated.", generated_tokens_);
  out +=
      "# HELP hearth_requests_finished_total Requests finished, by finish reason.\n"
      "# TYPE hearth_requests_finished_total counter\n";
  for (const auto& [reason, n] : finished_) {
    out += fmt::format("hearth_requests_finished_total{{reason=\"{}\"}} {}\n", reason, n);
  }
  counter("hearth_forward_passes_total", "Batched forward passes (one per scheduler step).",
          passes_);
  counter("hearth_decode_trips_total",
          "Decoding sequences' trips through the model (tokens generated after each "
          "request's first, divided by this: tokens per trip).",
          decode_trips_);
  counter("hearth_draft_tokens_total", "Speculative decoding: drafted tokens verified.", drafted_);
  counter("hearth_draft_accepted_tokens_total",
          "Speculative decoding: drafted tokens the target model accepted.", draft_accepted_);
  counter("hearth_batch_sequences_total",
          "Sequences summed over forward passes (divide by passes for the mean batch).",
          pass_sequences_);
  counter("hearth_batch_rows_total", "Token rows summed over forward passes.", pass_rows_);
  gauge("hearth_queue_depth", "Requests waiting for a sequence slot.", waiting_);
  gauge("hearth_active_sequences", "Sequences being prefilled or decoded.", active_);
  if (kv_capacity_ > 0) {
    gauge("hearth_kv_blocks_in_use", "Paged KV: blocks held by sequences (shared ones once).",
          kv_in_use_);
    gauge("hearth_kv_blocks_total", "Paged KV: blocks the pool may hold (--kv-pool).",
          kv_capacity_);
    gauge("hearth_kv_block_positions", "Paged KV: positions per block (--kv-block).",
          kv_block_rows_);
    counter("hearth_requests_set_back_total",
            "Paged KV: requests whose cache was freed for older ones when the pool was full "
            "(their tokens computed again later).",
            set_back_);
  }
  if (!devices_.empty()) {
    auto per_device = [&](const char* name, const char* type, const char* help, auto value) {
      out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
      for (size_t d = 0; d < devices_.size(); ++d) {
        out += fmt::format("{}{{device=\"{}\",name=\"{}\"}} {}\n", name, d,
                           label_value(devices_[d].name), value(devices_[d]));
      }
    };
    per_device("hearth_device_memory_pressure", "gauge",
               "Memory pressure per device (drop of available memory since its baseline over "
               "total, 0-1), mean over recent steps; device 0 is this process.",
               [](const DevicePressure& d) { return d.pressure; });
    per_device("hearth_device_memory_pressure_max", "gauge",
               "Highest memory pressure seen per device.",
               [](const DevicePressure& d) { return d.pressure_max; });
    per_device("hearth_device_steps_total", "counter", "Token steps measured per device.",
               [](const DevicePressure& d) { return d.steps; });
  }
  ttft_.render("hearth_ttft_seconds", "Time from request arrival to its first token.", out);
  tpot_.render("hearth_tpot_seconds", "Mean time per output token after the first, per request.",
               out);
  return out;
}

}  // namespace hearth::serve
