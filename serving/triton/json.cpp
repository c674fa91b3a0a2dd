// Recursive-descent JSON reader and writer for kiln::serving::Json (RFC 8259; \u escapes of the
// Basic Multilingual Plane and surrogate pairs are decoded to UTF-8).
#include "json.h"

#include <cctype>
#include <charconv>

namespace kiln::serving {

Json Json::boolean(bool value) {
  Json json;
  json.kind_ = Kind::boolean;
  json.text_ = value ? "true" : "false";
  return json;
}

Json Json::number(int64_t value) {
  Json json;
  json.kind_ = Kind::number;
  json.text_ = std::to_string(value);
  return json;
}

Json Json::number_text(std::string text) {
  Json json;
  json.kind_ = Kind::number;
  json.text_ = std::move(text);
  return json;
}

Json Json::string(std::string value) {
  Json json;
  json.kind_ = Kind::string;
  json.text_ = std::move(value);
  return json;
}

Json Json::array() {
  Json json;
  json.kind_ = Kind::array;
  return json;
}

Json Json::object() {
  Json json;
  json.kind_ = Kind::object;
  return json;
}

const Json* Json::find(std::string_view key) const {
  if (kind_ != Kind::object) return nullptr;
  for (size_t i = 0; i < keys_.size(); ++i)
    if (keys_[i] == key) return &items_[i];
  return nullptr;
}

Json* Json::find(std::string_view key) { return const_cast<Json*>(std::as_const(*this).find(key)); }

Json& Json::set(std::string_view key, Json value) {
  if (Json* existing = find(key)) return *existing = std::move(value);
  keys_.emplace_back(key);
  items_.push_back(std::move(value));
  return items_.back();
}

std::optional<int64_t> Json::as_int() const {
  if (kind_ != Kind::number && kind_ != Kind::string) return std::nullopt;
  int64_t value = 0;
  const char* end = text_.data() + text_.size();
  auto [ptr, ec] = std::from_chars(text_.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

namespace {

struct Reader {
  std::string_view text;
  size_t at = 0;
  std::string error;

  bool fail(const std::string& what) {
    if (error.empty()) error = what + " at byte " + std::to_string(at);
    return false;
  }
  void skip_space() {
    while (at < text.size() && (text[at] == ' ' || text[at] == '\n' || text[at] == '\r' || text[at] == '\t')) ++at;
  }
  bool literal(std::string_view word) {
    if (text.substr(at, word.size()) != word) return false;
    at += word.size();
    return true;
  }

  static void append_utf8(std::string& out, uint32_t code) {
    if (code < 0x80) {
      out += char(code);
    } else if (code < 0x800) {
      out += char(0xC0 | (code >> 6));
      out += char(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += char(0xE0 | (code >> 12));
      out += char(0x80 | ((code >> 6) & 0x3F));
      out += char(0x80 | (code & 0x3F));
    } else {
      out += char(0xF0 | (code >> 18));
      out += char(0x80 | ((code >> 12) & 0x3F));
      out += char(0x80 | ((code >> 6) & 0x3F));
      out += char(0x80 | (code & 0x3F));
    }
  }

  bool hex4(uint32_t* code) {
    if (at + 4 > text.size()) return fail("truncated \\u escape");
    auto [ptr, ec] = std::from_chars(text.data() + at, text.data() + at + 4, *code, 16);
    if (ec != std::errc() || ptr != text.data() + at + 4) return fail("bad \\u escape");
    at += 4;
    return true;
  }

  bool string(std::string* out) {
    ++at;  // the opening quote
    while (at < text.size() && text[at] != '"') {
      char c = text[at++];
      if (c != '\\') {
        *out += c;
        continue;
      }
      if (at >= text.size()) break;
      char escape = text[at++];
      switch (escape) {
        case '"': *out += '"'; break;
        case '\\': *out += '\\'; break;
        case '/': *out += '/'; break;
        case 'b': *out += '\b'; break;
        case 'f': *out += '\f'; break;
        case 'n': *out += '\n'; break;
        case 'r': *out += '\r'; break;
        case 't': *out += '\t'; break;
        case 'u': {
          uint32_t code = 0;
          if (!hex4(&code)) return false;
          if (code >= 0xD800 && code < 0xDC00 && literal("\\u")) {
            uint32_t low = 0;
            if (!hex4(&low)) return false;
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(*out, code);
          break;
        }
        default: return fail(std::string("bad escape \\") + escape);
      }
    }
    if (at >= text.size()) return fail("unterminated string");
    ++at;
    return true;
  }

  bool value(Json* out, int depth) {
    if (depth > 64) return fail("nesting deeper than 64");
    skip_space();
    if (at >= text.size()) return fail("unexpected end");
    char c = text[at];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') {
      std::string s;
      if (!string(&s)) return false;
      *out = Json::string(std::move(s));
      return true;
    }
    if (literal("true")) return *out = Json::boolean(true), true;
    if (literal("false")) return *out = Json::boolean(false), true;
    if (literal("null")) return *out = Json(), true;
    size_t start = at;
    while (at < text.size() && (std::isdigit(static_cast<unsigned char>(text[at])) || text[at] == '-' ||
                                text[at] == '+' || text[at] == '.' || text[at] == 'e' || text[at] == 'E'))
      ++at;
    if (at == start) return fail(std::string("unexpected '") + c + "'");
    *out = Json::number_text(std::string(text.substr(start, at - start)));
    return true;
  }

  bool array(Json* out, int depth) {
    ++at;
    *out = Json::array();
    skip_space();
    if (at < text.size() && text[at] == ']') return ++at, true;
    while (true) {
      Json item;
      if (!value(&item, depth + 1)) return false;
      out->push(std::move(item));
      skip_space();
      if (at < text.size() && text[at] == ',') { ++at; continue; }
      if (at < text.size() && text[at] == ']') return ++at, true;
      return fail("expected ',' or ']'");
    }
  }

  bool object(Json* out, int depth) {
    ++at;
    *out = Json::object();
    skip_space();
    if (at < text.size() && text[at] == '}') return ++at, true;
    while (true) {
      skip_space();
      if (at >= text.size() || text[at] != '"') return fail("expected a key");
      std::string key;
      if (!string(&key)) return false;
      skip_space();
      if (at >= text.size() || text[at] != ':') return fail("expected ':'");
      ++at;
      Json item;
      if (!value(&item, depth + 1)) return false;
      out->set(key, std::move(item));
      skip_space();
      if (at < text.size() && text[at] == ',') { ++at; continue; }
      if (at < text.size() && text[at] == '}') return ++at, true;
      return fail("expected ',' or '}'");
    }
  }
};

void dump_string(const std::string& s, std::string* out) {
  *out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      *out += '\\';
      *out += char(c);
    } else if (c < 0x20) {
      static const char hex[] = "0123456789abcdef";
      *out += "\\u00";
      *out += hex[c >> 4];
      *out += hex[c & 15];
    } else {
      *out += char(c);
    }
  }
  *out += '"';
}

}  // namespace

std::optional<Json> Json::parse(std::string_view text, std::string* error) {
  Reader reader{text, 0, {}};
  Json json;
  if (reader.value(&json, 0)) {
    reader.skip_space();
    if (reader.at == text.size()) return json;
    reader.fail("trailing characters");
  }
  if (error) *error = reader.error;
  return std::nullopt;
}

std::string Json::dump() const {
  std::string out;
  switch (kind_) {
    case Kind::null: return "null";
    case Kind::boolean:
    case Kind::number: return text_;
    case Kind::string: dump_string(text_, &out); return out;
    case Kind::array:
      out += '[';
      for (size_t i = 0; i < items_.size(); ++i) out += (i ? "," : "") + items_[i].dump();
      return out + ']';
    case Kind::object:
      out += '{';
      for (size_t i = 0; i < items_.size(); ++i) {
        if (i) out += ',';
        dump_string(keys_[i], &out);
        out += ':' + items_[i].dump();
      }
      return out + '}';
  }
  return out;
}

}  // namespace kiln::serving
