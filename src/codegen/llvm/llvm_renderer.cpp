// The CPU renderer: control flow, memory and metadata; scalar semantics live in llvm_alu.cpp.
//
// Loops are emitted in rotated form (guard, body with the induction phi, latch compare at the END),
// the shape LLVM's loop passes expect. Masked loads and stores become a branch around the access, so
// an invalid (padding) index is never dereferenced; the vectoriser turns such diamonds into masked
// vector loads and stores.
#include "codegen/llvm/llvm_renderer.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include "codegen/llvm/amx_block.h"
#include "codegen/llvm/llvm_alu.h"
#include "codegen/llvm/llvm_vectors.h"
#include "codegen/llvm/next_tile_prefetch.h"
#include "codegen/llvm/strided_gather.h"
#include "codegen/target.h"
#include "opt/amx_layout.h"
#include "opt/dot_product_layout.h"
#include "support/error.h"

namespace kiln {

namespace {

constexpr uint64_t buffer_alignment = 64;  // docs/kernel-ast.md

struct OpenLoop {
  const UOp* range;
  llvm::PHINode* counter;
  llvm::Value* stop;
  llvm::BasicBlock* body;
  llvm::BasicBlock* exit;
};

bool is_accumulator(const UOp& pointer) {
  return pointer.op() == Ops::DEFINE_REG ||
         (pointer.op() == Ops::AFTER && pointer.src(0)->op() == Ops::DEFINE_REG);
}

// The update `acc = op(acc, value)` of a lowered REDUCE: its first source loads the accumulator.
bool is_accumulator_update(const UOp& node) {
  if (node.src_count() != 2 || node.src(0)->op() != Ops::LOAD) return false;
  const UOp& index = *node.src(0)->src(0);
  return index.op() == Ops::INDEX && is_accumulator(*index.src(0));
}

class Renderer {
 public:
  Renderer(const LinearProgram& program, llvm::LLVMContext& context, int64_t l2_bytes)
      : l2_bytes_(l2_bytes),
        program_(program),
        context_(context),
        module_(std::make_unique<llvm::Module>(program.name, context)),
        builder_(context),
        entry_builder_(context) {}

  std::unique_ptr<llvm::Module> run() {
    scan_buffers();
    number_variables();
    find_strided_gathers();
    create_function();
    for (const UOpPtr& node : program_.ops) render(*node);
    if (!loops_.empty())
      fail(str_cat("RANGE axis ", loops_.back().range->arg_int(), " is never closed by an END"));
    builder_.CreateRetVoid();
    entry_builder_.CreateBr(first_block_);
    std::string problems;
    llvm::raw_string_ostream problem_stream(problems);
    if (llvm::verifyModule(*module_, &problem_stream)) fail("the generated LLVM IR is invalid: " + problems);
    return std::move(module_);
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw InternalError("LLVM renderer, kernel '" + program_.name + "': " + message, std::source_location::current(),
                        print_linear(program_));
  }

  // Which slots exist and which are written, for the alias scopes (outputs never alias inputs).
  void scan_buffers() {
    for (const UOpPtr& node : program_.ops) {
      if (node->op() == Ops::DEFINE_GLOBAL) {
        int64_t slot = node->arg_int();
        if (slot < 0) fail(str_cat("DEFINE_GLOBAL with negative slot ", slot));
        slot_is_output_.try_emplace(slot, false);
      }
      if (node->op() == Ops::STORE && node->src(0)->op() == Ops::INDEX &&
          node->src(0)->src(0)->op() == Ops::DEFINE_GLOBAL)
        slot_is_output_[node->src(0)->src(0)->arg_int()] = true;
    }
    llvm::MDBuilder metadata(context_);
    llvm::MDNode* domain = metadata.createAnonymousAliasScopeDomain("kiln.buffers");
    for (auto& [slot, is_output] : slot_is_output_)
      scopes_[slot] = metadata.createAnonymousAliasScope(domain, "buffer" + std::to_string(slot));
  }

  // The kernel's variables (DEFINE_VAR), numbered in the order of their names: their values are the
  // int64 array in the argument after the last buffer (docs/kernel-ast.md, "Variables").
  void number_variables() {
    int64_t position = 0;
    for (const std::string& name : program_variables(program_)) variable_position_[name] = position++;
    variables_slot_ = slot_is_output_.empty() ? 0 : slot_is_output_.rbegin()->first + 1;
  }

