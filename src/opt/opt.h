// Opt actions: the choices the kernel optimisation layer makes, each a split of one RANGE.
//
// A kernel AST's RANGEs carry their kind in their axis id (docs/kernel-ast.md, "Axis kinds"):
//   0 …          output loops (axis 0 is the one the runtime splits over threads)
//   1000 …       reduce loops
//   2000 …       UPCAST: not a loop — the expander turns it into the lanes of vector values
//   3000 …       UNROLL: not a loop — the expander makes one copy of the code per value
// UPCAST and UNROLL split range r (extent N, `amount` dividing N) into r = outer·amount + inner: the outer part
// keeps r's axis id and loop, the inner part is a new range of the kind the Opt names. Applying the
// same Opt list to the same kernel always gives the same AST, so a plan and the kernel cache, which
// key on the optimised AST, cover the choices and compiles stay reproducible. SWAP renumbers two output
// loops, which changes their nesting and which of them the runtime splits over threads. MERGE joins
// two output loops a (outer) and b (inner, extent E), either extent constant or symbolic, into one
// range m of a's id: a = m / E, b = m % E (a 1x1 conv's 14×14 pixels become one axis of 196 that
// vectorises; a symbolic batch and the channels become one axis that threads split; an image's rows
// and columns of any size one contiguous loop, where every index folds a·E + b back to m). PADTO rounds an output loop's
// extent E (constant or symbolic: ⌈E / amount⌉·amount) up to a multiple of `amount`: every store and
// every load that depends on the loop gets the valid `r < E` (loads yield 0 there), so the extra
// iterations read and write nothing. (optimize_schedule then lets some of those loads read at a
// valid point instead, without the mask: opt/padded_loads.h. The Opt itself always masks.) On a
// reduce loop PADTO also makes every REDUCE over it reduce `where(r < E, value, identity)`: a load
// of 0 can still give a value (ReLU(0·w + b)), which the padded steps must not add.
// SPLIT of a reduce loop makes two reduce loops the same way, only where `amount` provably divides E
// (a symbolic one after its PADTO), the inner a new reduce range that UPCAST can take.
// SPLIT makes output loop r (extent E, constant or symbolic) two output loops, r = outer·amount +
// inner: the outer keeps r's id and position, the inner is a new output loop of extent `amount`
// (the next free id, so innermost among the output loops). When `amount` does not provably divide E
// the outer runs ceil(E / amount) times; an extra iteration computes row E - 1 again (every use of r
// reads min(r, E - 1), so loads stay in bounds without a mask inside the reduction) and its stores
// are masked off. That gives the heuristics a constant loop to tile inside a symbolic one (a
// matmul's `batch·sequence` rows: docs/symbolic-shapes.md, decision 7).
// BLOCKS is SPLIT the other way round: output loop r (extent E) becomes r = outer·⌈E / amount⌉ +
// inner, the outer a loop of `amount` iterations keeping r's id, the inner a new output loop of
// ⌈E / amount⌉ (symbolic where E is), padded past E as SPLIT pads. It cuts a symbolic loop into a
// constant number of blocks, which a SPLIT cannot: the threads' share of an image's rows
// (heuristics.h, row blocks).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/uop.h"

namespace kiln {

// The meaning of the Opt actions. A tuning database (tuning_db.h) keys its entries on this number,
// so an entry chosen under other semantics is never applied. Bump it whenever an Opt's effect on a
// kernel changes (how a split numbers its ranges, what PADTO masks, what SWAP renumbers, …) or an
// Opt is renamed or removed; adding a new OptOp without changing the others needs no bump.
constexpr int kOptSemanticsVersion = 1;

constexpr int64_t kFirstUpcastAxis = 2000;
constexpr int64_t kFirstUnrollAxis = 3000;

enum class AxisKind { Loop, Reduce, Upcast, Unroll };
AxisKind axis_kind(int64_t axis);

enum class OptOp {
  Upcast,  // an output or reduce axis's inner part becomes vector lanes (one UPCAST per kernel)
  Unroll,  // an output or reduce axis's inner part becomes copies of the code (register tiles)
  Swap,    // two output loops trade places (`amount` is the other axis id): which one is outermost
  Merge,   // output loop `axis` absorbs the inner output loop `amount` (a·E + b becomes one range)
  Padto,   // output loop `axis` runs to the next multiple of `amount`; the extra iterations are masked
  Split,   // output loop `axis` becomes outer × a new inner output loop of `amount` (padded, see above)
  Blocks,  // output loop `axis` becomes `amount` blocks × a new inner output loop (padded, see above)
};

// Which loops an Opt takes: output or reduce loops (UPCAST, UNROLL, PADTO, SPLIT), output loops
// only (BLOCKS), or two different output loops, the second as its amount (SWAP, MERGE).
enum class OptAxes { OutputOrReduce, OutputOnly, TwoOutputLoops };

// A kind of Opt as the rest of kiln spells it: its name (debug output, `Opt::text`, the tuning
// database's lines) and the loops it takes. opt_kinds() is the one list of them: a new OptOp is
// added there and in apply_opt (opt.cpp), and the tuning database reads and writes it from then on.
struct OptKind {
  OptOp op;
  std::string_view name;
  OptAxes axes;
};

// Every kind of Opt, in OptOp order.
const std::vector<OptKind>& opt_kinds();
const OptKind& opt_kind(OptOp op);
// The kind called `name` ("UPCAST"), or null.
const OptKind* opt_kind_named(std::string_view name);

struct Opt {
  OptOp op = OptOp::Upcast;
  int64_t axis = 0;    // axis id of the RANGE to split
  int64_t amount = 1;  // extent of the new inner range (divides the range's extent); SWAP: the other axis
  std::string text() const;  // "UPCAST(axis 1, 16)", "SWAP(axis 0, 1)", "MERGE(axis 1, 2)", "PADTO(axis 1, 16)", "SPLIT(axis 1, 8)", "BLOCKS(axis 2, 4)"
  friend bool operator==(const Opt&, const Opt&) = default;
};

// Why an Opt cannot apply (no such axis, amount does not divide, a second UPCAST): the message names
// the Opt and the kernel.
class InvalidOpt : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The RANGE nodes of a kernel AST by axis id.
std::vector<const UOp*> kernel_ranges(const UOpPtr& kernel);

// For each node of a kernel AST: the RANGEs its value depends on, less those that a REDUCE inside
// it reduces over (a reduce range is open only inside its reduction's loop).
std::unordered_map<const UOp*, std::set<const UOp*>> open_ranges(const UOpPtr& kernel);

// `kernel` with RANGE `target` split into outer·E + inner (E = inner's extent), simplified: uses of
// the range read the sum, and a REDUCE over it reduces over both parts (over `inner` alone when
// `outer` has extent 1). The split under UPCAST/UNROLL, and under the scheduler's split of a
// reduce loop read through r / c and r % c.
UOpPtr split_range(const UOpPtr& kernel, const UOp* target, const UOpPtr& outer, const UOpPtr& inner);

// `kernel` with `opt` applied (simplified). Throws InvalidOpt when the Opt does not fit the kernel.
UOpPtr apply_opt(const UOpPtr& kernel, const Opt& opt);
UOpPtr apply_opts(UOpPtr kernel, const std::vector<Opt>& opts);

}  // namespace kiln
