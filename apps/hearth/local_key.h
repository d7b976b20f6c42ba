// A cluster key private to one run of a command that starts its own local workers (`hearth
// demo`, `hearth bench serve`): its ring is encrypted like any other, without asking the user
// for a key. Written 0600 in a fresh 0700 temporary directory, removed with this object.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

#include "hearth/base/error.h"
#include "hearth/net/curve.h"

namespace hearth::cli {

class LocalClusterKey {
 public:
  LocalClusterKey() {
    std::string dir = (std::filesystem::temp_directory_path() / "hearth-key-XXXXXX").string();
    if (::mkdtemp(dir.data()) == nullptr) throw IoError(errno_message("mkdtemp " + dir));
    dir_ = dir;
    path_ = dir + "/cluster.key";
    keys_ = net::generate_curve_keypair();
    net::write_key_file(path_, keys_);
  }
  ~LocalClusterKey() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  LocalClusterKey(const LocalClusterKey&) = delete;
  LocalClusterKey& operator=(const LocalClusterKey&) = delete;

  const std::string& path() const { return path_; }  // for the workers' --key-file
  net::CurveConfig curve() const { return net::cluster_curve_config(keys_); }

 private:
  std::string dir_, path_;
  net::CurveKeypair keys_;
};

}  // namespace hearth::cli
