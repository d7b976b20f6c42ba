// Where a layer's matrices are read from during one pass. By default the engine reads its own
// views (into the file mapping, or its rows16 copies). A device whose weights do not fit in
// its memory streams part of them through a bounded buffer instead (residency/
// weight_streamer.h): before the engine uses a group of matrices it asks the feed for them,
// which may block until they have been read, and afterwards it gives them back so that the
// buffer space can take the next group.
//
// The groups are the order in which a layer reads its matrices; the feed sees acquire and
// release calls in exactly that order, layer after layer, window after window.
#pragma once

#include "hearth/compute/matmul.h"

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

class WeightFeed {
 public:
  virtual ~WeightFeed() = default;
  // Before the engine reads group `g` of model layer `layer`: `v` holds the engine's own views
  // (into the file mapping); the feed may point any of them elsewhere (a read buffer) and may
  // block until those bytes are there.
  virtual void acquire(int layer, MatrixGroup g, GroupViews& v) = 0;
  // After the engine's last read of the group: its buffer space may be reused.
  virtual void release(int layer, MatrixGroup g) = 0;
};

}  // namespace hearth::model
