#include "hearth/model/synth_vocab.h"

#include <fmt/core.h>

#include <array>
#include <random>
#include <unordered_set>

#include "hearth/base/error.h"

namespace hearth::model {

namespace {

// Common English words, so generated text from a synthetic model looks like words and the
// tokenizer tests have real merges to apply.
constexpr const char* kWords[] = {
    // a plain array: clang caps std::array CTAD at 256
    "the",      "of",      "and",      "to",      "in",       "is",       "you",     "that",
    "it",       "he",      "was",      "for",     "on",       "are",      "as",      "with",
    "his",      "they",    "at",       "be",      "this",     "have",     "from",    "or",
    "one",      "had",     "by",       "word",    "but",      "not",      "what",    "all",
    "were",     "we",      "when",     "your",    "can",      "said",     "there",   "use",
    "an",       "each",    "which",    "she",     "do",       "how",      "their",   "if",
    "will",     "up",      "other",    "about",   "out",      "many",     "then",    "them",
    "these",    "so",      "some",     "her",     "would",    "make",     "like",    "him",
    "into",     "time",    "has",      "look",    "two",      "more",     "write",   "go",
    "see",      "number",  "no",       "way",     "could",    "people",   "my",      "than",
    "first",    "water",   "been",     "call",    "who",      "oil",      "its",     "now",
    "find",     "long",    "down",     "day",     "did",      "get",      "come",    "made",
    "may",      "part",    "home",     "house",   "light",    "model",    "hearth",  "fire",
    "warm",     "night",   "ring",     "device",  "phone",    "laptop",   "memory",  "token",
    "layer",    "window",  "hello",    "world",   "question", "answer",   "because", "think",
    "know",     "good",    "new",      "just",    "over",     "also",     "after",   "back",
    "work",     "year",    "very",     "where",   "through",  "should",   "before",  "great",
    "help",     "small",   "large",    "every",   "found",    "still",    "between", "never",
    "under",    "last",    "story",    "city",    "tree",     "cross",    "since",   "hard",
    "start",    "might",   "close",    "open",    "seem",     "together", "next",    "white",
    "children", "begin",   "got",      "walk",    "example",  "ease",     "paper",   "group",
    "always",   "music",   "those",    "both",    "mark",     "often",    "letter",  "until",
    "mile",     "river",   "car",      "feet",    "care",     "second",   "book",    "carry",
    "took",     "science", "eat",      "room",    "friend",   "began",    "idea",    "fish",
    "mountain", "stop",    "once",     "base",    "hear",     "horse",    "cut",     "sure",
    "watch",    "color",   "face",     "wood",    "main",     "enough",   "plain",   "girl",
    "usual",    "young",   "ready",    "above",   "ever",     "red",      "list",    "though",
    "feel",     "talk",    "bird",     "soon",    "body",     "dog",      "family",  "direct",
    "pose",     "leave",   "song",     "measure", "door",     "product",  "black",   "short",
    "numeral",  "class",   "wind",     "happen",  "whole",    "ship",     "area",    "half",
    "rock",     "order",   "south",    "problem", "piece",    "told",     "knew",    "pass",
    "farm",     "top",     "king",     "size",    "heard",    "best",     "hour",    "better",
    "true",     "during",  "hundred",  "five",    "remember", "step",     "early",   "hold",
    "west",     "ground",  "interest", "reach",   "fast",     "verb",     "sing",    "listen",
    "six",      "table",   "travel",   "less",    "morning",  "ten",      "simple",  "several",
    "vowel",    "toward",  "war",      "lay",     "against",  "pattern",  "slow",    "center",
    "love",     "person",  "money",    "serve",   "appear",   "road",     "map",     "rain",
    "rule",     "govern",  "pull",     "cold",    "notice",   "voice",    "unit",    "power",
    "town",     "fine",    "certain",  "fly",     "fall",     "lead",     "cry",     "dark",
    "machine",  "note",    "wait",     "plan",    "figure",   "star",     "box",     "noun",
    "field",    "rest",    "correct",  "able",    "pound",    "done",     "beauty",  "drive",
    "stood",    "contain", "front",    "teach",   "week",     "final",    "gave",    "green",
    "quick",    "develop", "ocean",    "sleep",   "Hello",    "The",      "I",       "A",
    "In",       "It",      "We",       "You",     "This",     "What",     "How",     "Why",
    ".",        ",",       "!",        "?",       "'s",       "\n",       "\n\n",    "  ",
    "    ",     "0",       "1",        "2",       "3",        "4",        "5",       "6",
    "7",        "8",       "9",        "10",      "100",
};

}  // namespace

std::string byte_to_unicode(uint8_t b) {
  uint32_t cp;
  const bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
  if (printable) {
    cp = b;
  } else {
    // Non-printable bytes take code points 256, 257, ... in byte order.
    uint32_t n = 0;
    for (uint32_t x = 0; x < b; ++x) {
      const bool p = (x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || x >= 0xae;
      if (!p) ++n;
    }
    cp = 256 + n;
  }
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return out;
}

SynthVocab make_synth_vocab(Arch arch, uint32_t vocab_size, uint64_t seed) {
  SynthVocab v;
  std::vector<std::string> specials;
  if (is_qwen(arch)) {
    v.pre = "qwen2";
    specials = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    v.add_bos = false;
    // ChatML, as Qwen 2.5 uses it (system prompt defaulted).
    v.chat_template =
        "{%- if messages[0]['role'] != 'system' %}{{- '<|im_start|>system\\nYou are a helpful "
        "assistant.<|im_end|>\\n' }}{%- endif %}{%- for message in messages %}{{- '<|im_start|>' + "
        "message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{%- endfor %}{%- if "
        "add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
  } else {
    v.pre = "llama-bpe";
    specials = {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                "<|eot_id|>"};
    // The Llama 3 instruct layout: header ids around each role, eot after each message.
    v.chat_template =
        "{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] "
        "+ '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}{%- "
        "if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' "
        "}}{%- "
        "endif %}";
  }
  if (vocab_size < 256 + specials.size() + 16) {
    throw UsageError(fmt::format("vocabulary size {} is too small (needs at least {})", vocab_size,
                                 256 + specials.size() + 16));
  }
  const uint32_t n_normal = vocab_size - static_cast<uint32_t>(specials.size());
  std::unordered_set<std::string> known;
  auto add_token = [&](const std::string& t) {
    v.tokens.push_back(t);
    v.token_types.push_back(1);
    known.insert(t);
  };
  for (int b = 0; b < 256; ++b) add_token(byte_to_unicode(static_cast<uint8_t>(b)));

  // Merge chains that build each word left to right.
  auto add_word = [&](const std::string& word) {
    std::vector<std::string> pieces;
    for (unsigned char c : word) pieces.push_back(byte_to_unicode(c));
    std::string cur = pieces[0];
    for (size_t i = 1; i < pieces.size() && v.tokens.size() < n_normal; ++i) {
      const std::string next = cur + pieces[i];
      if (known.count(next) == 0) {
        v.merges.push_back(cur + " " + pieces[i]);
        add_token(next);
      }
      cur = next;
    }
  };
  for (const char* w : kWords) {
    add_word(w);
    if (w[0] != '\n' && w[0] != ' ') add_word(std::string(" ") + w);
  }
  // Fill the rest with merges of random existing tokens (short ones, so they stay plausible).
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  const size_t base = v.tokens.size();
  size_t attempts = 0;
  while (v.tokens.size() < n_normal) {
    const std::string& a = v.tokens[33 + rng() % (v.tokens.size() - 33)];
    const std::string& b = v.tokens[97 + rng() % 26];  // byte tokens 'a'..'z'
    const std::string next = a + b;
    if (++attempts > 50ull * n_normal) {
      // Saturated: fall back to unique filler pieces.
      const std::string filler = fmt::format("<|filler_{}|>", v.tokens.size());
      add_token(filler);
      continue;
    }
    if (next.size() > 24 || known.count(next) != 0) continue;
    v.merges.push_back(a + " " + b);
    add_token(next);
  }
  (void)base;
  for (const auto& s : specials) {
    v.tokens.push_back(s);
    v.token_types.push_back(3);
  }
  const uint32_t first_special = n_normal;
  if (is_qwen(arch)) {
    v.bos = first_special;      // <|endoftext|> (never added: add_bos is false)
    v.eos = first_special;      // <|endoftext|>
    v.eot = first_special + 2;  // <|im_end|>
  } else {
    v.bos = first_special;      // <|begin_of_text|>
    v.eos = first_special + 1;  // <|end_of_text|>
    v.eot = first_special + 4;  // <|eot_id|>
  }
  return v;
}

}  // namespace hearth::model