  // A variable's value, read once in the entry block and narrowed to the node's type; its bounds
  // become LLVM range knowledge through an assume (the caller promises them: the runtime checks).
  llvm::Value* variable_value(const UOp& node) {
    const VariableSpec& spec = node.arg_variable();
    llvm::Type* i64 = entry_builder_.getInt64Ty();
    llvm::Value* slot = entry_builder_.CreateConstInBoundsGEP1_64(entry_builder_.getPtrTy(), function_->getArg(0),
                                                                  static_cast<uint64_t>(variables_slot_));
    llvm::Value* table = entry_builder_.CreateAlignedLoad(entry_builder_.getPtrTy(), slot, llvm::Align(8), "variables");
    llvm::Value* address = entry_builder_.CreateConstInBoundsGEP1_64(
        i64, table, static_cast<uint64_t>(variable_position_.at(spec.name)));
    llvm::Value* value = entry_builder_.CreateAlignedLoad(i64, address, llvm::Align(8), spec.name);
    llvm::Value* at_least = entry_builder_.CreateICmpSGE(value, entry_builder_.getInt64(static_cast<uint64_t>(spec.min)));
    llvm::Value* at_most = entry_builder_.CreateICmpSLE(value, entry_builder_.getInt64(static_cast<uint64_t>(spec.max)));
    entry_builder_.CreateAssumption(entry_builder_.CreateAnd(at_least, at_most));
    llvm::Type* type = llvm_register_type(context_, node.dtype());
    return type == i64 ? value : entry_builder_.CreateIntCast(value, type, true);
  }

  // The VECTORIZEs that are strided gathers (strided_gather.h), and the scalar LOADs that only they
  // use: those are not rendered on their own.
  void find_strided_gathers() {
    std::unordered_map<const UOp*, int> uses, gathered_uses;
    for (const UOpPtr& node : program_.ops)
      for (const UOpPtr& source : node->srcs()) ++uses[source.get()];
    for (const UOpPtr& node : program_.ops) {
      if (node->op() != Ops::VECTORIZE) continue;
      std::optional<StridedGather> gather = match_strided_gather(*node);
      if (!gather) continue;
      for (const UOp* load : gather->loads) ++gathered_uses[load];
      strided_gathers_.emplace(node.get(), std::move(*gather));
    }
    for (auto& [load, count] : gathered_uses)
      if (uses[load] == count) gathered_loads_.insert(load);
  }

  // `term + offsets[k] < bound` for every lane k at once: one vector add and compare.
  llvm::Value* lane_bound_compare(const LaneBoundCompare& compare) {
    llvm::Value* term = value_of(compare.term);
    auto* integer = llvm::cast<llvm::IntegerType>(term->getType());
    std::vector<llvm::Constant*> offsets;
    for (int64_t offset : compare.offsets) offsets.push_back(llvm::ConstantInt::get(integer, static_cast<uint64_t>(offset), true));
    auto lanes = static_cast<unsigned>(compare.offsets.size());
    llvm::Value* points = builder_.CreateAdd(builder_.CreateVectorSplat(lanes, term), llvm::ConstantVector::get(offsets));
    llvm::Value* bound = builder_.CreateVectorSplat(lanes, value_of(compare.bound));
    return compare.term->dtype().is_signed() ? builder_.CreateICmpSLT(points, bound) : builder_.CreateICmpULT(points, bound);
  }

  // A vector of `lanes` i1 spread `stride` apart over lanes·stride, false between.
  llvm::Value* spread_lanes(llvm::Value* lane_mask, unsigned stride) {
    auto lanes = static_cast<unsigned>(llvm::cast<llvm::FixedVectorType>(lane_mask->getType())->getNumElements());
    std::vector<int> positions(static_cast<size_t>(lanes) * stride, static_cast<int>(lanes));  // lanes: a false
    for (unsigned lane = 0; lane < lanes; ++lane) positions[static_cast<size_t>(lane) * stride] = static_cast<int>(lane);
    return builder_.CreateShuffleVector(lane_mask, llvm::Constant::getNullValue(lane_mask->getType()), positions);
  }

