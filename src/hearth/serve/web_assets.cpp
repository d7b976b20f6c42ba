#include "hearth/serve/web_assets.h"

namespace hearth::serve {
namespace {

std::string_view content_type(std::string_view name) {
  auto ends = [&](std::string_view ext) {
    return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

}  // namespace

bool find_web_page(std::string_view path, WebPage& out) {
  std::string_view name;
  if (path == "/") {
    name = "chat.html";
  } else if (path == "/cluster") {
    name = "cluster.html";
  } else if (path.substr(0, 5) == "/web/") {
    name = path.substr(5);
    // Only the embedded files' own names: no pages by other names, nothing with a path.
    if (name.find('/') != std::string_view::npos) return false;
  } else {
    return false;
  }
  for (const auto& f : web_files()) {
    if (f.name == name) {
      out = {content_type(name), f.body};
      return true;
    }
  }
  return false;
}

}  // namespace hearth::serve
