// CURVE: key files round-trip and are validated; encrypted links work with the shared
// cluster key and refuse a device holding a different one.
#include "hearth/net/curve.h"

#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "hearth/base/clock.h"
#include "hearth/base/error.h"
#include "hearth/net/transport.h"

namespace hearth::net {
namespace {

using namespace std::chrono_literals;

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "hearth_curve_" + name;
}

TEST(Curve, KeyFileRoundTripsAndIsValidated) {
  const CurveKeypair k = generate_curve_keypair();
  EXPECT_EQ(k.public_key.size(), 40u);
  EXPECT_NE(k.public_key, k.secret_key);
  const std::string path = temp_path("good.key");
  write_key_file(path, k);
  const CurveKeypair back = read_key_file(path);
  EXPECT_EQ(back.public_key, k.public_key);
  EXPECT_EQ(back.secret_key, k.secret_key);
  std::remove(path.c_str());

  const std::string bad = temp_path("bad.key");
  std::ofstream(bad) << "public " << k.public_key << "\nsecret tooshort\n";
  try {
    read_key_file(bad);
    FAIL() << "short key accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
  std::ofstream(bad) << "public " << k.public_key << "\n";
  EXPECT_THROW(read_key_file(bad), FormatError);
  std::remove(bad.c_str());
  EXPECT_THROW(read_key_file(temp_path("missing.key")), IoError);
}

TransportOptions with_key(const CurveKeypair& k) {
  TransportOptions o;
  o.curve = cluster_curve_config(k);
  o.send_timeout_ms = 500;
  o.linger_ms = 0;
  return o;
}

TEST(Curve, PairingCodeRoundTripsAndCatchesTypos) {
  for (int round = 0; round < 20; ++round) {
    const auto keys = generate_curve_keypair();
    const std::string code = pairing_code(keys);
    ASSERT_EQ(code.size(), 54u + 13u) << code;  // 54 characters in groups of 4
    auto back = keypair_from_pairing_code(code);
    EXPECT_EQ(back.secret_key, keys.secret_key);
    EXPECT_EQ(back.public_key, keys.public_key);  // derived from the secret
    // Case, separators and look-alikes do not matter.
    std::string loose;
    for (char c : code) {
      if (c == '-') continue;
      loose += c == '0' ? 'o' : c == '1' ? 'L' : static_cast<char>(std::tolower(c));
    }
    EXPECT_EQ(keypair_from_pairing_code(loose).secret_key, keys.secret_key);
    // Every mistyped character and every swap of two different neighbours is caught.
    const std::string alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    std::string bare;
    for (char c : code)
      if (c != '-') bare += c;
    for (size_t i = 0; i < bare.size(); ++i) {
      for (char c : alphabet) {
        if (c == bare[i]) continue;
        std::string typo = bare;
        typo[i] = c;
        EXPECT_THROW(keypair_from_pairing_code(typo), FormatError) << typo;
      }
      if (i + 1 < bare.size() && bare[i] != bare[i + 1]) {
        std::string swapped = bare;
        std::swap(swapped[i], swapped[i + 1]);
        EXPECT_THROW(keypair_from_pairing_code(swapped), FormatError) << swapped;
      }
    }
  }
  EXPECT_THROW(keypair_from_pairing_code(""), FormatError);
  EXPECT_THROW(keypair_from_pairing_code("UUUU"), FormatError);  // U is not a code character
  EXPECT_THROW(keypair_from_pairing_code(std::string(55, '0')), FormatError);
}

TEST(Curve, SharedClusterKeyConnectsAndAForeignKeyDoesNot) {
  const CurveKeypair cluster = generate_curve_keypair();
  auto server = listen("tcp://127.0.0.1:0", with_key(cluster));
  auto member = connect(server->endpoint(), with_key(cluster));
  member->send(Ping{1, 0});
  const Incoming in = server->recv(3s, "Ping over CURVE");
  server->send(in.from, Pong{1, 0});
  EXPECT_EQ(std::get<Pong>(member->recv(3s, "Pong").body).nonce, 1u);

  // A device with another key file never gets a message through, and learns so quickly.
  auto stranger = connect(server->endpoint(), with_key(generate_curve_keypair()));
  const double t0 = now_ms();
  bool refused = false;
  try {
    stranger->send(Ping{2, 0});
    stranger->recv(3s, "Pong");
  } catch (const NetError&) {
    refused = true;
  }
  EXPECT_TRUE(refused);
  EXPECT_LT(now_ms() - t0, 4000.0);
  EXPECT_FALSE(server->recv_for(200ms).has_value());

  // A plain-text client cannot talk to an encrypted listener either.
  TransportOptions plain;
  plain.send_timeout_ms = 300;
  plain.linger_ms = 0;
  auto clear = connect(server->endpoint(), plain);
  EXPECT_THROW(
      {
        clear->send(Ping{3, 0});
        clear->recv(1s, "Pong");
      },
      NetError);
  EXPECT_FALSE(server->recv_for(100ms).has_value());
}

// The server key alone is not enough: a client that knows the cluster's public key (say, from
// a leaked log) but holds another keypair passes CURVE's own checks, and the ZAP handler
// refuses it because its proven key is not the cluster key. A listener configured without a
// client key accepts it (what ZAP changes), and honest members keep working alongside.
TEST(Curve, ZapRefusesAClientKeyThatIsNotTheClusterKey) {
  const CurveKeypair cluster = generate_curve_keypair();
  const CurveKeypair other = generate_curve_keypair();
  TransportOptions knows_server = with_key(cluster);
  knows_server.curve.public_key = other.public_key;
  knows_server.curve.secret_key = other.secret_key;
  knows_server.send_timeout_ms = 300;

  auto server = listen("tcp://127.0.0.1:0", with_key(cluster));
  auto impostor = connect(server->endpoint(), knows_server);
  EXPECT_THROW(
      {
        impostor->send(Ping{7, 0});
        impostor->recv(2s, "Pong");
      },
      NetError);
  EXPECT_FALSE(server->recv_for(200ms).has_value());

  auto member = connect(server->endpoint(), with_key(cluster));
  member->send(Ping{8, 0});
  const Incoming in = server->recv(3s, "Ping from a member");
  server->send(in.from, Pong{8, 0});
  EXPECT_EQ(std::get<Pong>(member->recv(3s, "Pong").body).nonce, 8u);

  TransportOptions open = with_key(cluster);
  open.curve.client_public_key.clear();  // any client that knows the server key
  auto lenient = listen("tcp://127.0.0.1:0", open);
  auto accepted = connect(lenient->endpoint(), knows_server);
  accepted->send(Ping{9, 0});
  EXPECT_EQ(std::get<Ping>(lenient->recv(3s, "Ping from another key").msg.body).nonce, 9u);
}

}  // namespace
}  // namespace hearth::net
