// `hearth bench kernels`: decode matvec GB/s against the measured memory read bandwidth,
// and prefill matmul GFLOP/s, per weight type and thread count. Prints figures only.
//
// Matvec weights: one quantized matrix copied until the copies exceed the last-level cache
// (2x LLC, >= 512 MiB), and each timed call reads the next copy, so every byte comes from
// DRAM as in decode. Each rep is a pair: a plain parallel read (compute::time_parallel_read,
// the widest loads this CPU has, same pool) of one cold copy, then matvec on the next cold
// copy. "read" is the median read GB/s of those pairs, "ratio" the median per-pair ratio
// matvec / read (the roofline fraction, robust to other work on the machine because both
// halves of a pair see the same state); "best" columns compare the fastest rep of each.
// Buffers are huge-page advised, as the engine's weights are. Types with a rows16 layout on
// this CPU get a second row ("q8_0/r16", JSON "layout": "rows16"): the layout the engine
// repacks to at load. Matmul rows give GFLOP/s and, in the ratio column, the fraction of the
// int8 multiply-add peak (compute::measure_int8_peak: the ISA's dot instruction with
// operands in registers, measured in the same run, before the matvec rows and again before the
// matmul rows, the faster kept), prefill's compute roofline; rows16 rows
// add that fraction for the kernel alone on weights and tokens in L2 (rows16_kernel_alone_gflops),
// in the last column and as JSON "kernel_peak_fraction". Where matmul runs a type on AMX tiles,
// its rows also time the AVX-512 VNNI pair kernel alone the same way, and print the tiles' gain
// over it ("amx_over_vnni", the AMX bar checked at run time), and the header gives the
// tile unit's own rate (compute::measure_amx_peak).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "bench_registry.h"
#include "bench_stats.h"
#include "hearth/base/huge_buffer.h"
#include "hearth/compute/bandwidth.h"
#include "hearth/compute/int8_peak.h"
#include "hearth/compute/matmul.h"
#include "hearth/compute/thread_pool.h"
#include "hearth/gguf/tensor_type.h"
#include "hearth/quant/stream_tuning.h"
#include "hearth/quant/type_traits.h"

namespace hearth::cli {
namespace {

using gguf::TensorType;

struct Shape {
  int64_t rows, cols;
};

// "ROWSxCOLS" with rows a multiple of 16 (a rows16 group) and cols of 256 (a K-quant
// super-block), each at most 2^20 and together at most 2^28 elements (the f32 source is
// 1 GiB then); nullopt otherwise.
std::optional<Shape> parse_shape(const std::string& text) {
  const size_t x = text.find('x');
  if (x == std::string::npos || x == 0 || x + 1 == text.size()) return std::nullopt;
  const auto number = [](std::string_view digits) -> std::optional<int64_t> {
    if (digits.size() > 7) return std::nullopt;
    int64_t v = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return std::nullopt;
      v = v * 10 + (c - '0');
    }
    return v;
  };
  const auto rows = number(std::string_view(text).substr(0, x));
  const auto cols = number(std::string_view(text).substr(x + 1));
  constexpr int64_t kMax = int64_t{1} << 20;
  if (!rows || !cols || *rows <= 0 || *cols <= 0 || *rows > kMax || *cols > kMax ||
      *rows % 16 != 0 || *cols % 256 != 0 || *rows * *cols > (int64_t{1} << 28)) {
    return std::nullopt;
  }
  return Shape{*rows, *cols};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Cheap deterministic pseudo-random values in [-1, 1): speed does not depend on the
// distribution, and a normal generator would dominate the set-up time.
std::vector<float> random_matrix(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));  // (n) f32
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x = static_cast<float>(static_cast<int64_t>(s >> 40) - (1 << 23)) / static_cast<float>(1 << 23);
  }
  return v;
}

// Whether matmul runs on AMX tiles: "on" (usable, with the AVX-512 kernels they sit beside),
// "off" (usable, but turned off with HEARTH_AMX=0 or another ISA forced with HEARTH_ISA) or
// "none" (no AMX-INT8 here). Compare the two with HEARTH_AMX=0 and without.
const char* amx_state() {
  if (quant::amx_in_matmul()) return "on";
  return quant::amx_usable() ? "off" : "none";
}

