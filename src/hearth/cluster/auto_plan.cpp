#include "hearth/cluster/auto_plan.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <variant>

#include "hearth/base/clock.h"
#include "hearth/base/error.h"
#include "hearth/base/log.h"
#include "hearth/cluster/model_identity.h"
#include "hearth/model/hparams.h"
#include "hearth/plan/halda.h"
#include "hearth/profiler/model_profiler.h"

namespace hearth::cluster {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Sends `m` with request id `rid` and waits for the Pong that answers it, skipping anything
// else the worker sends meanwhile. Returns the seconds it took.
double round_trip(net::Connection& c, const net::Message& m, uint64_t rid, int timeout_ms) {
  const double t0 = now_seconds();
  c.send(m, rid);
  for (;;) {
    const auto env = c.recv(net::Millis{timeout_ms}, "Pong (link probe)");
    if (const auto* e = std::get_if<net::ErrorMsg>(&env.body)) throw NetError(e->text);
    if (std::holds_alternative<net::Pong>(env.body) && env.header.request_id == rid)
      return now_seconds() - t0;
  }
}

LinkMeasure probe_link(net::Connection& c, uint32_t dim, const AutoPlanOptions& o) {
  net::Activations act;  // one token's hidden state, the size a ring hop carries in decode
  act.dim = dim;
  act.segments = {net::SeqSegment{0, 0, 1}};
  act.hidden.assign(dim, 0.25f);  // (1, dim) f32
  std::vector<double> small, big;
  uint64_t rid = 0x4c494e4b00ull;  // "LINK"
  for (int i = 0; i < o.link_probes; ++i) {
    small.push_back(round_trip(c, net::Ping{rid, 0}, rid, o.handshake_timeout_ms));
    ++rid;
    big.push_back(round_trip(c, act, rid, o.handshake_timeout_ms));
    ++rid;
  }
  LinkMeasure m;
  m.rtt_s = median(small);
  m.hidden_s = median(big);
  const double bytes = 4.0 * dim;
  m.bandwidth_bps = bytes / std::max(1e-6, m.hidden_s - m.rtt_s);
  return m;
}

}  // namespace

namespace {

struct ProbedWorker {
  profile::DeviceProfile device;
  LinkMeasure link;
};

// Greets the worker at `addr`, checks it runs this model, asks for its profile, times the
// link to it and says Stop.
ProbedWorker probe_worker(const std::string& addr, const std::string& where,
                          const net::ModelIdentity& identity, uint32_t dim,
                          const gguf::GgufFile& file, const AutoPlanOptions& o) {
  try {
    auto c = net::connect(addr, o.transport);
    net::Hello hello;
    hello.model = identity;
    hello.device_name = "head";
    hello.data_endpoint = "planning";  // no data is sent in this session
    c->send(hello);
    auto env = c->recv(net::Millis{o.handshake_timeout_ms}, "HelloAck");
    if (const auto* r = std::get_if<net::Refuse>(&env.body))
      throw NetError(fmt::format("refused: {}", r->reason));
    const auto* ack = std::get_if<net::HelloAck>(&env.body);
    if (!ack)
      throw NetError(fmt::format("answered Hello with {}", net::msg_type_name(env.header.type)));
    if (ack->model != identity) {
      throw UsageError(fmt::format("{} runs a different model ({}) than the head ({}: {})", where,
                                   describe(ack->model), file.path(), describe(identity)));
    }
    const std::string name = ack->device_name.empty() ? addr : ack->device_name;
    c->send(net::Profile{}, 1);
    std::string text;
    for (;;) {
      env = c->recv(net::Millis{o.profile_timeout_ms}, "Profile");
      if (const auto* e = std::get_if<net::ErrorMsg>(&env.body)) throw NetError(e->text);
      if (const auto* p = std::get_if<net::Profile>(&env.body)) {
        text = p->json;
        break;
      }
    }
    if (text.empty())
      throw UsageError(fmt::format("{} sent no profile (it was started without one)", where));
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw FormatError(fmt::format("{}: profile is not JSON: {}", where, e.what()));
    }
    ProbedWorker out;
    out.device = profile::device_from_json(j, where + " profile");
    out.device.name = name;
    out.device.head = false;
    out.link = probe_link(*c, dim, o);
    c->send(net::Stop{"planning done"});
    return out;
  } catch (const UsageError&) {
    throw;
  } catch (const FormatError& e) {
    throw UsageError(e.what());
  } catch (const Error& e) {
    throw NetError(fmt::format("{}: {}", where, e.what()));
  }
}

// Runs Halda over out.devices (head first) with out.links and out.addresses filled in, and
// derives the windows and the workers kept.
void solve(AutoPlan& out, const profile::ModelProfile& model, const AutoPlanOptions& o) {
  // A device's link is the hop into it (profile::LinkProfile): a worker's is the measured
  // head -> worker link, so whichever devices Halda keeps, each hop is costed by the link that
  // reaches its receiver. The head's (the hop back from the last member) is the head's link to
  // the last worker of the file, exact unless Halda drops that worker.
  for (size_t m = 0; m < out.devices.size() && !out.links.empty(); ++m) {
    const auto& l = out.links[m == 0 ? out.links.size() - 1 : m - 1];
    out.devices[m].link.rtt_s = l.rtt_s;
    out.devices[m].link.bandwidth_bps = l.bandwidth_bps;
  }
  plan::Problem& p = out.problem;
  p.devices = out.devices;
  p.model = model;
  p.options.ctx = o.ctx;
  p.options.model = o.cost_model;
  plan::HaldaOptions ho;
  ho.select_devices = o.select_devices;
  ho.rounds = o.rounds;
  out.plan = plan::halda(p, ho);
  if (!out.plan.feasible || out.plan.W == 0)
    throw UsageError(fmt::format("--plan auto: Halda found no feasible plan: {}", out.plan.reason));
  out.w.clear();
  out.workers.clear();
  out.dropped.clear();
  out.clamped = false;
  for (size_t m = 0; m < out.plan.devices.size(); ++m) {
    const auto& pd = out.plan.devices[m];
    int w = static_cast<int>(pd.w);
    if (pd.relay && w == 0) {
      w = 1;
      out.clamped = true;
    }
    if (m == 0) {
      out.w.push_back(w);  // the head may hold no layers (embedding and output only)
    } else if (w > 0) {
      out.w.push_back(w);
      out.workers.push_back(out.addresses[m - 1]);
    } else {
      out.dropped.push_back(out.addresses[m - 1]);
    }
  }
}

}  // namespace

