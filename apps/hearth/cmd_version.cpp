#include "commands.h"

#include <fmt/core.h>

namespace hearth::cli {
namespace {

int run_version(const Args& args) {
  CLI::App app{"Print the version", "version"};
  if (auto code = parse(app, args)) return *code;
  fmt::print("hearth {}\n", HEARTH_VERSION);
  return 0;
}

HEARTH_COMMAND("version", "print the version", run_version);

}  // namespace
}  // namespace hearth::cli
