// Where a layer's matrices are read from during one pass. By default the engine reads its own
// views (into the file mapping, or its rows16 copies). A device whose weights do not fit in
// its memory streams part of them through a bounded buffer instead (residency/
// weight_streamer.h): before the engine uses a group of matrices it asks the feed for them,
// which may block until they have been read, and afterwards it gives them back so that the
// buffer space can take the next group.
//
// The groups are the order in which a layer reads its matrices; the feed sees acquire and
// release calls (or, for a group it splits into parts, acquire_part and release_part calls)
// in exactly that order, layer after layer, window after window.
#pragma once

#include <cstdint>
#include <span>

#include "hearth/compute/matmul.h"
#include "hearth/model/weights.h"

namespace hearth::model {

enum class MatrixGroup : int {
  kQkv = 0,     // wq, wk, wv (one dispatch in decode)
  kOut = 1,     // wo
  kGateUp = 2,  // w_gate, w_up
  kDown = 3,    // w_down
};
inline constexpr int kMatrixGroups = 4;

// The views of one group; unused slots are left untouched.
struct GroupViews {
  compute::WeightView* views[3] = {nullptr, nullptr, nullptr};
  int count = 0;
};

// One part of a group computed in parts: rows [row_begin, row_end) of the group's view `view`.
// A device that streams through a small buffer reads a large matrix in row slices; the engine
// computes each slice's rows of the product as soon as it is there (the same dot products, so
// the same bits).
struct GroupPart {
  int view = 0;
  int64_t row_begin = 0, row_end = 0;
};

class WeightFeed {
 public:
  virtual ~WeightFeed() = default;
  // How the engine computes group `g` of `layer`: empty (the default) for the whole group at
  // once between acquire and release; else part after part, each between acquire_part and
  // release_part, the parts covering every row of every view of the group.
  virtual std::span<const GroupPart> parts(int layer, MatrixGroup g) const {
    (void)layer;
    (void)g;
    return {};
  }
  // Before the engine reads part `part`: `slice` is the part's rows as a view into the file
  // mapping; the feed may point it elsewhere and may block until those bytes are there.
  virtual void acquire_part(int layer, MatrixGroup g, int part, compute::WeightView& slice) {
    (void)layer;
    (void)g;
    (void)part;
    (void)slice;
  }
  virtual void release_part(int layer, MatrixGroup g, int part) {
    (void)layer;
    (void)g;
    (void)part;
  }
  // Before the engine reads group `g` of model layer `layer`: `v` holds the engine's own views
  // (into the file mapping); the feed may point any of them elsewhere (a read buffer) and may
  // block until those bytes are there.
  virtual void acquire(int layer, MatrixGroup g, GroupViews& v) = 0;
  // After the engine's last read of the group: its buffer space may be reused.
  virtual void release(int layer, MatrixGroup g) = 0;
};

// Where a mixture's experts are read from (a device whose memory does not hold them all,
// cluster/expert_store.h). Which experts a row needs is known only after the layer's router,
// so they cannot come in layer order like the groups above: the engine asks for them there.
class ExpertFeed {
 public:
  virtual ~ExpertFeed() = default;
  // The most experts one acquire_experts call may ask for.
  virtual int max_experts() const = 0;
  // Before the engine multiplies by experts `ids` of model layer `layer` (distinct, at most
  // max_experts()): views[j] holds expert ids[j]'s views into the file mapping; the feed may
  // point them at a buffer of the same bytes, blocking until they are read. They stay valid
  // until the next call.
  virtual void acquire_experts(int layer, std::span<const int32_t> ids,
                               std::span<ExpertWeights> views) = 0;
};

}  // namespace hearth::model