AutoPlan plan_ring(const gguf::GgufFile& file, profile::DeviceProfile head,
                   const AutoPlanOptions& o) {
  if (o.workers.empty()) throw UsageError("--plan auto needs --workers");
  const auto identity = model_identity(file);
  const uint32_t dim = model::load_hparams(file).dim;
  AutoPlan out;
  head.name = "head";
  head.head = true;
  out.devices.push_back(head);
  for (size_t i = 0; i < o.workers.size(); ++i) {
    const auto where = fmt::format("worker {} (device {})", o.workers[i], i + 1);
    auto probed = probe_worker(o.workers[i], where, identity, dim, file, o);
    out.devices.push_back(std::move(probed.device));
    out.links.push_back(probed.link);
    out.addresses.push_back(o.workers[i]);
  }
  profile::ModelProfile mp = profiler::profile_model_file(file.path());
  profiler::set_kv_types(mp, o.kv_types);
  solve(out, std::move(mp), o);
  return out;
}

Replan halda_replan(const gguf::GgufFile& file, const AutoPlan& first, AutoPlanOptions o,
                    RingOptions base) {
  struct Known {
    std::map<std::string, ProbedWorker> workers;  // by control address
  };
  auto known = std::make_shared<Known>();
  for (size_t i = 0; i < first.addresses.size(); ++i) {
    known->workers[first.addresses[i]] = ProbedWorker{first.devices[i + 1], first.links[i]};
  }
  const profile::DeviceProfile head = first.devices.at(0);
  const profile::ModelProfile model = first.problem.model;
  const net::ModelIdentity identity = model_identity(file);
  const uint32_t dim = model::load_hparams(file).dim;
  return [&file, known, head, model, identity, dim, o = std::move(o),
          base = std::move(base)](const std::vector<std::string>& workers) {
    RingOptions next = base;
    next.workers.clear();
    next.plan.clear();
    if (workers.empty()) return next;  // the head alone holds every layer
    AutoPlan ap;
    ap.devices.push_back(head);
    for (const auto& addr : workers) {
      auto it = known->workers.find(addr);
      if (it == known->workers.end()) {  // a device new to this head: gather its profile
        auto probed = probe_worker(addr, fmt::format("worker {}", addr), identity, dim, file, o);
        it = known->workers.emplace(addr, std::move(probed)).first;
      }
      ap.devices.push_back(it->second.device);
      ap.links.push_back(it->second.link);
      ap.addresses.push_back(addr);
    }
    solve(ap, model, o);
    next.workers = ap.workers;
    next.plan = ap.w;
    std::string windows;
    for (int w : ap.w) windows += (windows.empty() ? "" : ",") + std::to_string(w);
    log::info(
        "ring head: Halda re-plan over {} devices: windows {} (k = {}), predicted TPOT "
        "{:.2f} ms, solved in {:.1f} ms",
        ap.devices.size(), windows, ap.plan.k, ap.plan.predicted_tpot_ms, ap.plan.solve_ms);
    return next;
  };
}

namespace {
// The cost model's prediction of the chosen plan under `p` (a's problem, maybe another ctx).
plan::Prediction predict_chosen(const AutoPlan& a, const plan::Problem& p) {
  std::vector<uint32_t> w, n;
  std::vector<bool> relay;
  for (const auto& d : a.plan.devices) {
    w.push_back(d.w);
    n.push_back(d.n);
    relay.push_back(d.relay);
  }
  return plan::predict(p, w, n, relay);
}
}  // namespace

double predicted_tpot_ms_at(const AutoPlan& a, uint32_t ctx) {
  plan::Problem p = a.problem;
  p.options.ctx = std::max<uint32_t>(ctx, 1);
  return predict_chosen(a, p).tpot_s * 1e3;
}

plan::PrefillModel prefill_model_of(const AutoPlan& a) {
  return plan::prefill_model(a.problem, predict_chosen(a, a.problem));
}

double predicted_verify_trip_ms(const AutoPlan& a, int64_t rows) {
  const auto pred = predict_chosen(a, a.problem);
  return plan::verify_trip_s(pred, plan::prefill_model(a.problem, pred), rows) * 1e3;
}

nlohmann::json auto_plan_to_json(const AutoPlan& a) {
  auto j = plan::plan_to_json(a.plan);
  nlohmann::json links = nlohmann::json::array();
  for (size_t i = 0; i < a.links.size(); ++i) {
    links.push_back({{"to", a.devices[i + 1].name},
                     {"rtt_ms", a.links[i].rtt_s * 1e3},
                     {"hidden_ms", a.links[i].hidden_s * 1e3},
                     {"bandwidth_mbps", a.links[i].bandwidth_bps * 8 / 1e6}});
  }
  j["links"] = links;
  j["dropped_workers"] = a.dropped;
  j["relay_clamped"] = a.clamped;
  return j;
}

}  // namespace hearth::cluster
