#pragma once
// Reading JSON documents (graphs, clusters, plans, configs) and the keys of their objects with
// one-line errors that name the file and the key.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

namespace detail {

// nlohmann's DOM builder, told apart only where a key is seen: an object's keys must differ. (The
// parser's callback interface could say so too, but parsed a 36,495-op graph file (12 MB) in 1.7-1.9 s
// against 0.22-0.32 s; this reader took 0.23-0.35 s in the same runs.)
class UniqueKeysDom : public nlohmann::detail::json_sax_dom_parser<nlohmann::json> {
 public:
  UniqueKeysDom(nlohmann::json& root, const std::string& where)
      : nlohmann::detail::json_sax_dom_parser<nlohmann::json>(root, /*allow_exceptions=*/true), where_(where) {}
  bool start_object(std::size_t n) {
    open_.push_back(keys_.size());
    return json_sax_dom_parser::start_object(n);
  }
  bool key(std::string& k) {
    for (std::size_t i = open_.back(); i < keys_.size(); ++i)
      GO_CHECK(keys_[i] != k, where_, ": the key \"", k, "\" appears twice in one object; keep one of them");
    keys_.push_back(k);
    return json_sax_dom_parser::key(k);
  }
  bool end_object() {
    keys_.resize(open_.back());
    open_.pop_back();
    return json_sax_dom_parser::end_object();
  }

 private:
  const std::string& where_;
  std::vector<std::string> keys_;  // the keys of the objects open now, flattened
  std::vector<std::size_t> open_;  // where each open object's keys start
};

}  // namespace detail

// Parses the text of a JSON document named `where` (a file) with one-line errors. `comments` allows
// // and /* */ comments. A key given twice in one object is an error: JSON readers disagree on
// which of the two counts, and the second would silently win here.
inline nlohmann::json parse_json_document(std::string_view text, const std::string& where, bool comments) {
  nlohmann::json j;
  try {
    detail::UniqueKeysDom dom(j, where);
    nlohmann::json::sax_parse(text.begin(), text.end(), &dom, nlohmann::json::input_format_t::json, /*strict=*/true,
                              comments);
  } catch (const nlohmann::json::exception& e) {
    std::string msg = e.what();
    for (char& c : msg)
      if (c == '\n' || c == '\r') c = ' ';
    GO_FAIL(where, ": invalid JSON: ", msg);
  }
  return j;
}

// Parses a config's text; `comments` allows // and /* */ comments.
inline nlohmann::json parse_json_config(const std::string& text, const std::string& where, bool comments = false) {
  return parse_json_document(text, where, comments);
}

// Fails on a key of the object `obj` that is not in `known`: a misspelled key ("devices" for
// "device") must be an error, not an absent field read as its default. `where` prefixes the message
// (a file and the object in it, "plan.json: " or "g.json: op 'x' (id 3): ").
inline void check_known_keys(const nlohmann::json& obj, std::initializer_list<std::string_view> known,
                             const std::string& where) {
  if (!obj.is_object()) return;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (std::find(known.begin(), known.end(), std::string_view(it.key())) != known.end()) continue;
    std::string list;
    for (auto k : known) (list += list.empty() ? "" : ", ") += k;
    GO_FAIL(where, "unknown key \"", it.key(), "\" (known: ", list, ")");
  }
}

}  // namespace go
