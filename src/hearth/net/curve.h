// Optional CURVE (Curve25519) encryption and authentication of ZeroMQ links.
//
// Shape chosen for a home cluster: one cluster key file, copied to every device, holds one
// keypair. Every listener serves with it and every connection presents it and expects the
// server to hold it, so traffic is encrypted and only devices holding the file can complete
// a handshake: the server public key never travels in the clear (a peer without it cannot
// start one), and a ZAP handler on each listener accepts only clients that prove they hold
// the cluster key (a peer that learned the public key alone is still refused). CLI:
// `hearth keygen [PATH]` writes a new file, `--key-file PATH` on worker/run/serve uses one.
// Empty config = plain TCP.
#pragma once

#include <string>
#include <string_view>

namespace hearth::net {

struct CurveKeypair {
  std::string public_key;  // Z85 text, 40 characters
  std::string secret_key;  // Z85 text, 40 characters
};

struct CurveConfig {
  std::string public_key;  // this side's keypair
  std::string secret_key;
  std::string server_public_key;  // connections: the key the listener must prove it holds
  // Listeners: the only client key accepted (checked by a ZAP handler); empty = any client
  // that knows the server key.
  std::string client_public_key;
  bool enabled() const { return !secret_key.empty(); }
};

// Throws IoError if libzmq was built without CURVE.
CurveKeypair generate_curve_keypair();

// Key file: lines "public <z85>" and "secret <z85>"; '#' starts a comment. Written 0600.
void write_key_file(const std::string& path, const CurveKeypair& keys);
// Throws IoError (cannot read) or FormatError (naming the file and line).
CurveKeypair read_key_file(const std::string& path);

// Where `hearth keygen` writes the cluster key and --key-file looks when given no path:
// $HEARTH_KEY_FILE, else $XDG_CONFIG_HOME/hearth/cluster.key, else
// $HOME/.config/hearth/cluster.key (%APPDATA%\hearth\cluster.key on Windows), else
// ./hearth-cluster.key.
std::string default_key_path();

// The cluster key as a code a person can read out and type on another device (`hearth keygen
// --show-code`, `--from-code`): the 32-byte secret in Crockford base32 plus a 10-bit check,
// 54 characters in groups of 4 joined by '-'. The public key follows from the secret. Whoever
// holds the code holds the key.
std::string pairing_code(const CurveKeypair& keys);
// Case, '-' and spaces do not matter; O reads as 0, I and L as 1. Throws FormatError naming
// a character outside the code, a wrong length or a check that fails.
CurveKeypair keypair_from_pairing_code(std::string_view code);

// The cluster shape described above: both roles use `keys`.
CurveConfig cluster_curve_config(const CurveKeypair& keys);

}  // namespace hearth::net
