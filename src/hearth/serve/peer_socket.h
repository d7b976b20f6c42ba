// Noticing that an HTTP client went away while its request is still being computed.
// cpp-httplib (0.11) does not expose a request's socket to the handler, so the connection is
// found by its address: the socket in this process whose peer is (ip, port) and whose local
// port is the server's.
#pragma once

#include <string>

namespace hearth::serve {

// The file descriptor of the connection, or -1 when none matches.
int find_connection_fd(const std::string& peer_ip, int peer_port, int local_port);

// True when the peer has closed (or reset) the connection. Never blocks.
bool peer_closed(int fd);

}  // namespace hearth::serve
