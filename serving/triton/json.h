// A small JSON value for the model configuration Triton hands the backend as JSON (protobuf's JSON
// mapping of ModelConfig) and takes back from auto-completion. Numbers keep their text, so the
// int64 fields that protobuf writes as strings or numbers survive a round trip unchanged.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::serving {

class Json {
public:
  enum class Kind { null, boolean, number, string, array, object };

  Json() = default;
  static Json boolean(bool value);
  static Json number(int64_t value);
  static Json number_text(std::string text);  // a number as the reader saw it ("1e-3", "0.5")
  static Json string(std::string value);
  static Json array();
  static Json object();

  // Parses `text`; on malformed input returns nullopt and sets *error to what and where.
  static std::optional<Json> parse(std::string_view text, std::string* error);
  std::string dump() const;

  Kind kind() const { return kind_; }
  bool is_object() const { return kind_ == Kind::object; }
  bool is_array() const { return kind_ == Kind::array; }

  // Object access: find returns nullptr when the key is absent or this is not an object;
  // set replaces or appends (keys keep their first position).
  const Json* find(std::string_view key) const;
  Json* find(std::string_view key);
  Json& set(std::string_view key, Json value);

  const std::vector<std::string>& keys() const { return keys_; }  // object keys, in order

  // Array access (also an object's values, in the order of keys()).
  const std::vector<Json>& items() const { return items_; }
  std::vector<Json>& items() { return items_; }
  void push(Json value) { items_.push_back(std::move(value)); }

  // Scalars: the text of a string, or of a number; an int64 from a number or a numeric string
  // (protobuf writes int64 as a string); nullopt when the value is neither.
  const std::string& text() const { return text_; }
  std::optional<int64_t> as_int() const;
  bool as_bool() const { return kind_ == Kind::boolean && text_ == "true"; }

private:
  Kind kind_ = Kind::null;
  std::string text_;                               // number, string, boolean text
  std::vector<Json> items_;                        // array items, or object values
  std::vector<std::string> keys_;                  // object keys, parallel to items_
};

}  // namespace kiln::serving
