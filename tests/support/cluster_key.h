// Transport options holding the tests' cluster key (HEARTH_KEY_FILE, set by the
// hearth_test_key CTest fixture), so a test can talk to a worker process as a member of its
// ring: the hostile-peer tests play a peer that holds the key and misbehaves.
#pragma once

#include <cstdlib>

#include "hearth/net/curve.h"
#include "hearth/net/transport.h"

namespace hearth::testing {

inline net::TransportOptions keyed(net::TransportOptions o = {}) {
  const char* path = std::getenv("HEARTH_KEY_FILE");
  if (path != nullptr && *path != '\0') {
    o.curve = net::cluster_curve_config(net::read_key_file(path));
  }
  return o;
}

}  // namespace hearth::testing
