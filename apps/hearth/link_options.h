// Ring link flags shared by the commands that open ring links (worker, run and serve with
// --workers): the cluster key that encrypts and authenticates every link (net/curve.h,
// docs/ring.md "Keys and encryption").
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "hearth/net/curve.h"

namespace hearth::cli {

struct LinkFlags {
  std::string key_file;  // empty: plain TCP
};

inline void add_link_options(CLI::App& app, LinkFlags& f) {
  app.add_option("--key-file", f.key_file,
                 "cluster key file (hearth keygen; the same file on every device): encrypt every "
                 "ring link and accept only devices holding it");
}

// The CURVE configuration of the links; empty (plain TCP) without --key-file. Throws IoError
// or FormatError naming the file when it cannot be read or is not a key file.
inline net::CurveConfig link_curve(const LinkFlags& f) {
  if (f.key_file.empty()) return {};
  return net::cluster_curve_config(net::read_key_file(f.key_file));
}

}  // namespace hearth::cli
