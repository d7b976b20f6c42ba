// CPU feature detection and the HEARTH_ISA override. Decided once per process.
#include <cstdlib>
#include <string>

#include "hearth/base/cpu_features.h"
#include "hearth/base/enum_names.h"
#include "hearth/base/error.h"
#include "hearth/quant/type_traits.h"

#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace hearth::quant {

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return true;
#if defined(__x86_64__)
    // libgcc's cpu model also checks XCR0, so the OS saves the wide registers.
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c() &&
             __builtin_cpu_supports("bmi2");
    case Isa::kAvx512:
      return isa_supported(Isa::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
#endif
#if defined(__aarch64__)
    case Isa::kNeon:
      return true;  // Advanced SIMD is part of the aarch64 baseline
    case Isa::kNeonDotprod:
#if defined(__linux__)
      return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0 && (getauxval(AT_HWCAP) & HWCAP_FPHP) != 0;
#elif defined(__APPLE__)
      return true;  // every Apple arm64 core has dotprod
#else
      return false;
#endif
#endif
    default:
      return false;
  }
}

namespace {
using enum Isa;
constexpr EnumName<Isa> kIsaNames[] = {{kScalar, "scalar"},
                                       {kAvx2, "avx2"},
                                       {kAvx512, "avx512"},
                                       {kNeon, "neon"},
                                       {kNeonDotprod, "dotprod"}};
}  // namespace

const char* isa_name(Isa isa) {
  return enum_name(kIsaNames, isa, "unknown").data();
}

Isa detect_isa() {
  if (const char* env = std::getenv("HEARTH_ISA"); env != nullptr && *env != '\0') {
    const std::string want = env;
    const Isa isa = parse_enum(kIsaNames, want, "HEARTH_ISA");
    if (!isa_supported(isa)) {
      throw UsageError("HEARTH_ISA=" + want + ": this CPU does not support it");
    }
    return isa;
  }
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2, Isa::kNeonDotprod, Isa::kNeon}) {
    if (isa_supported(isa)) return isa;
  }
  return Isa::kScalar;
}

bool amx_usable() {
#if defined(__x86_64__) && defined(__linux__)
  static const bool usable = [] {
    // The kernels scale the tiles' sums with AVX-512.
    if (!cpu_has_amx_int8() || !isa_supported(Isa::kAvx512)) return false;
    // Linux hands out the tile data state per process on request (ARCH_REQ_XCOMP_PERM for
    // XFEATURE_XTILEDATA); without it the first tile load faults.
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
#else
  return false;
#endif
}

bool amx_in_matmul() {
  return amx_enabled() && active_isa() == Isa::kAvx512;
}

bool amx_enabled() {
  static const bool enabled = [] {  // a throw here is retried on the next call
    const char* env = std::getenv("HEARTH_AMX");
    const std::string want = env != nullptr ? env : "";
    if (!want.empty() && want != "0" && want != "1") {
      throw UsageError("HEARTH_AMX=" + want + ": expected 0 or 1");
    }
    return want != "0" && amx_usable();
  }();
  return enabled;
}

Isa active_isa() {
  static const Isa isa = detect_isa();  // a throw here is retried on the next call
  return isa;
}

}  // namespace hearth::quant
