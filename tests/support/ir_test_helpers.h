// Helpers shared by the IR test suites: readable expectations on printed IR.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "ir/printer.h"

namespace kiln::testing {

// Text with all whitespace removed, so expectations can be written with free spacing.
inline std::string without_whitespace(std::string text) {
  text.erase(std::remove_if(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c); }), text.end());
  return text;
}

}  // namespace kiln::testing

// Checks the infix rendering of a node, ignoring whitespace; prints both forms when it fails.
#define CHECK_EXPR(node, expected)                                                              \
  do {                                                                                          \
    std::string kiln_actual_ = ::kiln::render_expr(node);                                       \
    INFO("actual: ", kiln_actual_, "\n", ::kiln::print_graph(node));                            \
    CHECK(::kiln::testing::without_whitespace(kiln_actual_) == ::kiln::testing::without_whitespace(expected)); \
  } while (0)

// Checks the SSA listing of a graph, ignoring whitespace.
#define CHECK_GRAPH(node, expected)                                                             \
  do {                                                                                          \
    std::string kiln_actual_ = ::kiln::print_graph(node);                                       \
    INFO("actual:\n", kiln_actual_);                                                            \
    CHECK(::kiln::testing::without_whitespace(kiln_actual_) == ::kiln::testing::without_whitespace(expected)); \
  } while (0)
