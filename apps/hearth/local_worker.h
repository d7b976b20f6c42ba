// A `hearth worker` child of this binary on a free loopback port, for the commands that start
// their own ring (`hearth demo`, `hearth bench serve`); SIGTERM'd and reaped when this goes
// away.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace hearth::cli {

class LocalWorker {
 public:
  // Starts `hearth worker --listen tcp://127.0.0.1:0` with `flags` after it (the model, threads,
  // key ...) and waits for the address it listens on. Its stderr goes to `log` (empty: nowhere).
  // Throws IoError when it cannot be started, NetError naming it and its log when it does not
  // say where it listens within 30 s.
  LocalWorker(const std::string& name, const std::vector<std::string>& flags,
              const std::string& log);
  ~LocalWorker();
  LocalWorker(const LocalWorker&) = delete;
  LocalWorker& operator=(const LocalWorker&) = delete;

  const std::string& address() const { return address_; }

 private:
  pid_t pid_ = -1;
  std::string address_;
};

}  // namespace hearth::cli
