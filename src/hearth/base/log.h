// Minimal leveled logging to stderr. Set HEARTH_LOG=debug|info|warn|error (default info).
#pragma once

#include <fmt/core.h>

#include <string_view>

namespace hearth::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

Level threshold();
void write(Level level, std::string_view message);

template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (threshold() <= Level::kDebug)
    write(Level::kDebug, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (threshold() <= Level::kInfo) write(Level::kInfo, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (threshold() <= Level::kWarn) write(Level::kWarn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  write(Level::kError, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace hearth::log
