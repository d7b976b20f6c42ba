// `hearth worker`: a device of the ring. Waits for a head on --listen, runs the layer windows
// it is assigned, serves one head at a time and goes back to waiting when the head leaves.
#include <csignal>

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "hearth/base/error.h"
#include "hearth/cluster/worker.h"
#include "hearth/net/discovery.h"
#include "hearth/profiler/device_profiler.h"
#include "hearth/residency/page_ranges.h"
#include "hearth/residency/release_policy.h"
#include "link_options.h"
#include "model_options.h"
#include "residency_options.h"

namespace hearth::cli {
namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_stop_signal(int) {
  g_stop.store(true);
}

int run_worker(const Args& args) {
  CLI::App app{"Serve as a device of a ring: wait for a head and run the layers it assigns",
               "worker"};
  cluster::WorkerOptions o;
  app.add_option("--listen", o.listen, "control address, tcp://ADDR:PORT (port 0: any free)")
      ->required();
  app.add_option("-m,--model", o.model_path,
                 "the model file (each device needs its own copy of the head's model)")
      ->required();
  app.add_option("-t,--threads", o.threads, "compute threads (default: all cores)")
      ->check(CLI::Range(0, 1024));
  app.add_option("--name", o.name, "device name shown by the head (default: the address)");
  std::string repack = "auto";
  add_repack_option(app, repack);
  ResidencyFlags rf;
  add_residency_options(app, rf);
  std::string profile_file;
  app.add_option("--profile", profile_file,
                 "device profile to give a --plan auto head instead of measuring (one device "
                 "object as `hearth profile --json` prints)");
  LinkFlags lf;
  add_link_options(app, lf);
  bool announce = false;
  std::string discovery;
  app.add_flag("--announce", announce,
               "announce this worker on the LAN every second (UDP multicast), so a head started "
               "with --workers auto finds it");
  add_discovery_option(app, discovery);
  if (auto code = parse(app, args)) return *code;
  apply_residency_options(rf, o.residency);
  o.transport.curve = link_curve(lf, "hearth worker");
  o.residency.repack = model::parse_repack_mode(repack);

  // A --plan auto head asks for this device's profile; measured on first request (a few
  // seconds) and cached per host and model file, so later heads get it at once.
  profiler::ProfilerOptions po;
  po.model_path = o.model_path;
  po.threads = o.threads;
  po.version = HEARTH_VERSION;
  if (!profile_file.empty()) {
    const auto d = profile::load_device_file(profile_file);  // validated now, not at a head
    o.profile = [d] { return profile::device_to_json(d).dump(); };
  } else {
    o.profile = [po] {
      return profile::device_to_json(profiler::device_profile(po).profile).dump();
    };
  }
  cluster::Worker worker(o);
  std::unique_ptr<net::Announcer> announcer;
  if (announce) {
    const auto where = net::parse_discovery_address(discovery);
    announcer = std::make_unique<net::Announcer>(
        where,
        [&worker] {
          net::Announcement a;
          a.model = worker.identity();
          a.endpoint = worker.endpoint();
          a.name = worker.name();
          a.busy = worker.busy();
          return a;
        },
        net::discovery_key(o.transport.curve));
    log::info("worker {}: announcing on {}:{}", worker.endpoint(), where.group, where.port);
  }
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  // The resolved address on stdout, so scripts that asked for port 0 can find it.
  std::printf("listening on %s\n", worker.endpoint().c_str());
  std::fflush(stdout);
  worker.serve(g_stop);
  return 0;
}

HEARTH_COMMAND("worker", "serve as a ring device for a head (hearth run --workers)", run_worker);

}  // namespace
}  // namespace hearth::cli
