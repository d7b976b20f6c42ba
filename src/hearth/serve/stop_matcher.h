// Stop strings over streamed text: text is released only once it can no longer be the
// start of a stop string, so a client never sees part of a stop string.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hearth::serve {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Adds generated text; returns the text that is now safe to emit. After a stop string
  // appears, stopped() is true and the text from the stop string on is discarded.
  std::string push(std::string_view text);
  // Text still held back (a possible stop-string prefix) when generation ends otherwise.
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;  // non-empty strings
  std::string held_;
  bool stopped_ = false;
};

}  // namespace hearth::serve
