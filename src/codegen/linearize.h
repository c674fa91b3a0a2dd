// Linearisation: a kernel AST (docs/kernel-ast.md) becomes a straight-line program of UOps in
// execution order, the form the renderers walk from top to bottom.
//
// Before: SINK of STOREs over RANGEs and REDUCEs, a DAG with no order. After: a list in which
//  - every source of an op comes earlier in the list (and in a loop that is still open);
//  - a loop is `RANGE` … `END(last store in the loop, RANGE)`; loops nest by ascending axis id, and
//    each op sits in the outermost loop whose range it depends on (loop-invariant work is hoisted);
//  - each REDUCE is replaced by an accumulator: `DEFINE_REG` (placed with the kernel parameters),
//    `STORE(INDEX(acc, 0), identity)` just before its loops, inside them
//    `STORE(INDEX(AFTER(acc, init, ranges…), 0), op(LOAD(…), value))`, and after them
//    `LOAD(INDEX(AFTER(acc, END…), 0))`, which its users read. The AFTER nodes only keep the loads
//    before and after the loop apart (the IR is hash-consed); a renderer reads AFTER as its src[0].
// REDUCEs over the same ranges that can be computed in the same place (the copies of an unrolled
// output axis: a register tile) share one loop nest, each with its own accumulator. The same op may
// still appear twice when two loops share a RANGE (a REDUCE nested at two places): each copy belongs
// to its own loop, and a renderer simply rebinds the node to the newer value.
#pragma once

#include <string>
#include <vector>

#include "ir/uop.h"

namespace kiln {

struct LinearProgram {
  std::string name;           // the kernel name (the SINK's argument): the function's symbol
  std::vector<UOpPtr> ops;    // in execution order
};

// Linearises one kernel AST. Throws InternalError when the AST breaks the contract of
// docs/kernel-ast.md (no name, a RANGE used outside its loop, a REDUCE over an output range, …).
LinearProgram linearize(const UOpPtr& kernel_ast);

// The names of the program's size variables (DEFINE_VARs), sorted: the order in which every
// renderer takes their values (the CPU from an array after the buffers, GPU kernels as parameters),
// which is ScheduledKernel::variables' order. A name defined twice with different bounds is an
// InternalError.
std::vector<std::string> program_variables(const LinearProgram& program);

// One line per op, indented by loop depth; what KILN_DEBUG>=6 prints. Sources are named by the
// position (%n) of the op that last defined them.
std::string print_linear(const LinearProgram& program);

}  // namespace kiln