  // One masked load of lanes*stride contiguous elements, then every stride-th of them. Only the
  // elements the lanes read are unmasked (each with its lane's valid), so nothing outside what the
  // scalar loads would have read is touched; masked-off lanes take the LOADs' alternative values.
  llvm::Value* strided_gather(const UOp& node, const StridedGather& gather) {
    DType scalar = gather.loads.front()->dtype();
    auto lanes = static_cast<unsigned>(gather.loads.size());
    auto stride = static_cast<unsigned>(gather.stride);
    unsigned wide = lanes * stride;
    llvm::Type* element = llvm_memory_type(context_, scalar.ptr());
    auto* wide_type = llvm::FixedVectorType::get(element, wide);
    const UOp& first_index = *gather.loads.front()->src(0);
    llvm::Value* offset = builder_.CreateAdd(
        builder_.CreateIntCast(value_of(gather.base), builder_.getInt64Ty(), !gather.base->dtype().is_unsigned()),
        builder_.getInt64(static_cast<uint64_t>(gather.first)));
    llvm::Value* pointer = builder_.CreateGEP(element, value_of(first_index.src(0)), offset);
    llvm::Value* mask = llvm::Constant::getNullValue(llvm::FixedVectorType::get(builder_.getInt1Ty(), wide));
    if (gather.valids) mask = spread_lanes(lane_bound_compare(*gather.valids), stride);
    llvm::Value* passthrough = llvm::Constant::getNullValue(wide_type);
    std::vector<int> keep;
    for (unsigned lane = 0; lane < lanes; ++lane) {
      const UOp& load = *gather.loads[lane];
      const UOp& index = *load.src(0);
      llvm::Value* valid = index.src_count() == 3 ? value_of(index.src(2)) : builder_.getTrue();
      if (!gather.valids) mask = builder_.CreateInsertElement(mask, valid, builder_.getInt64(lane * stride));
      if (load.src_count() == 2)
        passthrough = builder_.CreateInsertElement(passthrough, llvm_to_memory(builder_, value_of(load.src(1)), scalar),
                                                   builder_.getInt64(lane * stride));
      keep.push_back(static_cast<int>(lane * stride));
    }
    llvm::CallInst* loaded = builder_.CreateMaskedLoad(wide_type, pointer, llvm::Align(scalar.scalar_bytes()), mask,
                                                       passthrough);
    annotate(loaded, first_index);
    return llvm_from_memory(builder_, builder_.CreateShuffleVector(loaded, keep), node.dtype());
  }

  void create_function() {
    llvm::Type* pointer = builder_.getPtrTy();
    llvm::Type* i64 = builder_.getInt64Ty();
    auto* type = llvm::FunctionType::get(builder_.getVoidTy(), {pointer, i64, i64}, false);
    function_ = llvm::Function::Create(type, llvm::Function::ExternalLinkage, program_.name, *module_);
    function_->setCallingConv(llvm::CallingConv::C);
    function_->setDoesNotThrow();
    function_->setDoesNotRecurse();
    function_->setMustProgress();
    function_->setWillReturn();
    function_->setNoSync();
    function_->setDoesNotFreeMemory();
    // Keeps LLVM from turning loops into memset/memcpy calls: kernels reference no symbols.
    function_->addFnAttr("no-builtins");
    llvm::Argument* buffers = function_->getArg(0);
    buffers->setName("buffers");
    function_->getArg(1)->setName("begin");
    function_->getArg(2)->setName("end");
    // The table of buffer pointers is only read, and nothing writes it during the call.
    for (auto kind : {llvm::Attribute::NoAlias, llvm::Attribute::NoCapture, llvm::Attribute::ReadOnly,
                      llvm::Attribute::NonNull, llvm::Attribute::NoUndef})
      buffers->addAttr(kind);
    buffers->addAttr(llvm::Attribute::getWithAlignment(context_, llvm::Align(8)));
    if (!slot_is_output_.empty())
      buffers->addAttr(llvm::Attribute::getWithDereferenceableBytes(
          context_, 8 * static_cast<uint64_t>(slot_is_output_.rbegin()->first + 1)));
    entry_builder_.SetInsertPoint(llvm::BasicBlock::Create(context_, "entry", function_));
    first_block_ = llvm::BasicBlock::Create(context_, "start", function_);
    builder_.SetInsertPoint(first_block_);
  }

  llvm::Value* value_of(const UOpPtr& node) const {
    auto found = values_.find(node.get());
    if (found == values_.end()) fail(str_cat(op_name(node->op()), " is used before it is defined"));
    return found->second;
  }

