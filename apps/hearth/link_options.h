// Ring link flags shared by the commands that open ring links (worker, run and serve with
// --workers): the cluster key that encrypts and authenticates every link (net/curve.h,
// docs/ring.md "Keys and encryption"). Links are private by default: a device that must open
// links and finds no key refuses to start; plain TCP takes an explicit --insecure.
#pragma once

#include <fmt/core.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <string>
#include <string_view>

#include "hearth/base/error.h"
#include "hearth/base/log.h"
#include "hearth/net/curve.h"

namespace hearth::cli {

struct LinkFlags {
  std::string key_file;   // empty: the default key path (net::default_key_path)
  bool insecure = false;  // plain TCP: no encryption, no authentication
  int recover = 4;        // head: lost-device recoveries before giving up (0: fail at once)
};

inline void add_link_options(CLI::App& app, LinkFlags& f) {
  app.add_option("--key-file", f.key_file,
                 "cluster key file (hearth keygen; the same file on every device) that encrypts "
                 "every ring link and admits only devices holding it (default: $HEARTH_KEY_FILE, "
                 "else ~/.config/hearth/cluster.key)");
  app.add_flag("--insecure", f.insecure,
               "plain TCP ring links, neither encrypted nor authenticated: anyone who can reach "
               "the ports can use this device (warns)");
}

// Head only (run and serve with --workers).
inline void add_recover_option(CLI::App& app, LinkFlags& f) {
  app.add_option("--recover", f.recover,
                 "with --workers: times the ring may re-form without lost workers (their layers "
                 "go to the others, KV caches are rebuilt) before the head gives up; 0: stop at "
                 "the first lost worker, naming it")
      ->check(CLI::Range(0, 64));
}

// LAN discovery (worker --announce, head --workers auto): where announcements go.
inline void add_discovery_option(CLI::App& app, std::string& where) {
  app.add_option("--discovery", where,
                 "multicast group and UDP port of LAN announcements, GROUP[:PORT] (default "
                 "239.255.72.72:47219; every device of a ring must use the same)");
}

// The CURVE configuration of the ring links of `who` (the command, for warnings), read from
// --key-file or the default path. --insecure: plain TCP, with a warning. Throws UsageError
// when no key exists at the default path (saying how to make one), IoError or FormatError
// naming the file when it cannot be read or is not a key file.
inline net::CurveConfig link_curve(const LinkFlags& f, std::string_view who) {
  if (f.insecure) {
    if (!f.key_file.empty()) {
      throw UsageError("--insecure and --key-file contradict each other: give one of them");
    }
    log::warn(
        "{}: --insecure: ring links are plain TCP, neither encrypted nor authenticated; anyone "
        "who can reach this device's ports can read the traffic and use the device",
        who);
    return {};
  }
  const std::string path = f.key_file.empty() ? net::default_key_path() : f.key_file;
  std::error_code ec;
  if (f.key_file.empty() && !std::filesystem::exists(path, ec)) {
    throw UsageError(fmt::format(
        "no cluster key at {}. Ring links are encrypted and admit only devices holding the "
        "same key: run `hearth keygen` on one device, copy the file to this path on every "
        "device (or give --key-file PATH), or pass --insecure for plain TCP",
        path));
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    log::warn("{}: key file {} can be read by other users of this machine (chmod 600 {})", who,
              path, path);
  }
  return net::cluster_curve_config(net::read_key_file(path));
}

}  // namespace hearth::cli
