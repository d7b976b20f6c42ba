// A device profile file for `--profile` (worker, or a --plan auto head): one core, `ram_gib`
// of memory and a 0.2 GB/s disk, so tests choose how much of a small model fits a device
// instead of measuring the machine.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace hearth::testing {

inline std::string write_profile_file(const std::string& path, const std::string& name,
                                      double ram_gib) {
  const nlohmann::json j = {{"name", name},
                            {"os", "linux"},
                            {"cores", 1},
                            {"ram_total_gib", ram_gib},
                            {"ram_available_gib", ram_gib},
                            {"disk_seq_read_gbps", 0.2},
                            {"disk_random_read_gbps", 0.2},
                            {"cpu",
                             {{"gflops",
                               {{"f32", 8},
                                {"f16", 12},
                                {"bf16", 12},
                                {"q8_0", 20},
                                {"q4_0", 20},
                                {"q4_k", 30},
                                {"q5_k", 22},
                                {"q6_k", 22}}},
                              {"mem_read_gbps", 10},
                              {"kv_copy_ms", 0.00001}}},
                            {"link", {{"rtt_ms", 0}, {"bandwidth_mbps", 10000}}}};
  std::ofstream(path) << j.dump();
  return path;
}

}  // namespace hearth::testing
