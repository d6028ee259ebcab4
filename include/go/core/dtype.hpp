#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace go {

enum class DType : std::uint8_t { f32, i32, i64 };

constexpr std::size_t dtype_size(DType t) {
  return t == DType::i64 ? 8 : 4;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
  }
  return "?";
}

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  else if constexpr (std::is_same_v<T, std::int32_t>) return DType::i32;
  else {
    static_assert(std::is_same_v<T, std::int64_t>, "tensor element type must be float, int32_t or int64_t");
    return DType::i64;
  }
}

}  // namespace go
