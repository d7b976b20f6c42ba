#include "commands.h"

#include <fmt/core.h>
#include <algorithm>

namespace hearth::cli {

std::vector<Command>& all_commands() {
  static std::vector<Command> commands;
  return commands;
}

Registrar::Registrar(std::string name, std::string summary, std::function<int(const Args&)> run) {
  auto& commands = all_commands();
  commands.push_back({std::move(name), std::move(summary), std::move(run)});
  std::sort(commands.begin(), commands.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
}

std::optional<int> parse(CLI::App& app, const Args& args) {
  // CLI11 consumes a vector from the back. It cannot declare llama.cpp's three-letter short
  // options (-ctk, -ctv, -md), so those are spelled out first.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  for (std::string& a : reversed) {
    if (a == "-ctk") a = "--cache-type-k";
    if (a == "-ctv") a = "--cache-type-v";
    if (a == "-md") a = "--model-draft";
  }
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    fmt::print("{}", app.help());
    return 0;
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "hearth {}: {}\nRun `hearth {} --help` for the options.\n", app.get_name(),
               e.what(), app.get_name());
    return 2;
  }
  return std::nullopt;
}

}  // namespace hearth::cli
