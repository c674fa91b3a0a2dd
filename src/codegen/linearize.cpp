// Linearisation of kernel ASTs; see linearize.h.
//
// How it works: every node knows the set of RANGEs its value depends on (a REDUCE removes its own).
// Code is collected per open loop ("frame"); a node goes into the innermost open frame among the
// ranges it depends on, which is the outermost place it can be computed (hoisting). A frame's code
// is spliced into its parent's when the loop closes, so work hoisted into an outer frame while an
// inner loop is open still lands before that inner loop. Frames remember which nodes they already
// hold, so a node shared by several users is computed once per loop instance.
#include "codegen/linearize.h"

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <unordered_map>

#include "ir/build.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "rewrite/graph_rewrite.h"
#include "support/error.h"

namespace kiln {

namespace {

struct Frame {
  const UOp* range = nullptr;  // null for the kernel body outside every loop
  std::vector<UOpPtr> code;
  // AST node → the node that holds its value in this frame (the node itself, or a rebuilt node
  // whose REDUCE sources became accumulator loads).
  std::unordered_map<const UOp*, UOpPtr> lowered;
  UOpPtr last_store;
};
// The open frames from the kernel body (front) to the innermost loop (back).
using Path = std::vector<Frame*>;

int64_t axis_of(const UOp* range) { return range->arg_int(); }

bool allowed_in_kernel_ast(Ops op) {
  switch (op) {
    case Ops::CONST: case Ops::DEFINE_GLOBAL: case Ops::DEFINE_VAR: case Ops::INDEX: case Ops::LOAD: case Ops::STORE:
    case Ops::CAST: case Ops::BITCAST: case Ops::VECTORIZE: case Ops::GEP: case Ops::SHUFFLE_XOR:
    // A work-group's reduction through local memory (opt/gpu_grid.h): the partials are stored, a
    // BARRIER follows the stores, and the loads read the buffer AFTER the barrier.
    case Ops::DEFINE_LOCAL: case Ops::BARRIER: case Ops::AFTER:
    // A warp's tensor-core multiply-accumulate (opt/gpu_tensor_cores.h).
    case Ops::WMMA:
      return true;
    default:
      return op_is_alu(op);
  }
}

class Linearizer {
 public:
  explicit Linearizer(const UOpPtr& ast) : ast_(ast) {}

  LinearProgram run() {
    if (ast_->op() != Ops::SINK) fail(str_cat("a kernel AST is a SINK, not ", op_name(ast_->op())));
    const auto* name = std::get_if<std::string>(&ast_->arg());
    if (name == nullptr || name->empty()) fail("the kernel SINK has no name (its argument must be a string)");
    if (ast_->src_count() == 0) fail("kernel '" + *name + "' stores nothing");
    for (const UOpPtr& store : ast_->srcs())
      if (store->op() != Ops::STORE) fail(str_cat("the kernel SINK holds a ", op_name(store->op()), ", not a STORE"));
    // The base IR rules (ALU source types, constants) hold for kernel ASTs too.
    if (verification_enabled()) verify(ast_, ir_spec(), "kernel AST given to linearize");
    compute_range_dependencies();
    for (const UOp* node : toposort(ast_)) {
      if (node->op() != Ops::REDUCE) continue;
      std::vector<const UOp*> ranges;
      for (size_t i = 1; i < node->src_count(); ++i) ranges.push_back(node->src(i).get());
      std::sort(ranges.begin(), ranges.end(), [](const UOp* a, const UOp* b) { return a->arg_int() < b->arg_int(); });
      reduce_ranges_[node] = ranges;
      reduces_by_ranges_[ranges].push_back(node);
    }

    std::vector<const UOp*> outputs = output_ranges();
    for (const UOp* node : toposort(ast_))
      if (node->op() == Ops::REDUCE)
        for (size_t i = 1; i < node->src_count(); ++i)
          if (std::find(outputs.begin(), outputs.end(), node->src(i).get()) != outputs.end())
            fail(str_cat("RANGE axis ", axis_of(node->src(i).get()),
                         " is an output range and is also reduced inside its own loop by a REDUCE"));

    Frame body;
    Path path{&body};
    for (const UOp* range : outputs) path = open_loop(range->self(), path);
    for (const UOpPtr& store : ast_->srcs()) emit(store, path);
    while (path.size() > 1) close_loop(path);
    return LinearProgram{*name, std::move(body.code)};
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw InternalError("linearize: " + message, std::source_location::current(), print_graph(ast_));
  }

