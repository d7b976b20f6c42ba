// CPU facts that __builtin_cpu_supports cannot give on every compiler we build with.
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

// The CPU's vendor (AMD, Intel or another) and family and model (CPUID leaf 1, the extended
// fields combined as the manuals say), read once for the same reason. 0 off x86.
struct CpuVendorFamily {
  bool amd = false;
  bool intel = false;
  int family = 0;
  int model = 0;
};
inline CpuVendorFamily cpu_vendor_family() {
  static const CpuVendorFamily id = [] {
    CpuVendorFamily v;
#if defined(__x86_64__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(0, &a, &b, &c, &d) != 0) {
      // "AuthenticAMD" in ebx, edx, ecx.
      v.amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;
      // "GenuineIntel".
      v.intel = b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu;
    }
    if (__get_cpuid(1, &a, &b, &c, &d) != 0) {
      const int base = static_cast<int>((a >> 8) & 0xF);
      const int ext = static_cast<int>((a >> 20) & 0xFF);
      v.family = base == 0xF ? base + ext : base;
      const int model = static_cast<int>((a >> 4) & 0xF);
      const int ext_model = static_cast<int>((a >> 16) & 0xF);
      v.model = base == 0x6 || base == 0xF ? (ext_model << 4) + model : model;
    }
#endif
    return v;
  }();
  return id;
}

// AMX-INT8 tiles in the CPU (CPUID leaf 7: AMX-TILE and AMX-INT8) with their state saved by
// the OS (XCR0 bits 17 and 18), read once. Using them on Linux also needs the process's grant
// (quant::amx_usable asks for it). false off x86.
inline bool cpu_has_amx_int8() {
#if defined(__x86_64__)
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) == 0 || (c & (1u << 27)) == 0) return false;  // OSXSAVE
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
    if ((d & (1u << 24)) == 0 || (d & (1u << 25)) == 0) return false;
    unsigned lo = 0, hi = 0;
    asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & (3u << 17)) == (3u << 17);
  }();
  return has;
#else
  return false;
#endif
}

}  // namespace hearth
