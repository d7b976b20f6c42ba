// /metrics rendering: batch counters and per-device memory pressure, with device names from
// peers escaped so that they cannot break the Prometheus text format.
#include <gtest/gtest.h>

#include <string>

#include "hearth/serve/metrics.h"

namespace hearth::serve {
namespace {

TEST(Metrics, BatchCountersAddUp) {
  Metrics m;
  m.batch(3, 3);
  m.batch(2, 40);
  const std::string out = m.render();
  EXPECT_NE(out.find("\nhearth_forward_passes_total 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("\nhearth_batch_sequences_total 5\n"), std::string::npos) << out;
  EXPECT_NE(out.find("\nhearth_batch_rows_total 43\n"), std::string::npos) << out;
}

TEST(Metrics, DevicePressurePerDeviceWithEscapedNames) {
  Metrics m;
  EXPECT_EQ(m.render().find("hearth_device_memory_pressure"), std::string::npos);
  auto device = [](std::string name, double p, double max, uint64_t steps) {
    DevicePressure d;
    d.name = std::move(name);
    d.pressure = p;
    d.pressure_max = max;
    d.steps = steps;
    return d;
  };
  m.set_devices({device("head", 0.25, 0.5, 7), device("evil\"} 1\nx\\", 0.125, 0.75, 3)});
  const std::string out = m.render();
  EXPECT_NE(out.find("\nhearth_device_memory_pressure{device=\"0\",name=\"head\"} 0.25\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\nhearth_device_memory_pressure{device=\"1\",name=\"evil\\\"} 1\\nx\\\\\"} "
                     "0.125\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\nhearth_device_memory_pressure_max{device=\"1\",name="), std::string::npos);
  EXPECT_NE(out.find("\nhearth_device_steps_total{device=\"0\",name=\"head\"} 7\n"),
            std::string::npos)
      << out;
  // No raw newline from a name: every line starts with '#' or a metric name.
  size_t at = 0;
  while ((at = out.find('\n', at)) != std::string::npos && at + 1 < out.size()) {
    ++at;
    EXPECT_TRUE(out[at] == '#' || out.compare(at, 7, "hearth_") == 0) << out.substr(at, 40);
  }
}

}  // namespace
}  // namespace hearth::serve
