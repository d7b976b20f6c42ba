// `hearth keygen [PATH]`: writes a new cluster key, the file every device of one home cluster
// shares (net/curve.h). With it, ring links are encrypted and only devices holding the file
// can connect (docs/ring.md, "Keys and encryption"). `--show-code` prints the key as a pairing
// code to type on a device the file cannot be copied to, where `--from-code CODE` writes it.
#include <fmt/core.h>
#include <filesystem>

#include "commands.h"
#include "hearth/base/error.h"
#include "hearth/net/curve.h"

namespace hearth::cli {
namespace {

int run_keygen(const Args& args) {
  CLI::App app{"Write a new cluster key (copy the file to every device of the cluster)", "keygen"};
  std::string path;
  bool force = false;
  app.add_option("path", path, "where to write it (default: " + net::default_key_path() + ")");
  app.add_flag("--force", force,
               "replace an existing file (devices holding the old key are shut out)");
  bool show_code = false;
  std::string from_code;
  app.add_flag("--show-code", show_code,
               "print the key at PATH as a pairing code (writing a new key first if there is "
               "none), to type on another device with --from-code; whoever sees it can join");
  app.add_option("--from-code", from_code,
                 "write the key a pairing code (hearth keygen --show-code on another device) "
                 "stands for");
  if (auto code = parse(app, args)) return *code;
  if (path.empty()) path = net::default_key_path();
  namespace fs = std::filesystem;
  std::error_code ec;
  if (show_code && !from_code.empty()) {
    throw UsageError("--show-code and --from-code: give one of them");
  }
  const bool exists = fs::exists(path, ec);
  if (show_code && exists && !force) {
    fmt::print("{}\n", net::pairing_code(net::read_key_file(path)));
    return 0;
  }
  net::CurveKeypair keys;
  if (!from_code.empty()) {
    try {
      keys = net::keypair_from_pairing_code(from_code);
    } catch (const FormatError& e) {
      throw UsageError(e.what());
    }
    if (exists && !force) {
      const auto held = net::read_key_file(path);
      if (held.secret_key == keys.secret_key) {
        fmt::print("{} already holds this cluster key\n", path);
        return 0;
      }
    }
  } else {
    keys = net::generate_curve_keypair();
  }
  if (exists && !force) {
    fmt::print(stderr,
               "hearth keygen: {} exists; the devices that hold it would be shut out by a new key "
               "(--force replaces it)\n",
               path);
    return 1;
  }
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) {
    fs::create_directories(parent, ec);
    if (ec) throw IoError(fmt::format("cannot create {}: {}", parent.string(), ec.message()));
  }
  if (force) fs::remove(path, ec);  // write_key_file creates 0600; an old file keeps its mode
  net::write_key_file(path, keys);
  fmt::print("wrote the cluster key to {}\n", path);
  if (show_code) {
    fmt::print("pairing code (type it on another device: hearth keygen --from-code CODE):\n{}\n",
               net::pairing_code(keys));
    return 0;
  }
  fmt::print(
      "copy it to every device of the cluster (same path there, or --key-file PATH), and keep it "
      "private: whoever holds it can join the ring\n");
  return 0;
}

HEARTH_COMMAND("keygen", "write a new cluster key for encrypted ring links", run_keygen);

}  // namespace
}  // namespace hearth::cli
