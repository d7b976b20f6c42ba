#include "hearth/net/curve.h"

#include <fcntl.h>
#include <unistd.h>
#include <zmq.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/core.h>

#include "hearth/base/error.h"

namespace hearth::net {

namespace {

constexpr size_t kZ85KeyChars = 40;

bool is_z85_key(const std::string& s) {
  if (s.size() != kZ85KeyChars) return false;
  std::array<uint8_t, 32> raw{};
  return zmq_z85_decode(raw.data(), s.c_str()) != nullptr;
}

}  // namespace

CurveKeypair generate_curve_keypair() {
  if (zmq_has("curve") == 0) throw IoError("libzmq was built without CURVE support");
  std::array<char, kZ85KeyChars + 1> pub{};
  std::array<char, kZ85KeyChars + 1> sec{};
  if (zmq_curve_keypair(pub.data(), sec.data()) != 0) {
    throw IoError(fmt::format("zmq_curve_keypair: {}", zmq_strerror(zmq_errno())));
  }
  return CurveKeypair{std::string(pub.data()), std::string(sec.data())};
}

void write_key_file(const std::string& path, const CurveKeypair& keys) {
  // Created 0600 so the secret is not readable by other users of the device.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw IoError(errno_message("open " + path));
  const std::string text = fmt::format(
      "# hearth cluster key: copy to every device of the cluster, keep it private\n"
      "public {}\nsecret {}\n",
      keys.public_key, keys.secret_key);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      const std::string msg = errno_message("write " + path);
      ::close(fd);
      throw IoError(msg);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) throw IoError(errno_message("close " + path));
}

CurveKeypair read_key_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError(errno_message("open key file " + path));
  CurveKeypair keys;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name;
    std::string value;
    std::string extra;
    fields >> name >> value >> extra;
    if (!extra.empty() || (name != "public" && name != "secret") || !is_z85_key(value)) {
      throw FormatError(fmt::format(
          "key file {} line {}: expected 'public <40 Z85 chars>' or 'secret <40 Z85 chars>'", path,
          line_no));
    }
    (name == "public" ? keys.public_key : keys.secret_key) = value;
  }
  if (keys.public_key.empty() || keys.secret_key.empty()) {
    throw FormatError(fmt::format("key file {}: needs both a public and a secret line", path));
  }
  return keys;
}

std::string default_key_path() {
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::string(v) : std::string();
  };
  if (auto p = env("HEARTH_KEY_FILE"); !p.empty()) return p;
#ifdef _WIN32
  if (auto p = env("APPDATA"); !p.empty()) return p + "\\hearth\\cluster.key";
#endif
  if (auto p = env("XDG_CONFIG_HOME"); !p.empty()) return p + "/hearth/cluster.key";
  if (auto p = env("HOME"); !p.empty()) return p + "/.config/hearth/cluster.key";
  return "hearth-cluster.key";
}

CurveConfig cluster_curve_config(const CurveKeypair& keys) {
  return CurveConfig{keys.public_key, keys.secret_key, keys.public_key, keys.public_key};
}

}  // namespace hearth::net
