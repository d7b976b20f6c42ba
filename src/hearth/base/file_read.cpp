#include "hearth/base/file_read.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace hearth {

int open_direct(const std::string& path) {
#ifdef O_DIRECT
  return ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
#else
  (void)path;
  return -1;
#endif
}

int64_t read_fully(int fd, void* dst, uint64_t bytes, uint64_t offset, bool drop_cached) {
  auto* out = static_cast<uint8_t*>(dst);
  uint64_t done = 0;
  while (done < bytes) {
    const ssize_t r = ::pread(fd, out + done, bytes - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    done += static_cast<uint64_t>(r);
  }
#ifdef POSIX_FADV_DONTNEED
  if (drop_cached) {
    ::posix_fadvise(fd, static_cast<off_t>(offset), static_cast<off_t>(bytes), POSIX_FADV_DONTNEED);
  }
#else
  (void)drop_cached;
#endif
  return static_cast<int64_t>(done);
}

}  // namespace hearth
