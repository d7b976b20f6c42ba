#include "ring_setup.h"

#include <fmt/core.h>

#include <chrono>
#include <thread>

#include "hearth/base/clock.h"
#include "hearth/base/error.h"
#include "hearth/cluster/model_identity.h"
#include "hearth/cluster/windows.h"

namespace hearth::cli {
namespace {

std::vector<std::string> split_addresses(const std::string& text) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos <= text.size();) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    if (comma > pos) out.push_back(text.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return out;
}

// Addresses of the idle devices announcing now, in address order.
std::vector<std::string> idle_devices(const net::DiscoveryListener& l) {
  std::vector<std::string> out;
  for (const auto& d : l.devices()) {
    if (!d.busy) out.push_back(d.address);
  }
  return out;
}

}  // namespace

void add_ring_options(CLI::App& app, RingFlags& f) {
  app.add_option("--workers", f.workers,
                 "be the head of a ring: worker control addresses in ring order "
                 "(tcp://H:P,tcp://H:P; see hearth worker), or 'auto' for the workers "
                 "announcing this model on the LAN (hearth worker --announce)");
  app.add_option("--plan", f.plan,
                 "with --workers: layer window per device incl. this one (w0,w1,...), 'even' "
                 "or 'auto' (Halda on measured profiles)");
  add_auto_plan_options(app, f.auto_plan);
  add_link_options(app, f.link);
  add_recover_option(app, f.link);
  add_discovery_option(app, f.discovery);
  app.add_option("--pipeline-chunk", f.pipeline_chunk,
                 "prompt tokens per chunk going around the ring, chunks following each other "
                 "(0: the whole prompt in one trip; auto: the chunk the cost model finds "
                 "fastest under --plan auto, else 128 with workers)");
  app.add_flag("--prefill-serial", f.prefill_serial,
               "send each prompt chunk around the ring only after the one before has come "
               "back (the batches of prima.cpp; default: chunks follow each other)");
  app.add_option("--discover-time", f.discover_s,
                 "with --workers auto: seconds to listen for announcements before forming the "
                 "ring (workers announce every second)")
      ->check(CLI::Range(0.5, 600.0));
}

void apply_pipeline_chunk(const RingFlags& f, cluster::RingOptions& ro) {
  ro.prefill_pipelined = !f.prefill_serial;
  if (f.pipeline_chunk == "auto") {
    ro.prefill_chunk = cluster::kAutoChunk;
    return;
  }
  try {
    size_t used = 0;
    const long long v = std::stoll(f.pipeline_chunk, &used);
    if (used != f.pipeline_chunk.size() || v < 0 || v > (1 << 24)) throw std::invalid_argument("");
    ro.prefill_chunk = v;
  } catch (const std::exception&) {
    throw UsageError(fmt::format(
        "--pipeline-chunk must be auto or a number of tokens >= 0 (got '{}')", f.pipeline_chunk));
  }
}

HeadRing start_head_ring(const gguf::GgufFile& file, const ModelOptions& mo, const RingFlags& f,
                         cluster::RingOptions base, std::string_view who) {
  HeadRing out;
  apply_pipeline_chunk(f, base);
  const net::CurveConfig curve = link_curve(f.link, who);
  base.transport.curve = curve;
  std::vector<std::string> workers;
  if (f.workers == "auto") {
    if (f.plan != "even" && f.plan != "auto") {
      throw UsageError(
          "--workers auto takes --plan even or auto: a manual plan needs the "
          "workers named, in ring order");
    }
    const auto where = net::parse_discovery_address(f.discovery);
    out.discovery = std::make_unique<net::DiscoveryListener>(where, cluster::model_identity(file),
                                                             net::discovery_key(curve));
    fmt::print(stderr, "{}: --workers auto: listening on {}:{} for {:.1f} s\n", who, where.group,
               where.port, f.discover_s);
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(f.discover_s * 1e3)));
    workers = idle_devices(*out.discovery);
    for (const auto& d : out.discovery->devices()) {
      fmt::print(stderr, "  found {} ({}){}\n", d.address, d.name, d.busy ? ": busy, skipped" : "");
    }
    if (workers.empty()) {
      throw UsageError(fmt::format(
          "--workers auto: no idle worker holding {} ({}) announced on {}:{} within {:.1f} s "
          "({} other announcements ignored: another model, wire protocol or cluster key). "
          "Start `hearth worker --announce` on each device with the same model file and "
          "cluster key, or name them with --workers",
          file.path(), cluster::describe(cluster::model_identity(file)), where.group, where.port,
          f.discover_s, out.discovery->rejected()));
    }
  } else {
    workers = split_addresses(f.workers);
    if (workers.empty()) throw UsageError("--workers: no address given");
  }

  cluster::Replan replan;
  std::vector<std::string> planned_over = workers;
  cluster::RingOptions first = base;
  first.workers = workers;
  if (f.plan == "auto") {
    const auto ao = auto_plan_options(file, mo, workers, f.auto_plan, curve);
    out.auto_plan = make_auto_plan(file, mo, workers, f.auto_plan, who, curve);
    first.workers = out.auto_plan->workers;
    first.plan = out.auto_plan->w;
    first.prefill_model = cluster::prefill_model_of(*out.auto_plan);
    replan = cluster::halda_replan(file, *out.auto_plan, ao, base);
  } else {
    if (f.plan != "even") {
      first.plan = cluster::parse_plan(f.plan, static_cast<int>(workers.size()) + 1);
    }
    replan = cluster::proportional_replan(first);
  }
  out.ring = std::make_unique<cluster::RecoveringRing>(file, first, std::move(replan),
                                                       f.link.recover, planned_over);
  if (out.discovery) {
    net::DiscoveryListener* l = out.discovery.get();
    out.ring->set_candidates([l] { return idle_devices(*l); });
  }
  return out;
}

}  // namespace hearth::cli
