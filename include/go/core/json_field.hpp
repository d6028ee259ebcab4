#pragma once
// Reading the keys of a JSON config object (PolicyConfig and TrainConfig, src/policy/config.cpp and
// src/rl/config.cpp) with one-line errors that name the config and the key.
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "go/core/error.hpp"

namespace go {

// One key `key` with value `value` of the config named `where`.
struct JsonField {
  const std::string& where;
  const std::string& key;
  const nlohmann::json& value;

  template <class T>
  void integer(T& dst) const {
    GO_CHECK(value.is_number_integer(), where, ": \"", key, "\" must be an integer, got ", value.dump());
    // in range of T, not wrapped: 4294967300 samples must not become 4
    const bool fits = value.is_number_unsigned() ? std::in_range<T>(value.get<std::uint64_t>())
                                                 : std::in_range<T>(value.get<std::int64_t>());
    GO_CHECK(fits, where, ": \"", key, "\" is ", value.dump(), ", out of range (", +std::numeric_limits<T>::min(),
             " to ", +std::numeric_limits<T>::max(), ")");
    dst = value.get<T>();
  }
  template <class T>
  void number(T& dst) const {
    GO_CHECK(value.is_number(), where, ": \"", key, "\" must be a number, got ", value.dump());
    dst = value.get<T>();
  }
  void boolean(bool& dst) const {
    GO_CHECK(value.is_boolean(), where, ": \"", key, "\" must be true or false, got ", value.dump());
    dst = value.get<bool>();
  }
  void string(std::string& dst) const {
    GO_CHECK(value.is_string(), where, ": \"", key, "\" must be a string, got ", value.dump());
    dst = value.get<std::string>();
  }
  void seed(std::uint64_t& dst) const {
    GO_CHECK(value.is_number_unsigned() || (value.is_number_integer() && value.get<std::int64_t>() >= 0), where,
             ": \"", key, "\" must be a non-negative integer, got ", value.dump());
    dst = value.get<std::uint64_t>();
  }
  // The "type" key: must be the string `expected`.
  void type(const char* expected) const {
    GO_CHECK(value.is_string() && value.get<std::string>() == expected, where, ": \"type\" is ", value.dump(),
             ", expected \"", expected, "\"");
  }
};

// Parses a config's text; `comments` allows // and /* */ comments.
inline nlohmann::json parse_json_config(const std::string& text, const std::string& where, bool comments = false) {
  try {
    return nlohmann::json::parse(text, nullptr, true, comments);
  } catch (const nlohmann::json::exception& e) {
    GO_FAIL(where, ": not valid JSON: ", e.what());
  }
}

}  // namespace go