  // ranges_of_[node]: the RANGEs the node's value depends on, sorted by pointer.
  void compute_range_dependencies() {
    for (const UOp* node : toposort(ast_)) {
      std::vector<const UOp*> ranges;
      for (const UOpPtr& source : node->srcs()) {
        const auto& of_source = ranges_of_.at(source.get());
        ranges.insert(ranges.end(), of_source.begin(), of_source.end());
      }
      if (node->op() == Ops::RANGE) ranges.push_back(node);
      if (node->op() == Ops::REDUCE) {
        for (size_t i = 1; i < node->src_count(); ++i) {
          if (node->src(i)->op() != Ops::RANGE)
            fail(str_cat("REDUCE reduces over a ", op_name(node->src(i)->op()), ", not a RANGE"));
          std::erase(ranges, node->src(i).get());
        }
      }
      std::sort(ranges.begin(), ranges.end());
      ranges.erase(std::unique(ranges.begin(), ranges.end()), ranges.end());
      ranges_of_[node] = std::move(ranges);
    }
  }

  // The RANGEs the STOREs depend on outside REDUCEs, outermost (lowest axis id) first.
  std::vector<const UOp*> output_ranges() const {
    std::vector<const UOp*> ranges;
    for (const UOpPtr& store : ast_->srcs()) {
      const auto& of_store = ranges_of_.at(store.get());
      ranges.insert(ranges.end(), of_store.begin(), of_store.end());
    }
    sort_by_axis(ranges);
    return ranges;
  }

  void sort_by_axis(std::vector<const UOp*>& ranges) const {
    std::sort(ranges.begin(), ranges.end());
    ranges.erase(std::unique(ranges.begin(), ranges.end()), ranges.end());
    std::sort(ranges.begin(), ranges.end(), [](const UOp* a, const UOp* b) { return axis_of(a) < axis_of(b); });
    for (size_t i = 1; i < ranges.size(); ++i)
      if (axis_of(ranges[i]) == axis_of(ranges[i - 1]))
        fail(str_cat("two different RANGEs have axis id ", axis_of(ranges[i])));
  }

  // Index of the innermost frame of `path` whose loop the node depends on (0: the kernel body).
  size_t level_of(const UOp* node, const Path& path) const {
    size_t level = 0;
    for (const UOp* range : ranges_of_.at(node)) {
      auto found = std::find_if(path.begin(), path.end(), [&](const Frame* frame) { return frame->range == range; });
      if (found == path.end())
        fail(str_cat(op_name(node->op()), " depends on RANGE axis ", axis_of(range), " outside that range's loop"));
      level = std::max(level, static_cast<size_t>(found - path.begin()));
    }
    return level;
  }

  // Like level_of, but -1 instead of a failure when the node needs a loop that `path` lacks.
  int64_t level_if_open(const UOp* node, const Path& path) const {
    int64_t level = 0;
    for (const UOp* range : ranges_of_.at(node)) {
      auto found = std::find_if(path.begin(), path.end(), [&](const Frame* frame) { return frame->range == range; });
      if (found == path.end()) return -1;
      level = std::max(level, static_cast<int64_t>(found - path.begin()));
    }
    return level;
  }

  Path open_loop(const UOpPtr& range, Path path) {
    for (const Frame* frame : path)
      if (frame->range == range.get())
        fail(str_cat("RANGE axis ", axis_of(range.get()), " is reduced inside its own loop (an output range cannot be reduced)"));
    UOpPtr lowered = range->with_srcs({emit(range->src(0), path)});
    auto frame = std::make_unique<Frame>();
    frame->range = range.get();
    frame->code.push_back(lowered);
    frame->lowered[range.get()] = lowered;
    path.push_back(frame.get());
    frames_.push_back(std::move(frame));
    return path;
  }

  // Closes the innermost loop of `path` and splices its code into the parent frame. Returns the END.
  UOpPtr close_loop(Path& path) {
    Frame* frame = path.back();
    path.pop_back();
    Frame* parent = path.back();
    KILN_ASSERT(frame->last_store, "a loop without a store: RANGE axis ", axis_of(frame->range));
    UOpPtr end = UOp::make(Ops::END, dtypes::void_, {frame->last_store, frame->code.front()});
    frame->code.push_back(end);
    parent->code.insert(parent->code.end(), frame->code.begin(), frame->code.end());
    parent->last_store = frame->last_store;
    frame->code.clear();
    frame->lowered.clear();
    return end;
  }

  // Appends a node that codegen created (not an AST node) to a frame, once.
  static void place_once(Frame* frame, const UOpPtr& node) {
    if (frame->lowered.emplace(node.get(), node).second) frame->code.push_back(node);
  }