  void render(const UOp& node) {
    llvm::Value* result = nullptr;
    switch (node.op()) {
      case Ops::CONST: result = llvm_constant(context_, node); break;
      case Ops::DEFINE_GLOBAL: result = buffer_pointer(node); break;
      case Ops::DEFINE_VAR: result = variable_value(node); break;
      case Ops::DEFINE_REG: result = accumulator(node); break;
      case Ops::AFTER: result = value_of(node.src(0)); break;
      case Ops::INDEX: result = element_pointer(node); break;
      case Ops::LOAD:
        if (!gathered_loads_.count(&node)) result = load(node);
        break;
      case Ops::STORE: store(node); break;
      case Ops::RANGE: result = open_loop(node); break;
      case Ops::END:
        for (size_t i = 1; i < node.src_count(); ++i) close_loop(*node.src(i));
        break;
      case Ops::VECTORIZE: result = vectorize(node); break;
      case Ops::GEP: result = lanes_of(node); break;
      case Ops::WMMA:
        // An AMX block is rendered by the STORE that writes it (amx_block below).
        if (node.arg_string() != kAmxBlock) result = dot_products(node, nullptr);
        break;
      case Ops::DEFINE_LOCAL: result = local_array(node); break;
      case Ops::BARRIER: break;  // one thread runs the kernel's iteration: its stores are in order
      case Ops::CAST: result = llvm_cast(builder_, value_of(node.src(0)), node.src(0)->dtype(), node.dtype()); break;
      case Ops::BITCAST:
        result = llvm_bitcast(builder_, value_of(node.src(0)), node.src(0)->dtype(), node.dtype());
        break;
      default: {
        if (!op_is_alu(node.op())) fail(str_cat(op_name(node.op()), " cannot be rendered for the CPU"));
        std::vector<llvm::Value*> sources;
        for (const UOpPtr& source : node.srcs()) sources.push_back(value_of(source));
        DType operand = node.op() == Ops::WHERE ? node.src(1)->dtype() : node.src(0)->dtype();
        DType shift_amount = node.src_count() > 1 ? node.src(1)->dtype() : operand;
        bool update = is_accumulator_update(node);
        if (update && node.op() == Ops::ADD && node.src(1)->op() == Ops::WMMA) {
          result = dot_products(*node.src(1), sources[0]);  // the accumulator is the instruction's own
          break;
        }
        result = llvm_alu(builder_, node.op(), operand, sources, shift_amount, update);
        if (update && node.op() == Ops::ADD && operand.is_float()) allow_fused_multiply_add(node, result);
      }
    }
    if (result != nullptr) values_[&node] = result;
  }

  // acc + a*b in a reduction may become one fused multiply-add (rounded once, like a dot product in
  // any BLAS). Only accumulator updates are contracted: elsewhere a*b+c keeps two roundings, so
  // elementwise results stay exactly those of the IR's semantics (docs/kernel-ast.md).
  void allow_fused_multiply_add(const UOp& update, llvm::Value* sum) {
    auto* add = llvm::dyn_cast<llvm::Instruction>(sum);
    if (add == nullptr || !llvm::isa<llvm::FPMathOperator>(add)) return;
    add->setHasAllowContract(true);
    allow_contraction_below(*update.src(1), 3);
  }

  // The products and sums under an accumulator update: an unrolled reduction adds its copies'
  // products in a tree (a*b + c*d + …), and each of those adds may fuse with a product too.
  void allow_contraction_below(const UOp& node, int depth) {
    if (depth == 0 || (node.op() != Ops::MUL && node.op() != Ops::ADD) || !node.dtype().is_float()) return;
    auto* instruction = llvm::dyn_cast<llvm::Instruction>(value_of(node.self()));
    if (instruction == nullptr || !llvm::isa<llvm::FPMathOperator>(instruction)) return;
    instruction->setHasAllowContract(true);
    if (node.op() == Ops::ADD)
      for (const UOpPtr& source : node.srcs()) allow_contraction_below(*source, depth - 1);
  }

  // A chain of dot-product WMMAs (opt/dot_product_layout.h) ending in `accumulator` where it starts from
  // zero (the accumulator update `acc + WMMA(…)` adds inside the instruction), or in its own
  // accumulator operand when `accumulator` is null.
  llvm::Value* dot_products(const UOp& node, llvm::Value* accumulator) {
    if (node.arg_string() != kDotProduct) fail("WMMA " + node.arg_string() + " on the CPU");
    const UOpPtr& below = node.src(2);
    llvm::Value* start = nullptr;
    if (below->op() == Ops::WMMA) start = dot_products(*below, accumulator);
    else if (accumulator != nullptr && is_zero_splat(*below)) start = accumulator;
    else start = accumulator != nullptr ? builder_.CreateAdd(accumulator, value_of(below)) : value_of(below);
    return dot_product_8bit(builder_, start, value_of(node.src(0)), value_of(node.src(1)));
  }

  static bool is_zero_splat(const UOp& node) {
    return node.op() == Ops::VECTORIZE && std::all_of(node.srcs().begin(), node.srcs().end(), [](const UOpPtr& s) {
             return s->is_const() && s->const_int() == 0;
           });
  }

