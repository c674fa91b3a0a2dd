// Stable text forms of the IR, used by tests (which compare them) and by KILN_DEBUG dumps.
//  - print_graph: one line per node in dependency order, SSA style; exact and DAG-aware:
//        %0 = DEFINE_VAR index {i:0..9}
//        %1 = CONST index {4}
//        %2 = MUL index (%0, %1)
//  - render_expr: an infix expression for ALU trees, for reading index math: "((i*4)+j)" prints as
//    "i*4+j". Shared subtrees are repeated; beyond 200 levels of nesting the rest prints as "…".
#pragma once

#include <string>

#include "ir/uop.h"

namespace kiln {

std::string print_graph(const UOpPtr& root);
std::string render_expr(const UOpPtr& node);
// The argument of a node as printed in both forms ("4", "i:0..9", "[1, 2]", "ADD").
std::string render_arg(const Arg& arg);

}  // namespace kiln
