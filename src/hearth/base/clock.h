// Monotonic time helpers for measurements (TTFT, TPOT, profiles).
#pragma once

#include <chrono>

namespace hearth {

inline double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

inline double now_ms() {
  return now_seconds() * 1e3;
}

}  // namespace hearth