  // A vector from scalars: a splat when every lane is the same value, a repeated group, lanes of a
  // few vectors (llvm_vectors.h), else one insert per lane.
  llvm::Value* vectorize(const UOp& node) {
    if (auto gather = strided_gathers_.find(&node); gather != strided_gathers_.end())
      return strided_gather(node, gather->second);
    if (node.src_count() != static_cast<size_t>(node.dtype().count()) || node.src_count() < 2)
      fail(str_cat("VECTORIZE of type ", node.dtype().name(), " with ", node.src_count(), " sources"));
    bool splat = std::all_of(node.srcs().begin(), node.srcs().end(), [&](const UOpPtr& s) { return s == node.src(0); });
    if (splat) return builder_.CreateVectorSplat(static_cast<unsigned>(node.src_count()), value_of(node.src(0)));
    if (llvm::Value* assembled = assembled_vector(node)) return assembled;
    llvm::Value* vector = llvm::PoisonValue::get(llvm_register_type(context_, node.dtype()));
    for (size_t lane = 0; lane < node.src_count(); ++lane)
      vector = builder_.CreateInsertElement(vector, value_of(node.src(lane)), builder_.getInt64(lane));
    return vector;
  }

  // The lanes of a VECTORIZE as a repeated group or as lanes of a few vectors; nullptr otherwise.
  llvm::Value* assembled_vector(const UOp& node) {
    const size_t count = node.src_count();
    for (size_t period = 2; period <= count / 2; period *= 2) {
      if (count % period != 0) break;
      bool repeats = true;
      for (size_t lane = period; lane < count && repeats; ++lane) repeats = node.src(lane) == node.src(lane % period);
      if (!repeats) continue;
      std::vector<llvm::Value*> group;
      for (size_t lane = 0; lane < period; ++lane) group.push_back(value_of(node.src(lane)));
      return repeated_group(builder_, group, static_cast<unsigned>(count));
    }
    std::vector<llvm::Value*> vectors;
    std::vector<const UOp*> vector_nodes;
    std::vector<std::pair<unsigned, unsigned>> lanes;
    for (const UOpPtr& source : node.srcs()) {
      if (source->op() != Ops::GEP || source->arg_list().size() != 1) return nullptr;
      const UOp* vector = source->src(0).get();
      auto found = std::find(vector_nodes.begin(), vector_nodes.end(), vector);
      if (found == vector_nodes.end()) {
        if (vector_nodes.size() == 8) return nullptr;
        vector_nodes.push_back(vector);
        vectors.push_back(value_of(source->src(0)));
        found = vector_nodes.end() - 1;
      }
      lanes.emplace_back(static_cast<unsigned>(found - vector_nodes.begin()), static_cast<unsigned>(source->arg_list()[0]));
    }
    return lanes_of_vectors(builder_, vectors, lanes);
  }

  // GEP: one lane as a scalar, or several as a shorter vector.
  llvm::Value* lanes_of(const UOp& node) {
    const std::vector<int64_t>& lanes = node.arg_list();
    llvm::Value* vector = value_of(node.src(0));
    if (lanes.size() == 1) return builder_.CreateExtractElement(vector, builder_.getInt64(static_cast<uint64_t>(lanes[0])));
    std::vector<int> mask(lanes.begin(), lanes.end());
    return builder_.CreateShuffleVector(vector, mask);
  }

  // buffers[slot], loaded once in the entry block; the pointee is 64-byte aligned.
  llvm::Value* buffer_pointer(const UOp& node) {
    llvm::Value* address = entry_builder_.CreateConstInBoundsGEP1_64(entry_builder_.getPtrTy(), function_->getArg(0),
                                                                      static_cast<uint64_t>(node.arg_int()));
    llvm::LoadInst* pointer = entry_builder_.CreateAlignedLoad(entry_builder_.getPtrTy(), address, llvm::Align(8),
                                                               "buffer" + std::to_string(node.arg_int()));
    llvm::MDNode* empty = llvm::MDNode::get(context_, {});
    pointer->setMetadata(llvm::LLVMContext::MD_align,
                         llvm::MDNode::get(context_, llvm::ConstantAsMetadata::get(
                                                         entry_builder_.getInt64(buffer_alignment))));
    pointer->setMetadata(llvm::LLVMContext::MD_nonnull, empty);
    pointer->setMetadata(llvm::LLVMContext::MD_noundef, empty);
    pointer->setMetadata(llvm::LLVMContext::MD_invariant_load, empty);
    return pointer;
  }

  llvm::Value* accumulator(const UOp& node) {
    DType dtype = node.dtype();
    if (dtype.addrspace() != AddrSpace::Register || dtype.pointer_size() < 1)
      fail("DEFINE_REG of type " + dtype.name() + " (a register array of known size is expected)");
    return entry_builder_.CreateAlloca(llvm_memory_type(context_, dtype), entry_builder_.getInt64(dtype.pointer_size()),
                                       "acc" + std::to_string(node.arg_int()));
  }

