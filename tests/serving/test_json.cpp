// The backend's JSON reader and writer (serving/triton/json.h), which carry the model config
// between Triton and the backend: protobuf's JSON mapping writes int64 fields as strings, nests
// messages, and escapes names; a malformed text is an error saying where, never a crash.
#include "json.h"

#include "doctest/doctest.h"

using kiln::serving::Json;

namespace {

Json parse(std::string_view text) {
  std::string error;
  std::optional<Json> json = Json::parse(text, &error);
  INFO(error);
  REQUIRE(json.has_value());
  return *json;
}

std::string parse_error(std::string_view text) {
  std::string error;
  CHECK_FALSE(Json::parse(text, &error).has_value());
  return error;
}

}  // namespace

TEST_CASE("a model config round-trips: keys in order, numbers as written") {
  const char* text =
      R"({"name":"bert","max_batch_size":16,"input":[{"name":"input_ids","data_type":"TYPE_INT64","dims":["-1"]}],)"
      R"("dynamic_batching":{"max_queue_delay_microseconds":"1000","preferred_batch_size":[16]},"ratio":1.5e-3,)"
      R"("flag":true,"off":false,"none":null})";
  Json config = parse(text);
  CHECK(config.dump() == text);
  CHECK(config.find("max_batch_size")->as_int() == 16);
  CHECK(config.find("input")->items()[0].find("dims")->items()[0].as_int() == -1);  // int64 as a string
  CHECK(config.find("ratio")->as_int() == std::nullopt);                            // not an integer
  CHECK(config.find("flag")->as_bool());
  CHECK(config.find("missing") == nullptr);
}

TEST_CASE("set replaces a key in place and appends a new one") {
  Json config = parse(R"({"a":1,"b":2})");
  config.set("a", Json::number(3));
  config.set("c", Json::string("x"));
  CHECK(config.dump() == R"({"a":3,"b":2,"c":"x"})");
}

TEST_CASE("strings: escapes are decoded and written back") {
  Json value = parse(R"(["tab\there", "quote\" backslash\\ slash\/", "\u00e9\u20ac", "\ud83d\ude00", "\u0001"])");
  CHECK(value.items()[0].text() == "tab\there");
  CHECK(value.items()[1].text() == "quote\" backslash\\ slash/");
  CHECK(value.items()[2].text() == "\xc3\xa9\xe2\x82\xac");
  CHECK(value.items()[3].text() == "\xf0\x9f\x98\x80");
  CHECK(value.dump() == "[\"tab\\u0009here\",\"quote\\\" backslash\\\\ slash/\",\"\xc3\xa9\xe2\x82\xac\","
                        "\"\xf0\x9f\x98\x80\",\"\\u0001\"]");
}

TEST_CASE("malformed text is an error naming what and where") {
  CHECK(parse_error(R"({"a":1)") == "expected ',' or '}' at byte 6");
  CHECK(parse_error(R"({"a" 1})") == "expected ':' at byte 5");
  CHECK(parse_error(R"(["unterminated)") == "unterminated string at byte 14");
  CHECK(parse_error(R"("bad \q escape")") == "bad escape \\q at byte 7");
  CHECK(parse_error("[1] x") == "trailing characters at byte 4");
  CHECK(parse_error("") == "unexpected end at byte 0");
  CHECK(parse_error("@") == "unexpected '@' at byte 0");
  CHECK(parse_error(std::string(100, '[')) == "nesting deeper than 64 at byte 65");
}
