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
}
void Metrics::set_queue(int64_t waiting, int64_t active) {
  std::lock_guard lock(mu_);
  waiting_ = waiting;
  active_ = active;
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
  counter("hearth_prompt_tokens_total", "Prompt tokens evaluated.", prompt_tokens_);
  counter("hearth_tokens_generated_total", "Tokens generated.", generated_tokens_);
  out +=
      "# HELP hearth_requests_finished_total Requests finished, by finish reason.\n"
      "# TYPE hearth_requests_finished_total counter\n";
  for (const auto& [reason, n] : finished_) {
    out += fmt::format("hearth_requests_finished_total{{reason=\"{}\"}} {}\n", reason, n);
  }
  gauge("hearth_queue_depth", "Requests waiting for a sequence slot.", waiting_);
  gauge("hearth_active_sequences", "Sequences being prefilled or decoded.", active_);
  ttft_.render("hearth_ttft_seconds", "Time from request arrival to its first token.", out);
  tpot_.render("hearth_tpot_seconds", "Mean time per output token after the first, per request.",
               out);
  return out;
}

}  // namespace hearth::serve
