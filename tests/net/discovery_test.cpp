// LAN discovery (net/discovery.h): the announcement format against hostile bytes, and real
// UDP multicast between an Announcer and a DiscoveryListener in this process.
#include "hearth/net/discovery.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include "hearth/base/clock.h"
#include "hearth/base/error.h"

namespace hearth::net {
namespace {

Announcement sample() {
  Announcement a;
  a.model = {5 << 20, 0x0123456789abcdefull};
  a.endpoint = "tcp://0.0.0.0:40123";
  a.name = "kitchen-laptop";
  return a;
}

const std::string kKey(32, 'k');

TEST(Discovery, AnnouncementRoundTripsWithAndWithoutKey) {
  for (const std::string& key : {kKey, std::string{}}) {
    auto a = sample();
    a.busy = key.empty();
    const auto bytes = encode_announcement(a, key);
    EXPECT_LE(bytes.size(), kMaxAnnouncementBytes);
    const auto b = decode_announcement(bytes, key);
    EXPECT_EQ(b.protocol, kProtocolVersion);
    EXPECT_EQ(b.model, a.model);
    EXPECT_EQ(b.endpoint, a.endpoint);
    EXPECT_EQ(b.name, a.name);
    EXPECT_EQ(b.busy, a.busy);
  }
}

TEST(Discovery, OtherKeysAndUnkeyedAnnouncementsAreRefused) {
  const auto keyed = encode_announcement(sample(), kKey);
  EXPECT_THROW(decode_announcement(keyed, std::string(32, 'x')), FormatError);
  EXPECT_THROW(decode_announcement(keyed, ""), FormatError);  // an --insecure head
  const auto plain = encode_announcement(sample(), "");
  EXPECT_THROW(decode_announcement(plain, kKey), FormatError);  // a stranger without the key
  // Flipping the busy flag (or any byte) breaks the tag.
  auto flipped = keyed;
  flipped[5] ^= 2;
  EXPECT_THROW(decode_announcement(flipped, kKey), FormatError);
}

TEST(Discovery, EveryTruncationAndEveryBitFlipIsRefused) {
  const auto bytes = encode_announcement(sample(), kKey);
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THROW(decode_announcement({bytes.data(), n}, kKey), FormatError) << n;
  }
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      auto b = bytes;
      b[i] ^= static_cast<uint8_t>(1u << bit);
      EXPECT_THROW(decode_announcement(b, kKey), FormatError) << i << ":" << bit;
    }
  }
  std::vector<uint8_t> big(kMaxAnnouncementBytes + 1, 0);
  EXPECT_THROW(decode_announcement(big, kKey), FormatError);
}

TEST(Discovery, FieldsThatDoNotFitAreUsageErrorsAndNamesAreCleaned) {
  auto a = sample();
  a.endpoint = "tcp://" + std::string(kMaxEndpointBytes, 'h') + ":1";
  EXPECT_THROW(encode_announcement(a, kKey), UsageError);
  a = sample();
  a.name = std::string(200, 'n') + "\x01";
  const auto b = decode_announcement(encode_announcement(a, kKey), kKey);
  EXPECT_EQ(b.name, std::string(kMaxNameBytes, 'n'));
}

TEST(Discovery, WildcardHostsBecomeTheSenderAndUnkeyedOnesCannotPointElsewhere) {
  EXPECT_EQ(resolve_endpoint("tcp://0.0.0.0:7000", "192.168.1.9", false), "tcp://192.168.1.9:7000");
  EXPECT_EQ(resolve_endpoint("tcp://*:7000", "10.0.0.2", true), "tcp://10.0.0.2:7000");
  EXPECT_EQ(resolve_endpoint("tcp://10.0.0.5:7000", "10.0.0.2", false), "tcp://10.0.0.5:7000");
  EXPECT_EQ(resolve_endpoint("tcp://10.0.0.2:7000", "10.0.0.2", true), "tcp://10.0.0.2:7000");
  EXPECT_THROW(resolve_endpoint("tcp://10.0.0.5:7000", "10.0.0.2", true), FormatError);
  for (const char* bad : {"udp://1.2.3.4:5", "tcp://1.2.3.4", "tcp://:80", "tcp://h:0",
                          "tcp://h:70000", "tcp://h:8x", "loop://x"}) {
    EXPECT_THROW(resolve_endpoint(bad, "10.0.0.2", false), FormatError) << bad;
  }
  EXPECT_EQ(parse_discovery_address("").port, 47219);
  EXPECT_EQ(parse_discovery_address("239.1.2.3:999").group, "239.1.2.3");
  EXPECT_EQ(parse_discovery_address("239.1.2.3:999").port, 999);
  for (const char* bad : {"239.1.2.3:0", "239.1.2.3:x", "lan:5", "239.1.2.3:99999"}) {
    EXPECT_THROW(parse_discovery_address(bad), UsageError) << bad;
  }
}

// A port of its own per test process, so concurrent test runs do not hear each other.
DiscoveryAddress test_address() {
  DiscoveryAddress a;
  a.port = static_cast<uint16_t>(40000 + ::getpid() % 20000);
  return a;
}

template <typename F>
bool eventually(F f, double ms = 5000) {
  const double until = now_ms() + ms;
  while (now_ms() < until) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return f();
}

TEST(Discovery, ListenerFindsAnnouncersOfItsModelAndDropsStrangers) {
  const auto where = test_address();
  const Announcement mine = sample();
  Announcement other = sample();
  other.model.hash ^= 1;
  other.endpoint = "tcp://0.0.0.0:40999";
  DiscoveryListener listener(where, mine.model, kKey, 60000);
  Announcer a(
      where, [&] { return mine; }, kKey, 200);
  Announcer b(
      where, [&] { return other; }, kKey, 200);  // another model
  Announcer c(
      where, [&] { return mine; }, std::string(32, 'z'), 200);  // another cluster
  // A stranger's garbage on the same port.
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(where.port);
  inet_pton(AF_INET, where.group.c_str(), &to.sin_addr);
  std::mt19937 rng(7);
  for (int i = 0; i < 50; ++i) {
    std::vector<uint8_t> junk(rng() % 600);
    for (auto& x : junk) x = static_cast<uint8_t>(rng());
    ::sendto(fd, junk.data(), junk.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to);
  }
  ::close(fd);
  ASSERT_TRUE(eventually([&] { return !listener.devices().empty(); }))
      << "no announcement heard on " << where.group << ":" << where.port;
  ASSERT_TRUE(eventually([&] { return listener.rejected() >= 52; })) << listener.rejected();
  const auto found = listener.devices();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].name, "kitchen-laptop");
  EXPECT_NE(found[0].address.find(":40123"), std::string::npos) << found[0].address;
  EXPECT_EQ(found[0].address.find("0.0.0.0"), std::string::npos) << found[0].address;
  EXPECT_FALSE(found[0].busy);
  EXPECT_GT(a.sent(), 0u);
}

TEST(Discovery, SilentDevicesAreForgotten) {
  const auto where = test_address();
  DiscoveryListener listener(where, sample().model, kKey, 600);
  {
    Announcer a(
        where, [] { return sample(); }, kKey, 100);
    ASSERT_TRUE(eventually([&] { return listener.devices().size() == 1; }));
  }
  EXPECT_TRUE(eventually([&] { return listener.devices().empty(); }, 3000));
}

}  // namespace
}  // namespace hearth::net