size_t llc_bytes() {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return static_cast<size_t>(std::max({l3, l2, 0L}));
}

// Rows16 matmul's kernel alone (r16's, for w's type), in GFLOP/s: each thread of the pool runs
// the kernel on a pair of groups of its own (one group where the ISA has no dot_pair) against
// Rows16::call_tokens prepared tokens, weights and tokens held in L2, for as many
// multiply-adds as the matmul of n_tokens. Beside the matmul's figure it splits the gap to the int8
// peak into the kernel's own and what the matmul adds around it: the weights fetched from memory,
// each token's output row written, the tokens quantized and prepared, the threads' shares.
double rows16_kernel_alone_gflops(compute::ThreadPool& pool, const quant::Rows16& r16,
                                  const compute::WeightView& w, const float* x, int64_t n_tokens) {
  const auto& act_traits = quant::traits(quant::traits(w.type).vec_dot_type);
  const int calls_tokens = r16.call_tokens;
  const size_t ab = r16.act_bytes(w.cols);
  const size_t gb = r16.group_bytes(w.cols);
  std::vector<uint8_t> acts(ab * static_cast<size_t>(calls_tokens));
  std::vector<uint8_t> row(*gguf::row_bytes(act_traits.type, static_cast<uint64_t>(w.cols)));
  for (int t = 0; t < calls_tokens; ++t) {
    act_traits.quantize(x + static_cast<int64_t>(t) * w.cols, row.data(), w.cols);
    r16.prepare_act(w.cols, row.data(), acts.data() + static_cast<size_t>(t) * ab);
  }
  const int64_t per_unit = r16.dot_pair != nullptr ? 2 : 1;
  const int64_t unit_rows = quant::kRows16 * per_unit;
  const int64_t n_units = w.rows / unit_rows;
  const double unit_macs = static_cast<double>(unit_rows * w.cols * calls_tokens);
  const double macs = static_cast<double>(w.rows * w.cols * n_tokens);
  const int calls = std::max(1, static_cast<int>(macs / unit_macs / pool.size()));
  const auto* groups = static_cast<const uint8_t*>(w.data);
  std::vector<double> times;
  for (int rep = -1; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](int ti, int) {
      const auto stride = static_cast<size_t>(unit_rows);
      std::vector<float> out(static_cast<size_t>(calls_tokens) * stride);
      const uint8_t* unit = groups + static_cast<size_t>((ti % n_units) * per_unit) * gb;
      for (int c = 0; c < calls; ++c) {
        if (per_unit == 2) {
          r16.dot_pair(w.cols, unit, acts.data(), ab, calls_tokens, out.data(), stride, nullptr, 0);
        } else {
          r16.dot(w.cols, unit, acts.data(), ab, calls_tokens, out.data(), stride);
        }
      }
    });
    if (rep >= 0) times.push_back(seconds_since(t0));
  }
  return 2.0 * unit_macs * calls * pool.size() / median(times) / 1e9;
}

