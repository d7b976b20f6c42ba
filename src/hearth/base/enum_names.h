// Names of an enum's values, and the parse back from a name, from one table per enum. What a
// flag accepts, what JSON and logs print and what an error lists as the choices then come from
// the same place and cannot drift apart.
//
//   constexpr EnumName<StreamIo> kStreamIoNames[] = {{StreamIo::kDirect, "direct"}, ...};
//   enum_name(kStreamIoNames, io)                     -> "direct"
//   parse_enum(kStreamIoNames, text, "--stream-io")   -> StreamIo, or UsageError
//       "--stream-io: 'x' is not direct or cache"
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "hearth/base/error.h"

namespace hearth {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

// The name of `value`; `unknown` for a value the table lacks (a corrupt byte cast to the enum).
template <typename E, size_t N>
constexpr std::string_view enum_name(const EnumName<E> (&table)[N], E value,
                                     std::string_view unknown = "?") {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return unknown;
}

template <typename E, size_t N>
constexpr std::optional<E> enum_from_name(const EnumName<E> (&table)[N], std::string_view name) {
  for (const auto& entry : table) {
    if (entry.name == name) return entry.value;
  }
  return std::nullopt;
}

// "a, b or c": the names of the table, for messages.
template <typename E, size_t N>
std::string enum_choices(const EnumName<E> (&table)[N]) {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) out += i + 1 == N ? " or " : ", ";
    out += table[i].name;
  }
  return out;
}

// The value named `text`, or UsageError "<what>: '<text>' is not a, b or c".
template <typename E, size_t N>
E parse_enum(const EnumName<E> (&table)[N], std::string_view text, std::string_view what) {
  if (auto value = enum_from_name(table, text)) return *value;
  std::string message(what);
  message += ": '";
  message += text;
  message += "' is not ";
  message += enum_choices(table);
  throw UsageError(message);
}

}  // namespace hearth
