// CPU features that __builtin_cpu_supports cannot name on every compiler we build with.
#pragma once

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace hearth {

// F16C (CPUID leaf 1, ECX bit 29). clang 14's __builtin_cpu_supports rejects "f16c", and the
// fuzz and sanitizer builds use clang. Callers also check AVX, which covers the OS saving
// the wide registers. Read once: kernels ask on every call, and CPUID traps to the hypervisor
// in a virtual machine: asked per matrix, it slowed every decode step.
inline bool cpu_has_f16c() {
#if defined(__x86_64__)
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & (1u << 29)) != 0;
  }();
  return has;
#else
  return false;
#endif
}

}  // namespace hearth
