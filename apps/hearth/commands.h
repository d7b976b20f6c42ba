// Subcommand registry of the hearth CLI. A cmd_*.cpp file registers its command with
// HEARTH_COMMAND, so adding a command touches no shared list.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace hearth::cli {

using Args = std::vector<std::string>;

struct Command {
  std::string name;
  std::string summary;
  std::function<int(const Args&)> run;  // returns the process exit code
};

std::vector<Command>& all_commands();

struct Registrar {
  Registrar(std::string name, std::string summary, std::function<int(const Args&)> run);
};

// Parses `args` into `app`. Returns an exit code when the process should stop now
// (0 after --help, 2 after a usage error, with the message printed), nullopt to go on.
std::optional<int> parse(CLI::App& app, const Args& args);

}  // namespace hearth::cli

#define HEARTH_CONCAT_INNER(a, b) a##b
#define HEARTH_CONCAT(a, b) HEARTH_CONCAT_INNER(a, b)
#define HEARTH_COMMAND(name, summary, fn) \
  static const ::hearth::cli::Registrar HEARTH_CONCAT(hearth_command_, __LINE__)(name, summary, fn)
