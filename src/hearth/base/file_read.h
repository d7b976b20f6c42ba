// Positional reads that finish: short reads and EINTR are retried, so a caller gets the whole
// range or an error. Used by the readers that stream weights and experts from a model file.
#pragma once

#include <cstdint>
#include <string>

namespace hearth {

// Opens `path` for reading with direct I/O (no page cache), or returns -1 where the OS or the
// file system has none (the caller then opens it plainly).
int open_direct(const std::string& path);

// Reads [offset, offset + bytes) of `fd` into `dst`. Returns the bytes read (fewer only at the
// end of the file, where a direct read of the last aligned block comes back short), or -1 with
// errno set. With `drop_cached` (a buffered fd whose bytes are used from `dst` only), the range
// is then dropped from the page cache, so that it takes no room from what stays resident.
int64_t read_fully(int fd, void* dst, uint64_t bytes, uint64_t offset, bool drop_cached = false);

}  // namespace hearth