  UOpPtr emit(const UOpPtr& node, const Path& path) {
    size_t level = level_of(node.get(), path);
    Frame* frame = path[level];
    if (auto found = frame->lowered.find(node.get()); found != frame->lowered.end()) return found->second;
    Path here(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(level) + 1);
    UOpPtr result;
    if (node->op() == Ops::REDUCE) {
      result = lower_reduce(node, here);
    } else {
      if (!allowed_in_kernel_ast(node->op()))
        fail(str_cat(op_name(node->op()), " is not part of a kernel AST (docs/kernel-ast.md)"));
      std::vector<UOpPtr> sources;
      sources.reserve(node->src_count());
      for (const UOpPtr& source : node->srcs()) sources.push_back(emit(source, here));
      result = node->with_srcs(std::move(sources));
      frame->code.push_back(result);
      if (node->op() == Ops::STORE) frame->last_store = result;
    }
    frame->lowered[node.get()] = result;
    return result;
  }

  UOpPtr identity_of(Ops op, DType dtype) const {
    if (dtype.count() > 1) {
      UOpPtr lane = identity_of(op, dtype.base());
      return UOp::make(Ops::VECTORIZE, dtype, std::vector<UOpPtr>(static_cast<size_t>(dtype.count()), lane));
    }
    return reduction_identity(op, dtype);
  }

  // The REDUCEs lowered together with `reduce`: those over the same ranges that can be computed in
  // the same frame and are not lowered there yet (the copies of an unrolled output axis, or two
  // reductions of one input). They share one loop nest, each with its own accumulator, so the values
  // they read in common are loaded once per iteration: a register tile.
  std::vector<UOpPtr> reduce_group(const UOpPtr& reduce, const Path& path) const {
    std::vector<UOpPtr> group{reduce};
    auto key = reduce_ranges_.find(reduce.get());
    if (key == reduce_ranges_.end()) return group;
    Frame* home = path.back();
    auto level = static_cast<int64_t>(path.size()) - 1;
    for (const UOp* other : reduces_by_ranges_.at(key->second)) {
      if (other == reduce.get() || home->lowered.count(other) != 0) continue;
      if (level_if_open(other, path) != level) continue;
      group.push_back(other->self());
    }
    return group;
  }

  // REDUCE → accumulator: init before the loops, update in the innermost loop, load after them.
  UOpPtr lower_reduce(const UOpPtr& first, const Path& path) {
    std::vector<UOpPtr> group = reduce_group(first, path);
    std::vector<const UOp*> ranges;
    for (size_t i = 1; i < first->src_count(); ++i) ranges.push_back(first->src(i).get());
    sort_by_axis(ranges);
    if (!ranges.empty() && axis_of(ranges.front()) == 0)
      fail("REDUCE over RANGE axis 0 (axis 0 is the parallel output axis)");

    Frame* body = path.front();
    Frame* home = path.back();
    UOpPtr zero = const_int(dtypes::index, 0);
    struct Accumulator {
      UOpPtr reduce, acc, init;
    };
    std::vector<Accumulator> accumulators;
    for (const UOpPtr& reduce : group) {
      Ops op = reduce->arg_op();
      DType dtype = reduce->dtype();
      if (op != Ops::ADD && op != Ops::MUL && op != Ops::MAX)
        fail(str_cat("REDUCE with ", op_name(op), " (only ADD, MUL and MAX are reductions)"));
      if (dtype != reduce->src(0)->dtype() || dtype == dtypes::void_)
        fail(str_cat("REDUCE of type ", dtype.name(), " over a value of type ", reduce->src(0)->dtype().name()));
      auto [slot, unused] = accumulator_slots_.emplace(reduce.get(), static_cast<int64_t>(accumulator_slots_.size()));
      UOpPtr acc = UOp::make(Ops::DEFINE_REG, dtype.ptr(AddrSpace::Register, 1), {}, slot->second);
      UOpPtr identity = identity_of(op, dtype);
      place_once(body, acc);
      place_once(body, zero);
      if (identity->op() == Ops::VECTORIZE) place_once(body, identity->src(0));
      place_once(body, identity);
      UOpPtr init_index = UOp::make(Ops::INDEX, acc->dtype(), {acc, zero});
      UOpPtr init = UOp::make(Ops::STORE, dtypes::void_, {init_index, identity});
      home->code.push_back(init_index);
      home->code.push_back(init);
      home->last_store = init;
      accumulators.push_back({reduce, acc, init});
    }

    Path inner = path;
    std::vector<UOpPtr> loop_ranges;
    for (const UOp* range : ranges) {
      inner = open_loop(range->self(), inner);
      loop_ranges.push_back(inner.back()->code.front());
    }
    Frame* innermost = inner.back();
    std::vector<UOpPtr> values;
    for (const Accumulator& a : accumulators) values.push_back(emit(a.reduce->src(0), inner));
    for (size_t i = 0; i < accumulators.size(); ++i) {
      const Accumulator& a = accumulators[i];
      std::vector<UOpPtr> after_sources{a.acc, a.init};
      after_sources.insert(after_sources.end(), loop_ranges.begin(), loop_ranges.end());
      UOpPtr acc_in_loop = UOp::make(Ops::AFTER, a.acc->dtype(), std::move(after_sources));
      UOpPtr index_in_loop = UOp::make(Ops::INDEX, a.acc->dtype(), {acc_in_loop, zero});
      UOpPtr current = UOp::make(Ops::LOAD, a.reduce->dtype(), {index_in_loop});
      UOpPtr updated = UOp::make(a.reduce->arg_op(), a.reduce->dtype(), {current, values[i]});
      UOpPtr update = UOp::make(Ops::STORE, dtypes::void_, {index_in_loop, updated});
      for (const UOpPtr& node : {acc_in_loop, index_in_loop, current, updated, update}) innermost->code.push_back(node);
      innermost->last_store = update;
    }

    UOpPtr last = innermost->last_store;
    while (inner.size() > path.size()) last = close_loop(inner);
    UOpPtr first_result;
    for (const Accumulator& a : accumulators) {
      UOpPtr acc_done = UOp::make(Ops::AFTER, a.acc->dtype(), {a.acc, last});
      UOpPtr index_done = UOp::make(Ops::INDEX, a.acc->dtype(), {acc_done, zero});
      UOpPtr result = UOp::make(Ops::LOAD, a.reduce->dtype(), {index_done});
      for (const UOpPtr& node : {acc_done, index_done, result}) home->code.push_back(node);
      if (a.reduce == first) first_result = result;
      else home->lowered[a.reduce.get()] = result;
    }
    return first_result;
  }

