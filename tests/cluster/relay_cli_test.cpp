// `hearth relay` as a real process: wrong flags are refused with exit 2 and a message naming
// the flag, and a relay started on port 0 reports its address, forwards a TCP exchange with
// the configured delay, and exits 0 on SIGTERM.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "support/subprocess.h"

namespace hearth {
namespace {

using testing::run_hearth;

TEST(RelayCli, WrongFlagsAreRefusedWithTheFlagNamed) {
  struct Case {
    std::string args, says;
  };
  const Case cases[] = {
      {"relay --connect tcp://127.0.0.1:9", "--listen"},
      {"relay --listen tcp://127.0.0.1:0", "exactly one of --connect and --transparent"},
      {"relay --listen tcp://127.0.0.1:0 --connect tcp://127.0.0.1:9 --transparent",
       "exactly one of --connect and --transparent"},
      {"relay --listen udp://127.0.0.1:0 --connect tcp://127.0.0.1:9", "--listen: expected"},
      {"relay --listen tcp://127.0.0.1:0 --connect tcp://127.0.0.1:99999", "out of range"},
      {"relay --listen tcp://127.0.0.1:0 --connect tcp://127.0.0.1:x9", "bad port"},
      {"relay --listen tcp://:5 --connect tcp://127.0.0.1:9", "--listen: expected"},
      {"relay --listen tcp://127.0.0.1:0 --connect tcp://127.0.0.1:9 --rtt-ms -5", "--rtt-ms"},
      {"relay --listen tcp://127.0.0.1:0 --connect tcp://127.0.0.1:9 --mbps abc", "--mbps"},
      {"relay --listen tcp://127.0.0.1:0 --connect tcp://127.0.0.1:9 --burst-kib 0", "--burst-kib"},
  };
  for (const Case& c : cases) {
    const auto r = run_hearth(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.all();
    EXPECT_NE(r.all().find(c.says), std::string::npos) << c.args << "\n" << r.all();
  }
}

// A one-connection echo server on 127.0.0.1; returns its port.
class EchoServer {
 public:
  EchoServer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(fd_, 1), 0);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[256];
      ssize_t n;
      while ((n = read(c, buf, sizeof buf)) > 0) {
        if (write(c, buf, static_cast<size_t>(n)) != n) break;
      }
      close(c);
    });
  }
  ~EchoServer() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  int port() const { return port_; }

 private:
  int fd_ = -1, port_ = 0;
  std::thread thread_;
};

TEST(RelayCli, ForwardsWithTheDelayAndStopsOnSigterm) {
  EchoServer echo;
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const std::string target = "tcp://127.0.0.1:" + std::to_string(echo.port());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    execl(HEARTH_BIN_PATH, HEARTH_BIN_PATH, "relay", "--listen", "tcp://127.0.0.1:0", "--connect",
          target.c_str(), "--rtt-ms", "60", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  // "relaying on tcp://127.0.0.1:PORT\n"
  std::string line;
  char ch;
  while (read(out[0], &ch, 1) == 1 && ch != '\n') line += ch;
  close(out[0]);
  const auto colon = line.rfind(':');
  ASSERT_NE(colon, std::string::npos) << "relay printed '" << line << "'";
  const int relay_port = std::stoi(line.substr(colon + 1));

  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(relay_port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const auto t0 = std::chrono::steady_clock::now();
  const char msg[] = "through the relay";
  ASSERT_EQ(write(s, msg, sizeof msg), static_cast<ssize_t>(sizeof msg));
  std::string back;
  char buf[64];
  while (back.size() < sizeof msg) {
    const ssize_t n = read(s, buf, sizeof buf);
    ASSERT_GT(n, 0);
    back.append(buf, static_cast<size_t>(n));
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  close(s);
  EXPECT_EQ(back, std::string(msg, sizeof msg));
  // Half the 60 ms RTT each way: the echo cannot come back sooner.
  EXPECT_GE(ms, 58.0);

  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace hearth
