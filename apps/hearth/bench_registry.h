// Registry of `hearth bench <name>` benchmarks; see cmd_bench.cpp.
#pragma once

#include "commands.h"

namespace hearth::cli {

std::vector<Command>& all_benches();

struct BenchRegistrar {
  BenchRegistrar(std::string name, std::string summary, std::function<int(const Args&)> run);
};

}  // namespace hearth::cli

#define HEARTH_BENCH(name, summary, fn)                                                            \
  static const ::hearth::cli::BenchRegistrar HEARTH_CONCAT(hearth_bench_, __LINE__)(name, summary, \
                                                                                    fn)