// The decode kernel alone with its weights in cache: each thread runs it over rows of its
// own (about 512 KiB: whole rows16 groups, or GGUF rows) again and again, against an
// activation quantized and prepared once, so no byte comes from DRAM and no call pays for
// the pool or the activation. GB/s over all threads, median of 15 samples. Beside the DRAM
// figure it tells a kernel bound by its arithmetic (cached rate near the read bandwidth) from
// one that streams poorly (cached rate well above it). The row kernel is the one matvec picks
// (compute::decode_rows).
double matvec_cached_gbps(compute::ThreadPool& pool, const compute::WeightView& w, size_t row_bytes,
                          const float* x) {
  const auto& tr = quant::traits(w.type);
  const auto& act_traits = quant::traits(tr.vec_dot_type);
  const bool r16 = w.layout == compute::WeightLayout::kRows16;
  std::vector<uint8_t> quantized(*gguf::row_bytes(act_traits.type, static_cast<uint64_t>(w.cols)));
  const void* act = x;
  if (act_traits.type != TensorType::kF32) {
    act_traits.quantize(x, quantized.data(), w.cols);
    act = quantized.data();
  }
  std::vector<uint8_t> prepared;
  if (r16) {
    prepared.resize(tr.rows16->act_bytes(w.cols));
    tr.rows16->prepare_act(w.cols, act, prepared.data());
    act = prepared.data();
  } else if (tr.prepared != nullptr) {
    prepared.resize(tr.prepared->bytes(w.cols));
    tr.prepared->prepare(w.cols, act, prepared.data());
    act = prepared.data();
  }
  const compute::DecodeRows decode =
      compute::decode_rows(tr, row_bytes, prepared.empty() ? quantized.size() : prepared.size());
  // Rows a thread: whole groups of 16 in about 512 KiB, at most its share of the matrix (at
  // least one group; w.rows is a multiple of 16).
  const int64_t rows = std::max<int64_t>(
      quant::kRows16, std::min<int64_t>(w.rows / pool.size(),
                                        static_cast<int64_t>((size_t{512} << 10) / row_bytes)) /
                          quant::kRows16 * quant::kRows16);
  const double bytes = static_cast<double>(row_bytes) * static_cast<double>(rows);
  const int passes = std::max(1, static_cast<int>(8e6 / bytes));  // about 8 MB a sample
  const auto* base = static_cast<const uint8_t*>(w.data);
  std::vector<double> gbps;
  for (int rep = -1; rep < 15; ++rep) {  // one warm-up
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](int ti, int) {
      // A matrix too small for a share each is read by every thread from its start.
      const int64_t first = (ti + 1) * rows <= w.rows ? ti * rows : 0;
      const uint8_t* mine = base + static_cast<size_t>(first) * row_bytes;
      float out[quant::kRows16];
      for (int p = 0; p < passes; ++p) {
        for (int64_t r = 0; r < rows; r += quant::kRows16) {
          const uint8_t* at = mine + static_cast<size_t>(r) * row_bytes;
          if (r16) {
            tr.rows16->dot(w.cols, at, act, 0, 1, out, 0);
          } else {
            decode.run(w.cols, at, 0, quant::kRows16, act, out);
          }
        }
      }
    });
    if (rep >= 0) gbps.push_back(bytes * passes * pool.size() / seconds_since(t0) / 1e9);
  }
  return median(gbps);
}

