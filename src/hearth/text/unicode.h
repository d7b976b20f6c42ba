// Unicode helpers the tokenizers need: UTF-8 decoding that never throws, general-category
// tests for the pre-tokenizer rules (\p{L}, \p{N}, \p{P}, \s) and GPT-2's byte<->char map.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hearth::text {

// One decoded unit of UTF-8 text. An invalid byte becomes its own unit with `raw` set, so
// byte-level tokenizers can still encode the exact input bytes.
struct Codepoint {
  uint32_t cp = 0;     // code point, or the byte value when raw
  uint32_t begin = 0;  // byte offset in the source text
  uint32_t len = 0;    // bytes in the source text (1..4)
  bool raw = false;    // invalid UTF-8 byte, treated as a symbol (not letter/number/space)
};

std::vector<Codepoint> decode_utf8(std::string_view text);
// Length of the UTF-8 sequence a lead byte starts (1 for invalid lead bytes).
int utf8_seq_len(uint8_t lead);
void append_utf8(std::string& out, uint32_t cp);

bool is_letter(uint32_t cp);       // general category L*
bool is_number(uint32_t cp);       // general category N*
bool is_punctuation(uint32_t cp);  // general category P*
// Unicode White_Space (the set llama.cpp's pre-tokenizers use for \s).
bool is_whitespace(uint32_t cp);

// GPT-2 byte-level alphabet: each byte maps to one printable code point.
const std::string& byte_to_unicode(uint8_t byte);  // UTF-8 of the mapped char
// Inverse; returns -1 for code points outside the alphabet.
int unicode_to_byte(uint32_t cp);

}  // namespace hearth::text
