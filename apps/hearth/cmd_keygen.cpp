// `hearth keygen [PATH]`: writes a new cluster key, the file every device of one home cluster
// shares (net/curve.h). With it, ring links are encrypted and only devices holding the file
// can connect (docs/ring.md, "Keys and encryption").
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
  if (auto code = parse(app, args)) return *code;
  if (path.empty()) path = net::default_key_path();
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(path, ec) && !force) {
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
  net::write_key_file(path, net::generate_curve_keypair());
  fmt::print("wrote the cluster key to {}\n", path);
  fmt::print(
      "copy it to every device of the cluster (same path there, or --key-file PATH), and keep it "
      "private: whoever holds it can join the ring\n");
  return 0;
}

HEARTH_COMMAND("keygen", "write a new cluster key for encrypted ring links", run_keygen);

}  // namespace
}  // namespace hearth::cli
