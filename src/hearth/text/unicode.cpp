#include "hearth/text/unicode.h"

#include <algorithm>
#include <array>

#include "hearth/text/unicode_tables.h"

namespace hearth::text {

int utf8_seq_len(uint8_t lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;  // continuation byte or 0xF8..0xFF: invalid as a lead
}

std::vector<Codepoint> decode_utf8(std::string_view text) {
  std::vector<Codepoint> out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b0 = s[i];
    const int len = utf8_seq_len(b0);
    bool ok = len > 1 && i + static_cast<size_t>(len) <= n;
    uint32_t cp = b0;
    if (ok) {
      cp = b0 & (0x7F >> len);
      for (int k = 1; k < len; ++k) {
        if ((s[i + k] & 0xC0) != 0x80) {
          ok = false;
          break;
        }
        cp = (cp << 6) | (s[i + k] & 0x3F);
      }
      // Overlong forms, surrogates and values past U+10FFFF are not valid UTF-8.
      static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
      if (ok && (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) ok = false;
    }
    if (len == 1 && b0 < 0x80) {
      out.push_back({b0, static_cast<uint32_t>(i), 1, false});
      i += 1;
    } else if (ok) {
      out.push_back({cp, static_cast<uint32_t>(i), static_cast<uint32_t>(len), false});
      i += static_cast<size_t>(len);
    } else {
      out.push_back({b0, static_cast<uint32_t>(i), 1, true});
      i += 1;
    }
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {

bool in_ranges(const tables::CodepointRange* ranges, size_t count, uint32_t cp) {
  const auto* end = ranges + count;
  // First range whose upper bound is >= cp.
  const auto* it = std::lower_bound(
      ranges, end, cp, [](const tables::CodepointRange& r, uint32_t v) { return r.hi < v; });
  return it != end && it->lo <= cp;
}

}  // namespace

bool is_letter(uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return in_ranges(tables::kLetter, tables::kLetter_count, cp);
}

bool is_number(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return in_ranges(tables::kNumber, tables::kNumber_count, cp);
}

bool is_punctuation(uint32_t cp) {
  return in_ranges(tables::kPunctuation, tables::kPunctuation_count, cp);
}

bool is_whitespace(uint32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

namespace {

// GPT-2's alphabet: printable Latin-1 bytes map to themselves, the other 68 bytes to
// U+0100.. in byte order, so every byte has a visible, non-space stand-in.
struct ByteMap {
  std::array<std::string, 256> to_utf8;
  std::array<uint32_t, 256> to_cp{};
  ByteMap() {
    uint32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      to_cp[b] = printable ? static_cast<uint32_t>(b) : next++;
      append_utf8(to_utf8[b], to_cp[b]);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

const std::string& byte_to_unicode(uint8_t byte) {
  return byte_map().to_utf8[byte];
}

int unicode_to_byte(uint32_t cp) {
  if (cp < 0x100) {
    const bool printable = (cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || cp >= 0xAE;
    return printable ? static_cast<int>(cp) : -1;
  }
  if (cp < 0x100 + 68) {
    // U+0100 + k is the k-th non-printable byte.
    const auto& m = byte_map();
    for (int b = 0; b < 256; ++b)
      if (m.to_cp[b] == cp) return b;
  }
  return -1;
}

}  // namespace hearth::text
