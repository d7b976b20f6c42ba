// Generated code point range tables (see gen_unicode_tables.py).
#pragma once

#include <cstddef>
#include <cstdint>

namespace hearth::text::tables {

struct CodepointRange {
  uint32_t lo;  // inclusive
  uint32_t hi;  // inclusive
};

extern const CodepointRange kLetter[];  // general category L*
extern const size_t kLetter_count;
extern const CodepointRange kNumber[];  // general category N*
extern const size_t kNumber_count;
extern const CodepointRange kPunctuation[];  // general category P*
extern const size_t kPunctuation_count;

}  // namespace hearth::text::tables