  UOpPtr ast_;
  std::unordered_map<const UOp*, std::vector<const UOp*>> ranges_of_;
  std::unordered_map<const UOp*, int64_t> accumulator_slots_;
  // Each REDUCE's ranges (sorted by pointer), and the REDUCEs over each such set in AST order.
  std::unordered_map<const UOp*, std::vector<const UOp*>> reduce_ranges_;
  std::map<std::vector<const UOp*>, std::vector<const UOp*>> reduces_by_ranges_;
  std::vector<std::unique_ptr<Frame>> frames_;
};

}  // namespace

LinearProgram linearize(const UOpPtr& kernel_ast) { return Linearizer(kernel_ast).run(); }

std::string print_linear(const LinearProgram& program) {
  std::unordered_map<const UOp*, size_t> ids;
  std::ostringstream out;
  out << "kernel " << program.name << "\n";
  size_t depth = 0;
  for (size_t i = 0; i < program.ops.size(); ++i) {
    const UOp& node = *program.ops[i];
    if (node.op() == Ops::END && depth > 0) --depth;
    out << std::string(2 * depth + 2, ' ') << "%" << i << " = " << op_name(node.op()) << " " << node.dtype().name();
    if (node.src_count() != 0) {
      out << " (";
      for (size_t s = 0; s < node.src_count(); ++s) {
        auto found = ids.find(node.src(s).get());
        out << (s ? ", " : "") << (found == ids.end() ? std::string("?") : "%" + std::to_string(found->second));
      }
      out << ")";
    }
    if (!std::holds_alternative<std::monostate>(node.arg())) out << " {" << render_arg(node.arg()) << "}";
    out << "\n";
    ids[&node] = i;
    if (node.op() == Ops::RANGE) ++depth;
  }
  return out.str();
}

std::vector<std::string> program_variables(const LinearProgram& program) {
  std::map<std::string, const UOp*> by_name;
  for (const UOpPtr& node : program.ops) {
    if (node->op() != Ops::DEFINE_VAR) continue;
    auto [at, added] = by_name.emplace(node->arg_variable().name, node.get());
    KILN_ASSERT(added || at->second->arg_variable() == node->arg_variable(), "kernel '", program.name, "': variable '",
                at->first, "' is defined twice with different bounds");
  }
  std::vector<std::string> names;
  for (const auto& [name, node] : by_name) names.push_back(name);
  return names;
}

}  // namespace kiln