  // A kernel's own array (DEFINE_LOCAL, an AMX block's sums: opt/amx_tiles.h), on the stack; each
  // thread running the kernel has its own.
  llvm::Value* local_array(const UOp& node) {
    DType dtype = node.dtype();
    if (dtype.addrspace() != AddrSpace::Local || dtype.pointer_size() < 1)
      fail("DEFINE_LOCAL of type " + dtype.name() + " (an array of known size is expected)");
    llvm::AllocaInst* array = entry_builder_.CreateAlloca(llvm_memory_type(context_, dtype),
                                                          entry_builder_.getInt64(dtype.pointer_size()),
                                                          "local" + std::to_string(node.arg_int()));
    array->setAlignment(llvm::Align(buffer_alignment));
    return array;
  }

  // STORE(INDEX(block, 0), WMMA kAmxBlock): the block's sums by AMX tiles (opt/amx_layout.h).
  void amx_block(const UOp& node) {
    const UOp& product = *node.src(1);
    const UOp& index = *node.src(0);
    if (index.src(0)->op() != Ops::DEFINE_LOCAL || !index.src(1)->is_const() || index.src(1)->const_int() != 0)
      fail("an AMX block is stored at element 0 of a DEFINE_LOCAL");
    const UOp& parameters = *product.src(2);
    if (parameters.op() != Ops::VECTORIZE || parameters.src_count() < 5 || parameters.src_count() % 2 != 1 ||
        !std::all_of(parameters.srcs().begin(), parameters.srcs().end(), [](const UOpPtr& p) { return p->is_const(); }))
      fail("an AMX block's strides, depth and steps are constants");
    AmxBlockOperands operands;
    operands.block = value_of(node.src(0));
    operands.a = value_of(product.src(0));
    operands.b = value_of(product.src(1));
    operands.a_stride = static_cast<int64_t>(parameters.src(0)->const_int());
    operands.b_stride = static_cast<int64_t>(parameters.src(1)->const_int());
    operands.depth = static_cast<int64_t>(parameters.src(2)->const_int());
    operands.element_bytes = product.src(0)->src(0)->dtype().scalar_bytes();
    int64_t steps = 1;
    for (size_t i = 3; i + 1 < parameters.src_count(); i += 2) {
      operands.a_steps.push_back(AmxStep{static_cast<int64_t>(parameters.src(i)->const_int()),
                                         static_cast<int64_t>(parameters.src(i + 1)->const_int())});
      steps *= std::max<int64_t>(operands.a_steps.back().extent, 0);
    }
    if (operands.depth <= 0 || operands.depth % kAmxDepth != 0 || operands.element_bytes != 2 ||
        product.src(1)->src(0)->dtype().scalar_bytes() != 2)
      fail("an AMX block needs 16-bit operands and a depth that is a multiple of 32");
    if (steps != operands.depth || operands.a_steps.back().coefficient != 1 ||
        operands.a_steps.back().extent % kAmxDepth != 0)
      fail("an AMX block's steps multiply to its depth, the innermost contiguous in whole tile rows");
    emit_amx_block(builder_, operands);
  }

  llvm::Value* element_pointer(const UOp& node) {
    if (node.src_count() < 2 || node.src_count() > 3) fail("INDEX takes a pointer, an index and an optional valid");
    if (!node.src(0)->dtype().is_pointer()) fail("INDEX into a value of type " + node.src(0)->dtype().name());
    llvm::Value* base = value_of(node.src(0));
    llvm::Value* offset = builder_.CreateIntCast(value_of(node.src(1)), builder_.getInt64Ty(),
                                                 !node.src(1)->dtype().is_unsigned());
    llvm::Type* element = llvm_memory_type(context_, node.src(0)->dtype());
    // A masked index may be out of bounds where the mask is false; only unmasked ones are inbounds.
    if (node.src_count() == 3) return builder_.CreateGEP(element, base, offset);
    return builder_.CreateInBoundsGEP(element, base, offset);
  }

  // alias.scope / noalias for accesses to kernel buffers: reads of inputs and writes of outputs never
  // alias each other. Two outputs, or two inputs, may.
  void annotate(llvm::Instruction* access, const UOp& index) {
    const UOp& base = *index.src(0);
    if (base.op() != Ops::DEFINE_GLOBAL) return;
    int64_t slot = base.arg_int();
    bool is_output = slot_is_output_.at(slot);
    std::vector<llvm::Metadata*> others;
    for (auto& [other, other_is_output] : slot_is_output_)
      if (other_is_output != is_output) others.push_back(scopes_.at(other));
    access->setMetadata(llvm::LLVMContext::MD_alias_scope, llvm::MDNode::get(context_, {scopes_.at(slot)}));
    if (!others.empty()) access->setMetadata(llvm::LLVMContext::MD_noalias, llvm::MDNode::get(context_, others));
  }

  const UOp& index_of_access(const UOp& node) const {
    const UOp& index = *node.src(0);
    if (index.op() != Ops::INDEX) fail(str_cat(op_name(node.op()), " through a ", op_name(index.op()), ", not an INDEX"));
    return index;
  }

