// The C++ type a GGUF file stores each numeric value type as (little-endian, at the width the
// type names), shared by the reader and the writer so that the two cannot disagree.
#pragma once

#include <cstdint>
#include <type_traits>

#include "hearth/gguf/gguf_file.h"

namespace hearth::gguf {

// Calls `f(T{})` when `t` is `id`, the type stored as T.
template <class T, class F>
bool visit_if(ValueType t, ValueType id, F& f) {
  if (t != id) return false;
  f(T{});
  return true;
}

// Calls `f(T{})` with the stored type T of a number of type `t` (u8 ... f64) and returns
// true; returns false for bool, string, array and unknown types, whose encodings differ.
template <class F>
bool visit_number_type(ValueType t, F&& f) {
  return visit_if<uint8_t>(t, ValueType::kU8, f) || visit_if<int8_t>(t, ValueType::kI8, f) ||
         visit_if<uint16_t>(t, ValueType::kU16, f) || visit_if<int16_t>(t, ValueType::kI16, f) ||
         visit_if<uint32_t>(t, ValueType::kU32, f) || visit_if<int32_t>(t, ValueType::kI32, f) ||
         visit_if<uint64_t>(t, ValueType::kU64, f) || visit_if<int64_t>(t, ValueType::kI64, f) ||
         visit_if<float>(t, ValueType::kF32, f) || visit_if<double>(t, ValueType::kF64, f);
}

// A number of type `t` read as its stored type T, held as Value holds numbers: integers in the
// widest type of their signedness, floats as double.
template <class T>
Value number_value(ValueType t, T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return {t, double{x}};
  } else if constexpr (std::is_signed_v<T>) {
    return {t, int64_t{x}};
  } else {
    return {t, uint64_t{x}};
  }
}

// The number `v` back in its stored type T (Value's constructors made it fit).
template <class T>
T stored_number(const Value& v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(*v.as_f64());
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<T>(*v.as_i64());
  } else {
    return static_cast<T>(*v.as_u64());
  }
}

}  // namespace hearth::gguf
