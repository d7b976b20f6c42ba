// Runs the real CLI (or any command) from a test: exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include "support/scratch_dir.h"

namespace hearth::testing {

struct CommandResult {
  int exit_code = -1;  // 128 + signal when killed by a signal
  std::string out;     // stdout
  std::string err;     // stderr
  std::string all() const { return out + err; }
};

// Runs `command` through the shell; `stdin_text` (if any) is fed on standard input.
inline CommandResult run_command(const std::string& command, const std::string& stdin_text = "") {
  static int counter = 0;
  const auto base = hearth::testing::scratch_dir() /
                    ("hearth_cmd_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
  const std::string in_path = base.string() + ".in", err_path = base.string() + ".err";
  std::ofstream(in_path) << stdin_text;
  CommandResult r;
  FILE* p = popen((command + " < " + in_path + " 2> " + err_path).c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::stringstream err;
  err << std::ifstream(err_path).rdbuf();
  r.err = err.str();
  std::filesystem::remove(in_path);
  std::filesystem::remove(err_path);
  return r;
}

// Runs the hearth CLI with `args`.
inline CommandResult run_hearth(const std::string& args, const std::string& stdin_text = "") {
  return run_command(std::string(HEARTH_BIN_PATH) + " " + args, stdin_text);
}

// The JSON object on the last non-empty line of `out` (the --json contract).
inline nlohmann::json last_json_line(const std::string& out) {
  const auto end = out.find_last_not_of('\n');
  if (end == std::string::npos) return nlohmann::json();
  const auto start = out.rfind('\n', end);
  return nlohmann::json::parse(out.substr(start == std::string::npos ? 0 : start + 1, end + 1));
}

}  // namespace hearth::testing
