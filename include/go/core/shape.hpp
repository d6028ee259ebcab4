#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>

#include "go/core/error.hpp"

namespace go {

// Dimensions of a dense row-major tensor; rank 0 (a scalar) to kMaxRank.
class Shape {
 public:
  static constexpr int kMaxRank = 4;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims) {
    GO_CHECK(dims.size() <= kMaxRank, "shape of rank ", dims.size(), " exceeds the maximum rank ", kMaxRank);
    for (auto d : dims) push_back(d);
  }
  template <class It>
  Shape(It first, It last) {
    for (; first != last; ++first) push_back(static_cast<std::int64_t>(*first));
  }

  void push_back(std::int64_t d) {
    GO_CHECK(rank_ < kMaxRank, "shape exceeds the maximum rank ", kMaxRank);
    GO_CHECK(d >= 0, "negative dimension ", d, " in shape");
    dims_[rank_++] = d;
  }

  int rank() const { return rank_; }
  std::int64_t operator[](int i) const {
    if (i < 0) i += rank_;
    GO_CHECK(i >= 0 && i < rank_, "dimension index ", i, " out of range for shape ", to_string());
    return dims_[i];
  }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= dims_[i];
    return n;
  }
  const std::int64_t* begin() const { return dims_.data(); }
  const std::int64_t* end() const { return dims_.data() + rank_; }

  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.rank_ != b.rank_) return false;
    for (int i = 0; i < a.rank_; ++i)
      if (a.dims_[i] != b.dims_[i]) return false;
    return true;
  }

  std::string to_string() const {
    std::string s = "[";
    for (int i = 0; i < rank_; ++i) {
      if (i) s += ", ";
      s += std::to_string(dims_[i]);
    }
    return s + "]";
  }

 private:
  std::array<std::int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

inline std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.to_string(); }

}  // namespace go
