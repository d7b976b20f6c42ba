#include "hearth/cluster/expert_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>

#include "hearth/base/clock.h"
#include "hearth/base/error.h"
#include "hearth/base/file_read.h"
#include "hearth/base/huge_buffer.h"
#include "hearth/base/log.h"
#include "hearth/gguf/tensor_type.h"
#include "hearth/residency/stream_plan.h"

namespace hearth::cluster {

namespace {

constexpr uint64_t kAlign = 4096;

// The three matrices of an expert, in the order they are read.
std::array<const compute::WeightView*, 3> matrices(const model::ExpertWeights& e) {
  return {&e.gate, &e.up, &e.down};
}

std::array<compute::WeightView*, 3> matrices(model::ExpertWeights& e) {
  return {&e.gate, &e.up, &e.down};
}

}  // namespace

uint64_t ExpertStore::expert_bytes(const model::ExpertWeights& e) {
  uint64_t b = 0;
  for (const auto* w : matrices(e)) b += compute::gguf_bytes(*w);
  return b;
}

uint64_t ExpertStore::buffer_bytes_for(const model::ModelWeights& views,
                                       std::span<const int> layers) {
  uint64_t slot = 0;
  for (int l : layers) {
    for (const auto& e : views.layers[static_cast<size_t>(l)].experts) {
      // Each matrix read in whole aligned blocks: at most one block more on each side.
      slot = std::max(slot, expert_bytes(e) + 3 * 2 * kAlign);
    }
  }
  slot = (slot + kAlign - 1) / kAlign * kAlign;
  return slot * views.hp.n_experts_used;
}

ExpertStore::ExpertStore(const std::string& path, const uint8_t* mapping,
                         const model::ModelWeights& views, std::span<const int> layers,
                         uint64_t resident_bytes)
    : path_(path), mapping_(mapping), weights_(views) {
  const model::HParams& hp = views.hp;
  max_experts_ = static_cast<int>(hp.n_experts_used);
  local_.assign(hp.n_layers, -1);
  uint64_t all = 0;
  for (int l : layers) {
    local_[static_cast<size_t>(l)] = static_cast<int>(layers_.size());
    Layer layer;
    layer.model_layer = l;
    layer.resident.assign(hp.n_experts, 0);
    layer.uses.assign(hp.n_experts, 0);
    for (const auto& e : views.layers[static_cast<size_t>(l)].experts) all += expert_bytes(e);
    layers_.push_back(std::move(layer));
  }
  // Resident experts spread evenly over the layers (every layer is as likely to be used).
  const uint64_t count = layers_.size() * static_cast<uint64_t>(hp.n_experts);
  const uint64_t mean = count > 0 ? all / count : 0;
  const uint64_t keep = mean > 0 ? std::min(count, resident_bytes / mean) : count;
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& l = layers_[i];
    l.keep = static_cast<uint32_t>(keep / layers_.size() + (i < keep % layers_.size() ? 1 : 0));
    for (uint32_t e = 0; e < l.keep; ++e) l.resident[e] = 1;
  }
  buffer_bytes_ = buffer_bytes_for(views, layers);
  slot_bytes_ = max_experts_ > 0 ? buffer_bytes_ / static_cast<uint64_t>(max_experts_) : 0;
  fd_ = open_direct(path_);
  direct_ = fd_ >= 0;
  if (fd_ < 0) fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    throw IoError(
        fmt::format("{}: cannot open for reading experts: {}", path_, std::strerror(errno)));
  }
  try {
    buffer_ = HugeBuffer(buffer_bytes_);  // page-aligned, as direct I/O needs
  } catch (...) {
    ::close(fd_);
    throw;
  }
  // Some file systems refuse direct I/O only when a read is made: try one block now, and read
  // through the page cache (dropping what is read) where it is refused.
  if (direct_ && buffer_bytes_ >= kAlign && ::pread(fd_, buffer_.data(), kAlign, 0) < 0) {
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ::close(fd_);
      fd_ = fd;
      direct_ = false;
      log::info("experts {}: direct I/O refused, reading through the page cache", path_);
    }
  }
  io_.start(kIoThreads, [this](const Read& r) {
    const bool ok = read(r);
    const std::lock_guard lock(done_mu_);
    failed_ = failed_ || !ok;
    if (--pending_ == 0) done_cv_.notify_all();
  });
}

ExpertStore::~ExpertStore() {
  io_.stop();
  if (fd_ >= 0) ::close(fd_);
}

