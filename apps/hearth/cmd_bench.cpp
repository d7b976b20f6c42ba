// `hearth bench <what>`: benchmarks that print figures (never pass/fail). Each benchmark
// registers itself with HEARTH_BENCH in its own bench_*.cpp file.
#include <fmt/core.h>

#include "bench_registry.h"
#include "commands.h"

namespace hearth::cli {

std::vector<Command>& all_benches() {
  static std::vector<Command> benches;
  return benches;
}

BenchRegistrar::BenchRegistrar(std::string name, std::string summary,
                               std::function<int(const Args&)> run) {
  all_benches().push_back({std::move(name), std::move(summary), std::move(run)});
}

namespace {

int run_bench(const Args& args) {
  auto usage = [] {
    fmt::print(stderr, "usage: hearth bench <what> [options]\n\nbenchmarks:\n");
    for (const auto& b : all_benches()) fmt::print(stderr, "  {:<10} {}\n", b.name, b.summary);
  };
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    usage();
    return args.empty() ? 2 : 0;
  }
  for (const auto& b : all_benches()) {
    if (b.name == args[0]) return b.run(Args(args.begin() + 1, args.end()));
  }
  fmt::print(stderr, "hearth bench: unknown benchmark '{}'\n", args[0]);
  usage();
  return 2;
}

HEARTH_COMMAND("bench", "run a benchmark (kernels, e2e, ring, ...) and print figures", run_bench);

}  // namespace
}  // namespace hearth::cli
