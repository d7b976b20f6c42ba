// docs/architecture.md is the page a newcomer reads first, and it names the files it describes
// in backticks. Every such path must exist in the tree, so the page cannot drift from the code
// unnoticed when a file is renamed, moved or removed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace hearth {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// A code span names a path of the repository when it contains '/' and ends with '/' (a folder)
// or with one of the file extensions the docs refer to.
bool names_path(std::string_view span) {
  if (span.find('/') == std::string_view::npos) return false;
  if (ends_with(span, "/")) return true;
  for (std::string_view ext :
       {".h", ".cpp", ".md", ".txt", ".cmake", ".sh", ".json", ".js", ".html", ".css"}) {
    if (ends_with(span, ext)) return true;
  }
  return false;
}

// The paths named by the backticked spans of `markdown`, in order of first appearance, each
// once. Backticks pair up left to right within a line; fenced code blocks are skipped.
std::vector<std::string> backticked_paths(const std::string& markdown) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  std::istringstream in(markdown);
  std::string line;
  bool fenced = false;
  while (std::getline(in, line)) {
    const size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line.compare(first, 3, "```") == 0) {
      fenced = !fenced;
      continue;
    }
    if (fenced) continue;
    size_t pos = 0;
    for (;;) {
      const size_t open = line.find('`', pos);
      if (open == std::string::npos) break;
      const size_t close = line.find('`', open + 1);
      if (close == std::string::npos) break;
      const std::string span = line.substr(open + 1, close - open - 1);
      if (names_path(span) && seen.insert(span).second) out.push_back(span);
      pos = close + 1;
    }
  }
  return out;
}

TEST(ArchitectureDoc, FindsBacktickedPaths) {
  const std::string md =
      "Read `src/hearth/model/engine.cpp`, `Engine::layer_forward` and `docs/`.\n"
      "Not paths: `hearth run`, `tcp://HOST:PORT`, `a/b`, src/plain.h, `x.cpp`.\n"
      "```\n"
      "`src/in_a_fence.cpp`\n"
      "```\n"
      "Again `src/hearth/model/engine.cpp`, then `CMake/x.cmake` and `web/page.css`.\n"
      "An unclosed `tests/open.h\n";
  EXPECT_EQ(backticked_paths(md), (std::vector<std::string>{"src/hearth/model/engine.cpp", "docs/",
                                                            "CMake/x.cmake", "web/page.css"}));
}

TEST(ArchitectureDoc, EveryNamedPathExists) {
  const std::string root = HEARTH_SOURCE_DIR;
  const std::string doc = root + "/docs/architecture.md";
  std::ifstream in(doc, std::ios::binary);
  ASSERT_TRUE(in) << "cannot read " << doc;
  const std::string markdown((std::istreambuf_iterator<char>(in)), {});

  const std::vector<std::string> paths = backticked_paths(markdown);
  std::vector<std::string> missing;
  for (const std::string& p : paths) {
    // Concatenated, not joined with operator/: a path starting with '/' stays under the root.
    const std::filesystem::path full(root + "/" + p);
    const bool ok = ends_with(p, "/") ? std::filesystem::is_directory(full)
                                      : std::filesystem::is_regular_file(full);
    if (!ok) missing.push_back(p);
  }
  std::string list;
  for (const std::string& p : missing) list += "\n  " + p;
  EXPECT_TRUE(missing.empty()) << "docs/architecture.md names " << missing.size()
                               << " path(s) that do not exist under " << root << ":" << list;
  // An empty or gutted page would pass the check above trivially.
  EXPECT_GE(paths.size(), 30u) << "docs/architecture.md names only " << paths.size()
                               << " paths in backticks";
}

}  // namespace
}  // namespace hearth
