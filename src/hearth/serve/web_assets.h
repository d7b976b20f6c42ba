// The browser pages hearth serve answers with (src/hearth/serve/web/, embedded at build time
// by cmake/embed_files.cmake): the chat page at /, the ring at /cluster, their scripts and
// stylesheet under /web/.
#pragma once

#include <span>
#include <string_view>

namespace hearth::serve {

struct WebFile {
  std::string_view name;  // file name in src/hearth/serve/web/
  std::string_view body;
};

// Every embedded file (generated).
std::span<const WebFile> web_files();

struct WebPage {
  std::string_view content_type;
  std::string_view body;
};

// The page for a request path ("/", "/cluster", "/web/chat.js", ...), or false.
bool find_web_page(std::string_view path, WebPage& out);

}  // namespace hearth::serve
