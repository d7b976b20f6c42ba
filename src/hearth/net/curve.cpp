#include "hearth/net/curve.h"

#include <fcntl.h>
#include <unistd.h>
#include <zmq.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

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

namespace {

// Crockford's base32: no I, L, O or U, so nothing reads as another character; decoding takes
// either case and the look-alikes O -> 0, I and L -> 1.
constexpr char kCode32[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
constexpr size_t kSecretBytes = 32;
constexpr size_t kCodeDataChars = 52;  // 256 bits in 5-bit characters (4 zero bits of padding)
constexpr size_t kCodeCheckChars = 2;  // 10 bits: a weighted sum of the data characters

int code32_value(char c) {
  if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  if (c == 'O') c = '0';
  if (c == 'I' || c == 'L') c = '1';
  for (int v = 0; v < 32; ++v) {
    if (kCode32[v] == c) return v;
  }
  return -1;
}

// Sum of (position + 1) * value modulo the prime 1021 (fits 10 bits): weights and value
// changes are nonzero and below the prime, so every mistyped character and every swap of two
// different neighbours changes it.
unsigned code_check(const std::vector<int>& data) {
  unsigned sum = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    sum = (sum + static_cast<unsigned>(i + 1) * static_cast<unsigned>(data[i])) % 1021;
  }
  return sum;
}

}  // namespace

std::string pairing_code(const CurveKeypair& keys) {
  std::array<uint8_t, kSecretBytes> raw{};
  if (keys.secret_key.size() != kZ85KeyChars ||
      zmq_z85_decode(raw.data(), keys.secret_key.c_str()) == nullptr) {
    throw FormatError("pairing code: the secret key is not 40 Z85 characters");
  }
  std::vector<int> data;
  uint32_t acc = 0;
  int bits = 0;
  for (uint8_t b : raw) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) {
      data.push_back(static_cast<int>((acc >> (bits - 5)) & 31));
      bits -= 5;
    }
  }
  data.push_back(static_cast<int>((acc << (5 - bits)) & 31));  // the last bit and 4 zero bits
  const unsigned check = code_check(data);
  data.push_back(static_cast<int>(check >> 5));
  data.push_back(static_cast<int>(check & 31));
  std::string chars;
  for (int x : data) chars += kCode32[x];
  std::string out;
  for (size_t i = 0; i < chars.size(); ++i) {
    if (i > 0 && i % 4 == 0) out += '-';
    out += chars[i];
  }
  return out;
}

CurveKeypair keypair_from_pairing_code(std::string_view code) {
  std::vector<int> v;
  for (size_t i = 0; i < code.size(); ++i) {
    const char c = code[i];
    if (c == '-' || c == ' ') continue;
    const int x = code32_value(c);
    if (x < 0) {
      throw FormatError(
          fmt::format("pairing code: '{}' at position {} is not a code character", c, i + 1));
    }
    v.push_back(x);
  }
  if (v.size() != kCodeDataChars + kCodeCheckChars) {
    throw FormatError(fmt::format("pairing code: {} characters, a code has {} (groups of 4)",
                                  v.size(), kCodeDataChars + kCodeCheckChars));
  }
  std::array<uint8_t, kSecretBytes> raw{};
  uint32_t acc = 0;
  int bits = 0;
  size_t n = 0;
  for (size_t i = 0; i < kCodeDataChars; ++i) {
    acc = (acc << 5) | static_cast<uint32_t>(v[i]);
    bits += 5;
    if (bits >= 8) {
      if (n < kSecretBytes) raw[n++] = static_cast<uint8_t>(acc >> (bits - 8));
      bits -= 8;
    }
  }
  const unsigned check = (static_cast<unsigned>(v[kCodeDataChars]) << 5) |
                         static_cast<unsigned>(v[kCodeDataChars + 1]);
  v.resize(kCodeDataChars);
  if ((acc & ((1u << bits) - 1)) != 0 || check != code_check(v)) {
    throw FormatError("pairing code: the check does not match (a character mistyped?)");
  }
  std::array<char, kZ85KeyChars + 1> sec{};
  std::array<char, kZ85KeyChars + 1> pub{};
  if (zmq_z85_encode(sec.data(), raw.data(), raw.size()) == nullptr ||
      zmq_curve_public(pub.data(), sec.data()) != 0) {
    throw IoError(
        fmt::format("pairing code: cannot derive the public key: {}", zmq_strerror(zmq_errno())));
  }
  return CurveKeypair{std::string(pub.data()), std::string(sec.data())};
}

CurveConfig cluster_curve_config(const CurveKeypair& keys) {
  return CurveConfig{keys.public_key, keys.secret_key, keys.public_key, keys.public_key};
}

}  // namespace hearth::net
