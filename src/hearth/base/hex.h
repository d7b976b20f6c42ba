// One hexadecimal digit's value, for the parsers that read hex (HTTP chunk sizes, grammar
// escapes).
#pragma once

namespace hearth {

// 0-15 for 0-9, a-f, A-F; -1 for anything else.
constexpr int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace hearth