  // The value type `dtype` may be read from or written to `index`: the pointee itself, or a vector
  // of W pointee scalars starting at the index (a contiguous access from opt/expand).
  void check_access_type(const char* what, DType dtype, const UOp& index) const {
    DType pointee = index.src(0)->dtype().pointee();
    if (dtype == pointee || (pointee.count() == 1 && dtype.base() == pointee && dtype.count() > 1)) return;
    fail(str_cat(what, " of ", dtype.name(), " through ", index.src(0)->dtype().name()));
  }

  llvm::Value* load(const UOp& node) {
    const UOp& index = index_of_access(node);
    DType dtype = node.dtype();
    check_access_type("LOAD", dtype, index);
    llvm::Value* pointer = value_of(node.src(0));
    llvm::Type* memory = llvm_memory_type(context_, dtype.ptr());
    llvm::Align align(static_cast<uint64_t>(dtype.scalar_bytes()));
    prefetch_next_tile(node, pointer);
    auto read = [&] {
      llvm::LoadInst* loaded = builder_.CreateAlignedLoad(memory, pointer, align);
      annotate(loaded, index);
      return llvm_from_memory(builder_, loaded, dtype);
    };
    bool masked = index.src_count() == 3;
    if (!masked) return read();
    if (node.src_count() != 2) fail("a masked LOAD needs an alternative value (src[1])");
    llvm::Value* alternative = value_of(node.src(1));
    if (index.src(2)->dtype().count() > 1) {
      // A mask per lane: the masked-off lanes are not read (so they may lie outside the buffer).
      llvm::CallInst* loaded = builder_.CreateMaskedLoad(memory, pointer, align, value_of(index.src(2)),
                                                         llvm_to_memory(builder_, alternative, dtype));
      annotate(loaded, index);
      return llvm_from_memory(builder_, loaded, dtype);
    }
    llvm::BasicBlock* before = builder_.GetInsertBlock();
    llvm::BasicBlock* valid = llvm::BasicBlock::Create(context_, "load.valid", function_);
    llvm::BasicBlock* merge = llvm::BasicBlock::Create(context_, "load.merge", function_);
    builder_.CreateCondBr(value_of(index.src(2)), valid, merge);
    builder_.SetInsertPoint(valid);
    llvm::Value* loaded = read();
    llvm::BasicBlock* valid_end = builder_.GetInsertBlock();
    builder_.CreateBr(merge);
    builder_.SetInsertPoint(merge);
    llvm::PHINode* result = builder_.CreatePHI(loaded->getType(), 2);
    result->addIncoming(loaded, valid_end);
    result->addIncoming(alternative, before);
    return result;
  }

  // next_tile_prefetch.h. A prefetch never faults, so the address may lie past the buffer's end.
  void prefetch_next_tile(const UOp& load, llvm::Value* pointer) {
    const UOp& index = *load.src(0);
    if (index.src(0)->op() != Ops::DEFINE_GLOBAL || slot_is_output_.at(index.src(0)->arg_int())) return;
    std::vector<const UOp*> open_loops;
    for (const OpenLoop& loop : loops_) open_loops.push_back(loop.range);
    std::optional<int64_t> offset = next_tile_prefetch_offset(load, open_loops, l2_bytes_);
    if (!offset) return;
    llvm::Value* ahead = builder_.CreateGEP(llvm_memory_type(context_, load.dtype().base()), pointer,
                                            builder_.getInt64(static_cast<uint64_t>(*offset)));
    // read, keep in the L2 and outer caches (locality 2), data.
    builder_.CreateIntrinsic(llvm::Intrinsic::prefetch, {builder_.getPtrTy()},
                             {ahead, builder_.getInt32(0), builder_.getInt32(2), builder_.getInt32(1)});
  }

  void store(const UOp& node) {
    const UOp& index = index_of_access(node);
    if (node.src_count() != 2) fail("STORE takes an INDEX and a value");
    if (node.src(1)->op() == Ops::WMMA && node.src(1)->arg_string() == kAmxBlock) return amx_block(node);
    DType dtype = node.src(1)->dtype();
    check_access_type("STORE", dtype, index);
    llvm::Value* pointer = value_of(node.src(0));
    llvm::Value* value = llvm_to_memory(builder_, value_of(node.src(1)), dtype);
    llvm::Align align(static_cast<uint64_t>(dtype.scalar_bytes()));
    auto write = [&] {
      llvm::StoreInst* stored = builder_.CreateAlignedStore(value, pointer, align);
      annotate(stored, index);
    };
    if (index.src_count() != 3) return write();
    if (index.src(2)->dtype().count() > 1) {
      llvm::CallInst* stored = builder_.CreateMaskedStore(value, pointer, align, value_of(index.src(2)));
      annotate(stored, index);
      return;
    }
    llvm::BasicBlock* valid = llvm::BasicBlock::Create(context_, "store.valid", function_);
    llvm::BasicBlock* after = llvm::BasicBlock::Create(context_, "store.done", function_);
    builder_.CreateCondBr(value_of(index.src(2)), valid, after);
    builder_.SetInsertPoint(valid);
    write();
    builder_.CreateBr(after);
    builder_.SetInsertPoint(after);
  }