int run_bench_kernels(const Args& args) {
  CLI::App app{"Quantized matvec/matmul kernels vs memory bandwidth", "bench kernels"};
  bool json = false, quick = false;
  std::vector<int> thread_counts{1, 2};
  std::vector<std::string> type_names{"q4_k", "q6_k", "q8_0", "q4_0", "q5_k", "f16", "bf16", "f32"};
  int reps = 25;
  std::vector<std::string> shape_names;
  std::vector<int64_t> token_counts;
  app.add_flag("--json", json, "print one JSON object as the last line of stdout");
  app.add_flag("--quick", quick, "fewer reps, one matvec shape, matmul at 64 tokens only");
  app.add_option("--shapes", shape_names,
                 "matvec shapes ROWSxCOLS, e.g. 4096x8192,4096x14336 (rows a multiple of 16, "
                 "cols of 256)")
      ->delimiter(',');
  app.add_option("--matmul-tokens", token_counts,
                 "matmul token counts on the 4096x4096 matrix, e.g. 64,512; 0 skips matmul")
      ->delimiter(',');
  app.add_option("--threads", thread_counts, "thread counts, e.g. 1,2")->delimiter(',');
  app.add_option("--types", type_names, "weight types, e.g. q4_k,q6_k")->delimiter(',');
  app.add_option("--reps", reps, "timed matvec calls per case (median reported)");
  if (auto code = parse(app, args)) return *code;

  std::vector<TensorType> types;
  for (const auto& name : type_names) {
    const auto t = gguf::tensor_type_from_name(name);
    if (!t || !quant::is_supported(*t) || quant::traits(*t).vec_dot == nullptr) {
      fmt::print(stderr, "hearth bench kernels: unsupported weight type '{}'\n", name);
      return 2;
    }
    types.push_back(*t);
  }
  for (int t : thread_counts) {
    if (t < 1 || t > 1024) {
      fmt::print(stderr, "hearth bench kernels: bad thread count {}\n", t);
      return 2;
    }
  }
  if (quick) reps = std::min(reps, 9);
  reps = std::max(reps, 1);

  std::vector<Shape> shapes = quick
                                  ? std::vector<Shape>{{14336, 4096}}
                                  : std::vector<Shape>{{4096, 4096}, {14336, 4096}, {4096, 14336}};
  if (!shape_names.empty()) {
    shapes.clear();
    for (const auto& name : shape_names) {
      const auto shape = parse_shape(name);
      if (!shape) {
        fmt::print(stderr,
                   "hearth bench kernels: bad shape '{}' (want ROWSxCOLS, rows a multiple of 16, "
                   "cols a multiple of 256, at most 268435456 elements)\n",
                   name);
        return 2;
      }
      shapes.push_back(*shape);
    }
  }
  std::vector<int64_t> matmul_tokens =
      quick ? std::vector<int64_t>{64} : std::vector<int64_t>{64, 512};
  if (!token_counts.empty()) {
    matmul_tokens.clear();
    for (int64_t n : token_counts) {
      if (n < 0 || n > 4096) {
        fmt::print(stderr, "hearth bench kernels: bad matmul token count {} (0 to 4096)\n", n);
        return 2;
      }
      if (n > 0) matmul_tokens.push_back(n);
    }
  }
  const Shape matmul_shape{4096, 4096};
  const size_t footprint = std::max<size_t>(2 * llc_bytes(), size_t{512} << 20);

  fmt::print(
      "hearth bench kernels: isa {}, amx {}, stream tuning {}, hardware threads {}, LLC {} MiB, "
      "matvec footprint {} MiB\n",
      quant::isa_name(quant::active_isa()), amx_state(), quant::stream_tuning().name,
      std::thread::hardware_concurrency(), llc_bytes() >> 20, footprint >> 20);

  std::vector<compute::ThreadPool*> pools;
  std::vector<std::unique_ptr<compute::ThreadPool>> owned;
  std::vector<double> mem_gbps;
  for (int t : thread_counts) {
    owned.push_back(std::make_unique<compute::ThreadPool>(t));
    pools.push_back(owned.back().get());
    mem_gbps.push_back(
        compute::measure_memory_read_gbps(*pools.back(), size_t{1} << 30, quick ? 3 : 5));
    fmt::print(
        "memory read bandwidth, {} thread(s): {:.1f} GB/s (stream-style reads of a 1 GiB buffer, "
        "best 64 MiB window)\n",
        t, mem_gbps.back());
  }
  // Prefill's compute roofline: the int8 dot idiom's issue rate with operands in registers.
  std::vector<compute::Int8Peak> peaks;
  for (size_t i = 0; i < pools.size(); ++i) {
    peaks.push_back(compute::measure_int8_peak(*pools[i]));
    if (peaks.back().gmacs > 0) {
      fmt::print(
          "int8 multiply-add peak, {} thread(s): {:.0f} GMAC/s = {:.0f} GFLOP/s ({}, operands "
          "in registers)\n",
          thread_counts[i], peaks.back().gmacs, 2 * peaks.back().gmacs, peaks.back().idiom);
    }
  }
  // The AMX tile unit's own rate, where this CPU has one.
  std::vector<double> amx_peaks;
  for (size_t i = 0; i < pools.size(); ++i) {
    amx_peaks.push_back(compute::measure_amx_peak(*pools[i]).gmacs);
    if (amx_peaks.back() > 0) {
      fmt::print("AMX tile peak, {} thread(s): {:.0f} GMAC/s (tdpbusd, operands in tiles)\n",
                 thread_counts[i], amx_peaks.back());
    }
  }
  compute::ThreadPool& prep_pool = *pools[static_cast<size_t>(
      std::max_element(thread_counts.begin(), thread_counts.end()) - thread_counts.begin())];

  nlohmann::json rows = nlohmann::json::array();
  fmt::print("\n{:<6} {:<9} {:>12} {:>7} {:>9} {:>8} {:>8} {:>7} {:>9} {:>9} {:>9} {:>7} {:>7}\n",
             "op", "type", "shape", "threads", "ms", "GB/s", "read", "ratio", "GFLOP/s",
             "best GB/s", "best read", "ratio", "cached");

  for (const Shape& shape : shapes) {
    const auto src =
        random_matrix(shape.rows * shape.cols, static_cast<uint64_t>(shape.rows + shape.cols));
    const auto x = random_matrix(shape.cols, 3);
    std::vector<float> y(static_cast<size_t>(shape.rows));
    for (TensorType type : types) {
      const auto& tr = quant::traits(type);
      const size_t rb = *gguf::row_bytes(type, static_cast<uint64_t>(shape.cols));
      const size_t bytes = rb * static_cast<size_t>(shape.rows);
      const size_t copies = std::max<size_t>(2, (footprint + bytes - 1) / bytes);
      HugeBuffer weights(bytes * copies);  // (copies, rows, cols) in type, GGUF rows
      prep_pool.run([&](int ti, int nt) {
        for (int64_t r = ti; r < shape.rows; r += nt) {
          tr.quantize(src.data() + r * shape.cols, weights.data() + static_cast<size_t>(r) * rb,
                      shape.cols);
        }
      });
      for (size_t c = 1; c < copies; ++c)
        std::memcpy(weights.data() + c * bytes, weights.data(), bytes);
      const compute::WeightView gguf_view{type, shape.rows, shape.cols, weights.data()};
      // The engine decodes from the rows16 layout where this CPU has kernels for it; measure
      // both layouts.
      HugeBuffer repacked;  // (copies, rows16 groups) when the type has a rows16 layout here
      size_t r16_bytes = 0;
      if (compute::rows16_worthwhile(gguf_view)) {
        r16_bytes = compute::rows16_bytes(gguf_view);
        repacked = HugeBuffer(r16_bytes * copies);
        compute::repack_rows16(prep_pool, gguf_view, repacked.data());
        for (size_t c = 1; c < copies; ++c)
          std::memcpy(repacked.data() + c * r16_bytes, repacked.data(), r16_bytes);
      }
      for (int layout = 0; layout < (r16_bytes > 0 ? 2 : 1); ++layout) {
        const bool r16 = layout == 1;
        const uint8_t* base = r16 ? repacked.data() : weights.data();
        const size_t stride = r16 ? r16_bytes : bytes;
        for (size_t ti = 0; ti < pools.size(); ++ti) {
          compute::ThreadPool& pool = *pools[ti];
          // Paired samples: a plain parallel read of one cold copy, then matvec on the next
          // cold copy, on the same pool, back to back. Both see the same machine state, so
          // the per-pair ratio is meaningful even while other work shares the cores.
          std::vector<double> mv_gbps, rd_gbps, ratios;
          size_t copy = 0;
          for (int r = -2; r < reps; ++r) {  // two warm-up pairs
            const double rd_s = compute::time_parallel_read(pool, base + copy * stride, stride);
            copy = (copy + 1) % copies;
            const compute::WeightView w{
                type, shape.rows, shape.cols, base + copy * stride,
                r16 ? compute::WeightLayout::kRows16 : compute::WeightLayout::kGguf};
            copy = (copy + 1) % copies;
            const auto t0 = std::chrono::steady_clock::now();
            compute::matvec(pool, w, x.data(), y.data());
            const double mv_s = seconds_since(t0);
            if (r < 0) continue;
            mv_gbps.push_back(static_cast<double>(stride) / mv_s / 1e9);
            rd_gbps.push_back(static_cast<double>(stride) / rd_s / 1e9);
            ratios.push_back(rd_s / mv_s);
          }
          const double gbps = median(mv_gbps);
          const double read_gbps = median(rd_gbps);
          const double ratio = median(ratios);
          const double best_gbps = *std::max_element(mv_gbps.begin(), mv_gbps.end());
          const double best_read = *std::max_element(rd_gbps.begin(), rd_gbps.end());
          const double s = static_cast<double>(stride) / gbps / 1e9;
          const double gflops = 2.0 * static_cast<double>(shape.rows * shape.cols) / s / 1e9;
          const std::string label =
              fmt::format("{}{}", gguf::tensor_type_name(type), r16 ? "/r16" : "");
          const compute::WeightView first{
              type, shape.rows, shape.cols, base,
              r16 ? compute::WeightLayout::kRows16 : compute::WeightLayout::kGguf};
          const double cached_gbps =
              matvec_cached_gbps(pool, first, stride / static_cast<size_t>(shape.rows), x.data());
          fmt::print(
              "{:<6} {:<9} {:>12} {:>7} {:>9.3f} {:>8.1f} {:>8.1f} {:>7.2f} {:>9.1f} {:>9.1f} "
              "{:>9.1f} {:>7.2f} {:>7.2f}\n",
              "matvec", label, fmt::format("{}x{}", shape.rows, shape.cols), pool.size(), s * 1e3,
              gbps, read_gbps, ratio, gflops, best_gbps, best_read, best_gbps / best_read,
              cached_gbps / read_gbps);
          rows.push_back({{"op", "matvec"},
                          {"type", gguf::tensor_type_name(type)},
                          {"layout", r16 ? "rows16" : "gguf"},
                          {"shape", {shape.rows, shape.cols}},
                          {"threads", pool.size()},
                          {"ms", s * 1e3},
                          {"gbps", gbps},
                          {"mem_read_gbps", read_gbps},
                          {"ratio", ratio},
                          {"best_gbps", best_gbps},
                          {"best_mem_read_gbps", best_read},
                          {"best_ratio", best_gbps / best_read},
                          {"cached_gbps", cached_gbps},
                          {"cached_ratio", cached_gbps / read_gbps},
                          {"gflops", gflops}});
        }
      }
    }
  }

  // Prefill: weights of one 4096x4096 matrix, activations for n tokens.
  if (!matmul_tokens.empty()) {
    // The peak probed again now, and the faster of the two kept: a probe that other work on the
    // machine slowed would make every fraction below too high.
    for (size_t i = 0; i < pools.size(); ++i) {
      const compute::Int8Peak again = compute::measure_int8_peak(*pools[i]);
      if (again.gmacs > peaks[i].gmacs) {
        peaks[i] = again;
        fmt::print(
            "int8 multiply-add peak, {} thread(s), probed again before matmul: {:.0f} GMAC/s\n",
            thread_counts[i], again.gmacs);
      }
    }
    fmt::print(
        "matmul: ratio = fraction of the int8 peak; then (rows16) the same for the kernel alone, "
        "weights and tokens in L2; on AMX tiles, the VNNI pair kernel alone and AMX over it\n");
    const Shape shape = matmul_shape;
    const auto src = random_matrix(shape.rows * shape.cols, 11);
    const int64_t max_tokens = *std::max_element(matmul_tokens.begin(), matmul_tokens.end());
    const auto x = random_matrix(max_tokens * shape.cols, 12);
    std::vector<float> y(static_cast<size_t>(max_tokens * shape.rows));  // (tokens, rows) f32
    for (TensorType type : types) {
      const auto& tr = quant::traits(type);
      const size_t rb = *gguf::row_bytes(type, static_cast<uint64_t>(shape.cols));
      std::vector<uint8_t> weights(rb * static_cast<size_t>(shape.rows));  // (rows, cols) in type
      prep_pool.run([&](int ti, int nt) {
        for (int64_t r = ti; r < shape.rows; r += nt) {
          tr.quantize(src.data() + r * shape.cols, weights.data() + static_cast<size_t>(r) * rb,
                      shape.cols);
        }
      });
      const compute::WeightView gguf_view{type, shape.rows, shape.cols, weights.data()};
      HugeBuffer repacked;
      std::vector<compute::WeightView> views{gguf_view};
      if (compute::rows16_worthwhile(gguf_view)) {
        repacked = HugeBuffer(compute::rows16_bytes(gguf_view));
        views.push_back(compute::repack_rows16(prep_pool, gguf_view, repacked.data()));
      }
      for (const compute::WeightView& w : views) {
        const bool r16 = w.layout == compute::WeightLayout::kRows16;
        const std::string label =
            fmt::format("{}{}", gguf::tensor_type_name(type), r16 ? "/r16" : "");
        for (size_t ti = 0; ti < pools.size(); ++ti) {
          compute::ThreadPool& pool = *pools[ti];
          for (int64_t n_tokens : matmul_tokens) {
            std::vector<double> times;
            const int mm_reps = n_tokens >= 256 ? 3 : 5;
            for (int r = -1; r < mm_reps; ++r) {
              const auto t0 = std::chrono::steady_clock::now();
              compute::matmul(pool, w, x.data(), n_tokens, y.data());
              if (r >= 0) times.push_back(seconds_since(t0));
            }
            const double s = median(times);
            const double gflops =
                2.0 * static_cast<double>(shape.rows * shape.cols * n_tokens) / s / 1e9;
            // Fraction of the int8 peak (matmul's "ratio": 2 flops per multiply-add).
            const double peak_gflops = 2 * peaks[ti].gmacs;
            const double peak_fraction = peak_gflops > 0 ? gflops / peak_gflops : 0;
            const double kernel_fraction =
                r16 && peak_gflops > 0
                    ? rows16_kernel_alone_gflops(pool, *tr.rows16, w, x.data(), n_tokens) /
                          peak_gflops
                    : 0;
            // The VNNI pair kernel the AMX one replaces, timed alone the same way.
            const quant::Rows16* vnni = r16 ? quant::rows16_vnni_beside_amx(type) : nullptr;
            const double vnni_fraction =
                vnni != nullptr && kernel_fraction > 0
                    ? rows16_kernel_alone_gflops(pool, *vnni, w, x.data(), n_tokens) / peak_gflops
                    : 0;
            fmt::print("{:<6} {:<9} {:>12} {:>7} {:>9.3f} {:>8} {:>8} {:>7} {:>9.1f} {:>9}{}\n",
                       "matmul", label, fmt::format("{}x{}x{}", shape.rows, shape.cols, n_tokens),
                       pool.size(), s * 1e3, "-", "-",
                       peak_gflops > 0 ? fmt::format("{:.2f}", peak_fraction) : "-", gflops,
                       kernel_fraction > 0 ? fmt::format("{:.2f}", kernel_fraction) : "-",
                       vnni_fraction > 0 ? fmt::format(" {:>9.2f} {:>7.2f}", vnni_fraction,
                                                       kernel_fraction / vnni_fraction)
                                         : "");
            nlohmann::json row = {{"op", "matmul"},
                                  {"type", gguf::tensor_type_name(type)},
                                  {"layout", r16 ? "rows16" : "gguf"},
                                  {"shape", {shape.rows, shape.cols}},
                                  {"tokens", n_tokens},
                                  {"threads", pool.size()},
                                  {"ms", s * 1e3},
                                  {"gbps", static_cast<double>(weights.size()) / s / 1e9},
                                  {"gflops", gflops},
                                  {"peak_fraction", peak_fraction}};
            if (kernel_fraction > 0) row["kernel_peak_fraction"] = kernel_fraction;
            if (vnni_fraction > 0) {
              row["vnni_kernel_peak_fraction"] = vnni_fraction;
              row["amx_over_vnni"] = kernel_fraction / vnni_fraction;
            }
            rows.push_back(std::move(row));
          }
        }
      }
    }
  }

  if (json) {
    // mem_read_gbps: the bandwidth at the largest thread count (the decode roofline).
    nlohmann::json by_threads = nlohmann::json::object();
    for (size_t i = 0; i < thread_counts.size(); ++i)
      by_threads[std::to_string(thread_counts[i])] = mem_gbps[i];
    const size_t imax = static_cast<size_t>(
        std::max_element(thread_counts.begin(), thread_counts.end()) - thread_counts.begin());
    nlohmann::json peak_by_threads = nlohmann::json::object();
    for (size_t i = 0; i < thread_counts.size(); ++i)
      peak_by_threads[std::to_string(thread_counts[i])] = peaks[i].gmacs;
    nlohmann::json amx_by_threads = nlohmann::json::object();
    for (size_t i = 0; i < thread_counts.size(); ++i) {
      if (amx_peaks[i] > 0) amx_by_threads[std::to_string(thread_counts[i])] = amx_peaks[i];
    }
    nlohmann::json out = {{"mem_read_gbps", mem_gbps[imax]},
                          {"mem_read_gbps_by_threads", by_threads},
                          {"int8_peak_gmacs_by_threads", peak_by_threads},
                          {"int8_peak_idiom", peaks[imax].idiom},
                          {"isa", quant::isa_name(quant::active_isa())},
                          {"amx", amx_state()},
                          {"stream_tuning", quant::stream_tuning().name},
                          {"rows", rows}};
    if (!amx_by_threads.empty()) out["amx_peak_gmacs_by_threads"] = amx_by_threads;
    fmt::print("{}\n", out.dump());
  }
  return 0;
}

HEARTH_BENCH(
    "kernels",
    "quantized matvec/matmul vs memory bandwidth ([--json] [--threads 1,2] [--types ..] [--quick])",
    run_bench_kernels);

}  // namespace
}  // namespace hearth::cli
