// `hearth relay`: run a net::DelayRelay until SIGINT/SIGTERM, to make a link behave like Wi-Fi
// (one-way delay, rate cap). The cluster harness (bench/cluster/) runs one per emulated device
// in transparent mode behind an nftables redirect, because tc netem is not available there.
#include <csignal>
#include <cstdio>

#include <atomic>
#include <chrono>
#include <thread>

#include <fmt/core.h>

#include "commands.h"
#include "hearth/base/error.h"
#include "hearth/net/delay_relay.h"

namespace hearth::cli {
namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_relay_signal(int) {
  g_stop.store(true);
}

// "tcp://HOST:PORT" -> host, port; the flag name goes into the error.
std::pair<std::string, uint16_t> parse_tcp(const std::string& flag, const std::string& s) {
  const std::string prefix = "tcp://";
  const auto colon = s.rfind(':');
  if (s.rfind(prefix, 0) != 0 || colon == std::string::npos || colon <= prefix.size()) {
    throw UsageError(fmt::format("{}: expected tcp://HOST:PORT, got '{}'", flag, s));
  }
  const std::string port_text = s.substr(colon + 1);
  unsigned long port = 0;
  try {
    size_t used = 0;
    port = std::stoul(port_text, &used);
    if (used != port_text.size()) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    throw UsageError(fmt::format("{}: bad port '{}' in '{}'", flag, port_text, s));
  }
  if (port > 65535) throw UsageError(fmt::format("{}: port {} out of range", flag, port));
  return {s.substr(prefix.size(), colon - prefix.size()), static_cast<uint16_t>(port)};
}

int run_relay(const Args& args) {
  CLI::App app{"Forward TCP connections with an added delay and a rate cap (emulated Wi-Fi)",
               "relay"};
  std::string listen, connect;
  double rtt_ms = 0, mbps = 0, burst_kib = 64;
  bool transparent = false;
  uint32_t mark = 0;
  app.add_option("--listen", listen, "where to accept, tcp://HOST:PORT (port 0: any free)")
      ->required();
  app.add_option("--connect", connect, "where to forward each connection, tcp://HOST:PORT");
  app.add_flag("--transparent", transparent,
               "forward to each connection's original destination (behind an nftables/iptables "
               "redirect rule) instead of --connect");
  app.add_option("--rtt-ms", rtt_ms, "round-trip time to add (half of it each way)")
      ->check(CLI::Range(0.0, 60000.0));
  app.add_option("--mbps", mbps, "rate cap per direction in 10^6 bit/s (0: none)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--burst-kib", burst_kib, "token-bucket burst in KiB")
      ->check(CLI::Range(1.0, 1e6));
  app.add_option("--mark", mark,
                 "SO_MARK for outgoing connections, so a redirect rule can exempt them (root)");
  if (auto code = parse(app, args)) return *code;
  if (transparent == !connect.empty()) {
    throw UsageError("relay: give exactly one of --connect and --transparent");
  }

  net::RelayOptions o;
  std::tie(o.listen_host, o.listen_port) = parse_tcp("--listen", listen);
  if (!transparent) std::tie(o.target_host, o.target_port) = parse_tcp("--connect", connect);
  o.transparent = transparent;
  o.mark = mark;
  o.delay_ms = rtt_ms / 2;
  o.rate_bytes_per_s = mbps * 1e6 / 8;
  o.burst_bytes = static_cast<size_t>(burst_kib * 1024);
  net::DelayRelay relay(o);
  std::signal(SIGINT, on_relay_signal);
  std::signal(SIGTERM, on_relay_signal);
  // The resolved address on stdout, so scripts that asked for port 0 can find it.
  std::printf("relaying on %s\n", relay.endpoint().c_str());
  std::fflush(stdout);
  while (!g_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  relay.stop();
  const auto s = relay.stats();
  std::fprintf(stderr, "relay: %llu connections, %llu bytes forwarded\n",
               static_cast<unsigned long long>(s.connections),
               static_cast<unsigned long long>(s.bytes_forwarded));
  return 0;
}

HEARTH_COMMAND("relay", "forward TCP with added delay and a rate cap (emulated links)", run_relay);

}  // namespace
}  // namespace hearth::cli
