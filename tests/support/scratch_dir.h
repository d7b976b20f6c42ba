// A folder for a test process's files (models, logs, profiles), removed when the process ends,
// so that a run of the suite leaves nothing behind in the temporary folder: on a machine short
// of disk, models left by earlier tests are what fails the later ones.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace hearth::testing {

namespace detail {
class ScratchDir {
 public:
  ScratchDir()
      : owner_(::getpid()),
        path_(std::filesystem::temp_directory_path() / ("hearth_test_" + std::to_string(owner_))) {
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    // A forked child that exits runs this destructor too: only the process that made the
    // folder removes it.
    if (::getpid() != owner_) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  pid_t owner_;
  std::filesystem::path path_;
};
}  // namespace detail

// temp_directory_path()/hearth_test_<pid>, made on first use and removed at exit.
inline const std::filesystem::path& scratch_dir() {
  static const detail::ScratchDir dir;
  return dir.path();
}

// scratch_dir()/name, made if missing: a test file's own folder among its process's files.
inline std::filesystem::path scratch_subdir(const std::string& name) {
  auto d = scratch_dir() / name;
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace hearth::testing