  // Guard, then the body block with the counter phi. Axis 0 runs over [begin, end) ∩ [0, size).
  llvm::Value* open_loop(const UOp& range) {
    llvm::Value* size = value_of(range.src(0));
    llvm::Type* type = size->getType();
    llvm::Value* start = llvm::ConstantInt::get(type, 0);
    llvm::Value* stop = size;
    int64_t axis = range.arg_int();
    if (axis == 0) {
      llvm::Value* begin = builder_.CreateSExtOrTrunc(function_->getArg(1), type);
      llvm::Value* end = builder_.CreateSExtOrTrunc(function_->getArg(2), type);
      start = builder_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, begin, start);
      stop = builder_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, end, size);
    }
    std::string name = "axis" + std::to_string(axis);
    llvm::BasicBlock* preheader = builder_.GetInsertBlock();
    llvm::BasicBlock* body = llvm::BasicBlock::Create(context_, name, function_);
    llvm::BasicBlock* exit = llvm::BasicBlock::Create(context_, name + ".exit", function_);
    builder_.CreateCondBr(builder_.CreateICmpSLT(start, stop), body, exit);
    builder_.SetInsertPoint(body);
    llvm::PHINode* counter = builder_.CreatePHI(type, 2, name + ".i");
    counter->addIncoming(start, preheader);
    loops_.push_back(OpenLoop{&range, counter, stop, body, exit});
    return counter;
  }

  void close_loop(const UOp& range) {
    if (loops_.empty() || loops_.back().range != &range)
      fail(str_cat("END closes RANGE axis ", range.arg_int(), ", which is not the innermost open loop"));
    OpenLoop loop = loops_.back();
    loops_.pop_back();
    llvm::BasicBlock* latch = builder_.GetInsertBlock();
    llvm::Value* next = builder_.CreateAdd(loop.counter, llvm::ConstantInt::get(loop.counter->getType(), 1), "", true, true);
    llvm::BranchInst* back_edge = builder_.CreateCondBr(builder_.CreateICmpSLT(next, loop.stop), loop.body, loop.exit);
    back_edge->setMetadata(llvm::LLVMContext::MD_loop, loop_metadata());
    loop.counter->addIncoming(next, latch);
    builder_.SetInsertPoint(loop.exit);
  }

  // A distinct loop ID marked mustprogress: kernel loops are finite counted loops.
  llvm::MDNode* loop_metadata() {
    llvm::Metadata* progress = llvm::MDNode::get(context_, llvm::MDString::get(context_, "llvm.loop.mustprogress"));
    llvm::MDNode* loop = llvm::MDNode::getDistinct(context_, {nullptr, progress});
    loop->replaceOperandWith(0, loop);
    return loop;
  }

  int64_t l2_bytes_;
  const LinearProgram& program_;
  llvm::LLVMContext& context_;
  std::unique_ptr<llvm::Module> module_;
  llvm::IRBuilder<> builder_;        // the code, in program order
  llvm::IRBuilder<> entry_builder_;  // the entry block: buffer pointers and accumulator allocas
  llvm::Function* function_ = nullptr;
  llvm::BasicBlock* first_block_ = nullptr;
  std::unordered_map<const UOp*, llvm::Value*> values_;
  std::unordered_map<const UOp*, StridedGather> strided_gathers_;
  std::unordered_set<const UOp*> gathered_loads_;  // LOADs rendered only as lanes of a strided gather
  std::vector<OpenLoop> loops_;
  std::map<int64_t, bool> slot_is_output_;
  std::map<int64_t, llvm::MDNode*> scopes_;
  std::map<std::string, int64_t> variable_position_;  // DEFINE_VAR name → index in the values array
  int64_t variables_slot_ = 0;                         // the argument holding that array
};

}  // namespace

std::unique_ptr<llvm::Module> render_llvm(const LinearProgram& program, llvm::LLVMContext& context,
                                          int64_t l2_bytes) {
  if (program.name.empty()) throw_internal_error("LLVM renderer: a kernel needs a name");
  return Renderer(program, context, l2_bytes < 0 ? host_cpu_caps().l2_bytes : l2_bytes).run();
}

}  // namespace kiln
