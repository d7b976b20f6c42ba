#include "local_worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hearth/base/clock.h"
#include "hearth/base/error.h"

extern char** environ;

namespace hearth::cli {

LocalWorker::LocalWorker(const std::string& name, const std::vector<std::string>& flags,
                         const std::string& log) {
  int out[2];
  if (pipe(out) != 0) throw IoError(errno_message("pipe for local worker " + name));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  posix_spawn_file_actions_addopen(&fa, 2, log.empty() ? "/dev/null" : log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<std::string> args = {"hearth", "worker", "--listen", "tcp://127.0.0.1:0"};
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = posix_spawn(&pid_, "/proc/self/exe", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    pid_ = -1;
    throw IoError("cannot start local worker " + name);
  }
  // Its first stdout line is "listening on tcp://127.0.0.1:PORT".
  std::string line;
  const double deadline = now_ms() + 30000;
  while (line.find('\n') == std::string::npos && now_ms() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    char buf[256];
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    line.append(buf, static_cast<size_t>(n));
  }
  close(out[0]);
  const auto at = line.find("tcp://");
  if (at == std::string::npos) {
    throw NetError("local worker " + name + " did not start" +
                   (log.empty() ? std::string() : " (see " + log + ")"));
  }
  address_ = line.substr(at, line.find('\n', at) - at);
}

LocalWorker::~LocalWorker() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
}

}  // namespace hearth::cli
