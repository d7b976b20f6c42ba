#include "hearth/base/log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace hearth::log {

namespace {
Level read_threshold() {
  const char* env = std::getenv("HEARTH_LOG");
  if (env == nullptr) return Level::kInfo;
  if (std::strcmp(env, "debug") == 0) return Level::kDebug;
  if (std::strcmp(env, "warn") == 0) return Level::kWarn;
  if (std::strcmp(env, "error") == 0) return Level::kError;
  return Level::kInfo;
}
}  // namespace

Level threshold() {
  static const Level level = read_threshold();
  return level;
}

void write(Level level, std::string_view message) {
  static std::mutex mutex;
  static const char* const kNames[] = {"debug", "info", "warn", "error"};
  std::lock_guard<std::mutex> lock(mutex);
  std::fprintf(stderr, "hearth %s: %.*s\n", kNames[static_cast<int>(level)],
               static_cast<int>(message.size()), message.data());
}

}  // namespace hearth::log
