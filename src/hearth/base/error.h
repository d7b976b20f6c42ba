// Typed errors used inside hearth. Library code throws these; the edges (CLI, wire,
// HTTP) convert them to exit codes, error messages or HTTP statuses. Library code never
// calls exit() or abort().
#pragma once

#include <stdexcept>
#include <string>

namespace hearth {

// Base of every error hearth throws on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A file or message does not follow its format (bad GGUF, hostile wire message, bad JSON).
// The message names the file or peer, the field and, where known, the byte offset.
class FormatError : public Error {
 public:
  using Error::Error;
};

// The operating system refused something (open, mmap, read, socket).
class IoError : public Error {
 public:
  using Error::Error;
};

// The user asked for something that cannot be done (bad flag, unsupported model).
class UsageError : public Error {
 public:
  using Error::Error;
};

// A peer failed, timed out or broke the protocol.
class NetError : public Error {
 public:
  using Error::Error;
};

// Builds "what: strerror(errno)" for IoError messages.
std::string errno_message(const std::string& what);

}  // namespace hearth
