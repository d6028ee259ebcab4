#pragma once
// Errors: every check in the library throws go::Error with a message that names
// the values involved (shapes, sizes, file names), never a bare assertion.
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace go {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
template <class... Args>
[[noreturn]] inline void throw_error(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  throw Error(os.str());
}
}  // namespace detail

}  // namespace go

// GO_CHECK(cond, parts...): throws go::Error(parts...) when cond is false.
#define GO_CHECK(cond, ...)                          \
  do {                                               \
    if (!(cond)) ::go::detail::throw_error(__VA_ARGS__); \
  } while (0)

#define GO_FAIL(...) ::go::detail::throw_error(__VA_ARGS__)
