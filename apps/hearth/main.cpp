// hearth — the one CLI. Each subcommand lives in its own file (cmd_*.cpp) and registers
// itself in commands.h; this file only dispatches and converts errors to exit codes.
#include <fmt/core.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands.h"
#include "hearth/base/error.h"

int main(int argc, char** argv) {
  using namespace hearth;
  const auto& commands = cli::all_commands();
  auto usage = [&](FILE* out) {
    fmt::print(out, "usage: hearth <command> [options]\n\ncommands:\n");
    for (const auto& c : commands) fmt::print(out, "  {:<10} {}\n", c.name, c.summary);
    fmt::print(out, "\n`hearth <command> --help` describes a command's options.\n");
  };
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    usage(stdout);
    return 0;
  }
  if (name == "--version") {
    fmt::print("hearth {}\n", HEARTH_VERSION);
    return 0;
  }
  for (const auto& c : commands) {
    if (c.name != name) continue;
    std::vector<std::string> args(argv + 2, argv + argc);
    try {
      return c.run(args);
    } catch (const UsageError& e) {
      fmt::print(stderr, "hearth {}: {}\n", name, e.what());
      return 2;
    } catch (const Error& e) {
      fmt::print(stderr, "hearth {}: {}\n", name, e.what());
      return 1;
    } catch (const std::exception& e) {
      fmt::print(stderr, "hearth {}: internal error: {}\n", name, e.what());
      return 1;
    }
  }
  fmt::print(stderr, "hearth: unknown command '{}'\n\n", name);
  usage(stderr);
  return 2;
}