void ExpertStore::acquire_experts(int layer, std::span<const int32_t> ids,
                                  std::span<model::ExpertWeights> views) {
  const int li = layer >= 0 && static_cast<size_t>(layer) < local_.size() ? local_[layer] : -1;
  if (li < 0 || static_cast<int>(ids.size()) > max_experts_) {
    throw UsageError(fmt::format("expert store: layer {} with {} experts is not this device's",
                                 layer, ids.size()));
  }
  Layer& l = layers_[static_cast<size_t>(li)];
  if (l.since_rerank >= kRerankUses) rerank(l);
  uint64_t reads = 0, bytes = 0, exact = 0;
  const double t0 = now_ms();
  for (size_t j = 0; j < ids.size(); ++j) {
    const auto e = static_cast<size_t>(ids[j]);
    ++l.uses[e];
    ++l.since_rerank;
    if (l.resident[e]) continue;
    const model::ExpertWeights& in_map = weights_.layers[static_cast<size_t>(layer)].experts[e];
    queue_reads(in_map, static_cast<int>(j), views[j]);
    ++reads;
    exact += expert_bytes(in_map);
  }
  for (const Read& r : batch_) bytes += r.bytes;
  if (!read_all()) {
    // The mapping still has the bytes: the engine faults them in, slower, same values.
    for (size_t j = 0; j < ids.size(); ++j) {
      views[j] = weights_.layers[static_cast<size_t>(layer)].experts[static_cast<size_t>(ids[j])];
    }
    reads = bytes = exact = 0;
  }
  const double ms = reads > 0 ? now_ms() - t0 : 0.0;
  const std::lock_guard lock(mu_);
  counters_.uses += ids.size();
  counters_.reads += reads;
  counters_.bytes_read += bytes;
  counters_.expert_bytes += exact;
  counters_.read_ms += ms;
}

void ExpertStore::queue_reads(const model::ExpertWeights& e, int slot, model::ExpertWeights& v) {
  uint8_t* dst = buffer_.data() + static_cast<uint64_t>(slot) * slot_bytes_;
  uint64_t pos = 0;
  const auto from = matrices(e);
  const auto to = matrices(v);
  for (size_t i = 0; i < from.size(); ++i) {
    const uint64_t off =
        static_cast<uint64_t>(static_cast<const uint8_t*>(from[i]->data) - mapping_);
    const uint64_t len = residency::aligned_span(off, compute::gguf_bytes(*from[i]), kAlign);
    batch_.push_back(Read{off / kAlign * kAlign, len, dst + pos});
    to[i]->data = dst + pos + off % kAlign;
    pos += len;
  }
}

bool ExpertStore::read_all() {
  if (batch_.empty()) return true;
  std::unique_lock lock(done_mu_);
  failed_ = false;
  pending_ = static_cast<int>(batch_.size());
  io_.push(batch_);
  batch_.clear();
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  return !failed_;
}

bool ExpertStore::read(const Read& r) {
  if (read_fully(fd_, r.dst, r.bytes, r.offset, !direct_) < 0) {
    log::warn("experts {}: read of {} bytes at {} failed: {}", path_, r.bytes, r.offset,
              std::strerror(errno));
    return false;
  }
  return true;
}

void ExpertStore::rerank(Layer& l) {
  const size_t n = l.uses.size();
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  // Most used first; on a tie the resident one stays, then the lower index.
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (l.uses[a] != l.uses[b]) return l.uses[a] > l.uses[b];
    return l.resident[a] > l.resident[b];
  });
  std::vector<uint8_t> next(n, 0);
  for (uint32_t i = 0; i < l.keep; ++i) next[order[i]] = 1;
  const auto& experts = weights_.layers[static_cast<size_t>(l.model_layer)].experts;
  for (size_t e = 0; e < n; ++e) {
    if (l.resident[e] && !next[e]) drop_pages(experts[e]);
  }
  l.resident = std::move(next);
  for (auto& u : l.uses) u /= 2;
  l.since_rerank = 0;
}

void ExpertStore::drop_pages(const model::ExpertWeights& e) const {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  for (const auto* w : matrices(e)) {
    const uint64_t off = static_cast<uint64_t>(static_cast<const uint8_t*>(w->data) - mapping_);
    // Whole pages only: a page shared with a neighbouring expert stays.
    const uint64_t begin = (off + page - 1) / page * page;
    const uint64_t end = (off + compute::gguf_bytes(*w)) / page * page;
    if (end <= begin) continue;
    ::madvise(const_cast<uint8_t*>(mapping_) + begin, end - begin, MADV_DONTNEED);
    ::posix_fadvise(fd_, static_cast<off_t>(begin), static_cast<off_t>(end - begin),
                    POSIX_FADV_DONTNEED);
  }
}

ExpertStore::Counters ExpertStore::counters() const {
  const std::lock_guard lock(mu_);
  return counters_;
}

uint64_t ExpertStore::resident_experts() const {
  uint64_t n = 0;
  for (const auto& l : layers_) n += l.keep;
  return n;
}

uint64_t ExpertStore::resident_bytes() const {
  uint64_t b = 0;
  for (const auto& [ptr, len] : ranges(true)) b += len;
  return b;
}

std::vector<std::pair<const uint8_t*, uint64_t>> ExpertStore::ranges(bool resident, int begin,
                                                                     int end) const {
  std::vector<std::pair<const uint8_t*, uint64_t>> out;
  for (const auto& l : layers_) {
    if (l.model_layer < begin || l.model_layer >= end) continue;
    const auto& experts = weights_.layers[static_cast<size_t>(l.model_layer)].experts;
    for (size_t e = 0; e < experts.size(); ++e) {
      if ((l.resident[e] != 0) != resident) continue;
      for (const auto* w : matrices(experts[e])) {
        out.emplace_back(static_cast<const uint8_t*>(w->data), compute::gguf_bytes(*w));
      }
    }
  }
  return out;
}

}  // namespace hearth::cluster
