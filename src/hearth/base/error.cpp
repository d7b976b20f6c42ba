#include "hearth/base/error.h"

#include <cerrno>
#include <cstring>

namespace hearth {

std::string errno_message(const std::string& what) {
  const int err = errno;
  return what + ": " + std::strerror(err);
}

}  // namespace hearth
