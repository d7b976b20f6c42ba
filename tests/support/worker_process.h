// A real `hearth worker` child process on 127.0.0.1 with a free port, for tests that build a
// ring. Its first stdout line ("listening on tcp://...") gives the address; stderr goes to a
// log file the test can print on failure. SIGTERM and reaped when the object goes away.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
#include "support/scratch_dir.h"

extern char** environ;

namespace hearth::testing {

class WorkerProcess {
 public:
  // `args` follow `hearth worker --listen LISTEN -t 1` (e.g. {"-m", path}); port 0: any free.
  explicit WorkerProcess(const std::vector<std::string>& args,
                         const std::string& listen = "tcp://127.0.0.1:0") {
    static int counter = 0;
    log_ = (hearth::testing::scratch_dir() / ("hearth_worker_" + std::to_string(getpid()) + "_" +
                                              std::to_string(counter++) + ".log"))
               .string();
    int out[2];
    if (pipe(out) != 0) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    posix_spawn_file_actions_addopen(&fa, 2, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<std::string> argv_s = {HEARTH_BIN_PATH, "worker", "--listen", listen, "-t", "1"};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = posix_spawn(&pid_, HEARTH_BIN_PATH, &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    if (rc != 0) {
      close(out[0]);
      pid_ = -1;
      throw std::runtime_error("cannot spawn hearth worker");
    }
    FILE* f = fdopen(out[0], "r");
    char line[256] = {};
    if (f != nullptr && fgets(line, sizeof line, f) != nullptr) {
      const std::string s(line), prefix = "listening on ";
      if (s.rfind(prefix, 0) == 0) address_ = s.substr(prefix.size(), s.find('\n') - prefix.size());
    }
    if (f != nullptr) fclose(f);
  }
  ~WorkerProcess() { kill_with(SIGTERM); }
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Sends `sig` and reaps the process.
  void kill_with(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  // Sends `sig` without waiting (SIGSTOP / SIGCONT).
  void signal(int sig) const {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  bool alive() const { return pid_ > 0 && ::kill(pid_, 0) == 0; }
  pid_t pid() const { return pid_; }
  const std::string& address() const { return address_; }  // empty if it did not start
  std::string log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  pid_t pid_ = -1;
  std::string address_;
  std::string log_;
};

}  // namespace hearth::testing
