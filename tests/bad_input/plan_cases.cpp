// Bad plans: every field of the header and of the metadata, corrupted one at a time. The content
// hash is recomputed after each change (reseal), so each case reaches the check of its own field
// instead of stopping at the hash: a corruption the hash cannot see must still be caught. The
// metadata is edited through flatbuffers' object API (plan_generated.h made with
// --gen-object-api for this test only) and the file laid out again as the plan writer does.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>

#include "catalogue.h"
#include "fixtures.h"
#include "plan/plan_format.h"
#include "plan_generated.h"

namespace bad_input {
namespace {

namespace field = kiln::plan::header_field;
namespace fb = kiln::plan_fb;
using kiln::plan::read_u32;
using kiln::plan::read_u64;
using kiln::plan::write_u32;
using kiln::plan::write_u64;

unsigned char* bytes_of(std::string& plan) { return reinterpret_cast<unsigned char*>(plan.data()); }

// The content hash of bytes [header, end) written into the header again.
std::string reseal(std::string plan) {
  write_u64(bytes_of(plan) + field::content_hash,
            kiln::plan::plan_content_hash(bytes_of(plan) + kiln::plan::kPlanHeaderSize, plan.size() - kiln::plan::kPlanHeaderSize));
  return plan;
}

std::string section(std::string& plan, size_t offset_field, size_t size_field) {
  return plan.substr(read_u64(bytes_of(plan) + offset_field), read_u64(bytes_of(plan) + size_field));
}

uint64_t align_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

// header | metadata | (page) weights | (page) code, as the writer lays a plan out, sealed.
std::string assemble(const std::string& metadata, const std::string& weights, const std::string& code, uint32_t version) {
  uint64_t metadata_offset = kiln::plan::kPlanHeaderSize;
  uint64_t weights_offset = align_up(metadata_offset + metadata.size(), kiln::plan::kPlanSectionAlignment);
  uint64_t code_offset = align_up(weights_offset + weights.size(), kiln::plan::kPlanSectionAlignment);
  std::string plan(code_offset + code.size(), '\0');
  std::memcpy(plan.data(), kiln::plan::kPlanMagic, sizeof kiln::plan::kPlanMagic);
  unsigned char* at = bytes_of(plan);
  write_u32(at + field::format_version, version);
  write_u32(at + field::header_size, kiln::plan::kPlanHeaderSize);
  write_u64(at + field::file_size, plan.size());
  write_u64(at + field::metadata_offset, metadata_offset);
  write_u64(at + field::metadata_size, metadata.size());
  write_u64(at + field::weights_offset, weights_offset);
  write_u64(at + field::weights_size, weights.size());
  write_u64(at + field::code_offset, code_offset);
  write_u64(at + field::code_size, code.size());
  plan.replace(metadata_offset, metadata.size(), metadata);
  plan.replace(weights_offset, weights.size(), weights);
  plan.replace(code_offset, code.size(), code);
  return reseal(plan);
}

// The good plan with its metadata edited by `edit`, laid out and sealed again; its header keeps the
// good plan's format version unless `version` says otherwise.
std::string with_metadata(std::string good, const std::function<void(fb::PlanT&)>& edit, uint32_t version = 0) {
  std::string metadata = section(good, field::metadata_offset, field::metadata_size);
  std::unique_ptr<fb::PlanT> plan = fb::UnPackPlan(metadata.data());
  edit(*plan);
  flatbuffers::FlatBufferBuilder builder;
  fb::FinishPlanBuffer(builder, fb::Plan::Pack(builder, plan.get()));
  std::string edited(reinterpret_cast<const char*>(builder.GetBufferPointer()), builder.GetSize());
  if (version == 0) version = kiln::plan::read_u32(bytes_of(good) + field::format_version);
  return assemble(edited, section(good, field::weights_offset, field::weights_size),
                  section(good, field::code_offset, field::code_size), version);
}

// The good plan with header field `at` set to `value` (u64, or u32 when `narrow`), sealed again.
std::string with_header(std::string plan, size_t at, uint64_t value, bool narrow = false) {
  if (narrow) write_u32(bytes_of(plan) + at, static_cast<uint32_t>(value));
  else write_u64(bytes_of(plan) + at, value);
  return reseal(plan);
}

Outcome load(const std::string& plan, const kiln_plan_options* options = nullptr) {
  kiln_plan* loaded = nullptr;
  kiln_status status = kiln_plan_load_buffer_v2(plan.data(), plan.size(), options, &loaded);
  Outcome result = outcome_of(status);
  // A case that loads must still free cleanly (and report KILN_OK as its outcome).
  if (loaded != nullptr) kiln_plan_free(loaded);
  return result;
}

fb::Slot& first_slot_of_kind(fb::PlanT& plan, fb::SlotKind kind) {
  for (auto& kernel : plan.kernels)
    for (fb::Slot& slot : kernel->slots)
      if (slot.kind() == kind) return slot;
  throw std::runtime_error(std::string("the good plan has no slot of kind ") + fb::EnumNameSlotKind(kind));
}

void set_slot(fb::Slot& slot, fb::SlotKind kind, int index, int64_t offset, int64_t size) {
  slot = fb::Slot(kind, index, offset, size);
}

// Size programs (src/plan/size_program.h): (opcode, operand) pairs.
constexpr int64_t kPush = 1, kVariable = 2, kMul = 5;

std::unique_ptr<fb::SizeProgramT> program(std::vector<int64_t> code) {
  auto table = std::make_unique<fb::SizeProgramT>();
  table->code = std::move(code);
  return table;
}

// The good plan's metadata made symbolic (format version 2): its input x [2, 4] becomes
// [rows, 4] with the variable rows in 1..2, so that every size at the maxima is the good plan's.
// Its kernels read no variable, and the cases that use it only load it.
void make_symbolic(fb::PlanT& plan) {
  plan.format_version = 2;
  auto rows = std::make_unique<fb::VariableT>();
  rows->name = "rows";
  rows->min = 1;
  rows->max = plan.inputs[0]->shape[0];
  plan.variables.push_back(std::move(rows));
  fb::ValueT& x = *plan.inputs[0];
  int64_t inner = x.shape[1];
  x.shape[0] = -1;
  x.dims.push_back(program({kVariable, 0}));
  x.dims.push_back(program({kPush, inner}));
  x.byte_size_program = program({kVariable, 0, kPush, inner * 4, kMul, 0});
}

// The good plan's metadata with a size the run decides (format version 6): a variable 'count' in
// 0..4 that no kernel reads, bound by the run from the first 8 bytes of the arena after kernel 0,
// and x pinned to zeros. Every size is the good plan's, so it loads.
void make_run_bound(fb::PlanT& plan) {
  plan.format_version = 6;
  auto count = std::make_unique<fb::VariableT>();
  count->name = "count";
  count->min = 0;
  count->max = 4;
  plan.variables.push_back(std::move(count));
  auto binding = std::make_unique<fb::RunBindingT>();
  binding->variable = 0;
  binding->source = std::make_unique<fb::Slot>(fb::SlotKind_Arena, 0, 0, 8);
  binding->dtype = KILN_DTYPE_INT64;
  binding->after_kernel = 0;
  binding->origin = "node 'count' (NonZero, opset 13)";
  plan.run_bindings.push_back(std::move(binding));
  auto pinned = std::make_unique<fb::PinnedInputT>();
  pinned->input = 0;
  pinned->bytes.assign(static_cast<size_t>(plan.inputs[0]->byte_size), 0);
  plan.pinned_inputs.push_back(std::move(pinned));
}

}  // namespace

Area plan_area(const std::string& work) {
  std::string good = compile_good_plan(work);
  // Reads of the good plan's layout that the cases below rely on.
  fb::PlanT shape;
  {
    std::string metadata = section(good, field::metadata_offset, field::metadata_size);
    fb::GetPlan(metadata.data())->UnPackTo(&shape);
  }
  require(shape.inputs.size() == 1 && shape.outputs.size() == 2 && !shape.kernels.empty(),
          "the good plan is not the one-input, two-output plan the cases expect");
  const auto INVALID = KILN_ERROR_INVALID_PLAN;
  Area area{"plan", {}, [good] { return good_plan_works(good); }};
  auto add = [&](std::string name, kiln_status status, std::vector<std::string> fragments, std::function<std::string()> make) {
    area.cases.push_back({std::move(name), status, std::move(fragments), [make] { return load(make()); }});
  };

  // ---- The header (docs/plan-format.md, "Header"), one field at a time.
  add("plan_magic", INVALID, {"bad magic"}, [good] {
    std::string plan = good;
    plan[3] = 'X';
    return plan;
  });
  add("plan_empty", INVALID, {"bad magic"}, [] { return std::string(); });
  add("plan_version_newer", KILN_ERROR_UNSUPPORTED_VERSION, {"format version 7", "update libkiln"},
      [good] { return with_header(good, field::format_version, 7, true); });
  add("plan_version_zero", INVALID, {"format version 0"}, [good] { return with_header(good, field::format_version, 0, true); });
  add("plan_header_size", INVALID, {"a header of the wrong size"},
      [good] { return with_header(good, field::header_size, 64, true); });
  add("plan_reserved_byte", INVALID, {"reserved bytes are not zero"}, [good] {
    std::string plan = good;
    plan[kiln::plan::kPlanHeaderSize - 1] = 1;
    return plan;
  });
  add("plan_file_size_larger", INVALID, {"truncated", "its header says"},
      [good] { return with_header(good, field::file_size, good.size() + 4096); });
  add("plan_file_size_smaller", INVALID, {"bytes after its end"},
      [good] { return with_header(good, field::file_size, good.size() - 8); });
  add("plan_truncated_header", INVALID, {"shorter than its 128-byte header"}, [good] { return good.substr(0, 100); });
  add("plan_hash", INVALID, {"content hash mismatch"}, [good] {
    std::string plan = good;
    plan[field::content_hash] ^= 0x40;
    return plan;
  });
  add("plan_metadata_offset_outside", INVALID, {"the metadata section lies outside the file"},
      [good] { return with_header(good, field::metadata_offset, good.size() + 8); });
  add("plan_metadata_size_huge", INVALID, {"the metadata section lies outside the file"},
      [good] { return with_header(good, field::metadata_size, UINT64_MAX - 64); });
  add("plan_weights_overlap_metadata", INVALID, {"the weights section", "overlaps another"},
      [good] { return with_header(good, field::weights_offset, kiln::plan::kPlanHeaderSize); });
  add("plan_weights_size_wraps", INVALID, {"the weights section lies outside the file"},
      [good] { return with_header(good, field::weights_size, UINT64_MAX); });
  add("plan_code_offset_misaligned", INVALID, {"a misaligned section"}, [good] {
    std::string plan = good;
    unsigned char* at = bytes_of(plan);
    write_u64(at + field::code_offset, read_u64(at + field::code_offset) + 8);
    write_u64(at + field::code_size, read_u64(at + field::code_size) - 8);
    return reseal(plan);
  });
  add("plan_code_size_outside", INVALID, {"the code section lies outside the file"},
      [good] { return with_header(good, field::code_size, good.size()); });
  add("plan_metadata_garbage", INVALID, {"fails the flatbuffers verifier"}, [good] {
    std::string plan = good;
    uint64_t offset = read_u64(bytes_of(plan) + field::metadata_offset);
    for (size_t i = 0; i < 16; ++i) plan[offset + i] = static_cast<char>(0xA5);
    return reseal(plan);
  });
  add("plan_code_garbage", INVALID, {"the plan's code cannot be loaded"}, [good] {
    std::string plan = good;
    uint64_t offset = read_u64(bytes_of(plan) + field::code_offset), size = read_u64(bytes_of(plan) + field::code_size);
    for (uint64_t i = 0; i < size; ++i) plan[offset + i] = static_cast<char>(i * 7);
    return reseal(plan);
  });

  // ---- The metadata (plan.fbs), one field at a time, the hash resealed.
  auto edit = [&](std::string name, kiln_status status, std::vector<std::string> fragments,
                  std::function<void(fb::PlanT&)> change) {
    add(std::move(name), status, std::move(fragments), [good, change] { return with_metadata(good, change); });
  };
  edit("meta_format_version", INVALID, {"the metadata and the header disagree on the format version"},
       [](fb::PlanT& p) { p.format_version = 2; });
  edit("meta_no_kiln_version", INVALID, {"lacks a required field"}, [](fb::PlanT& p) { p.kiln_version.clear(); });
  edit("meta_target_arch", KILN_ERROR_UNSUPPORTED_TARGET, {"compiled for riscv64-unknown-linux-gnu", "this runtime runs on"},
       [](fb::PlanT& p) { p.target_triple = "riscv64-unknown-linux-gnu"; });
  edit("meta_target_os", KILN_ERROR_UNSUPPORTED_TARGET, {"-windows-msvc", "Linux"}, [](fb::PlanT& p) {
    p.target_triple = p.target_triple.substr(0, p.target_triple.find('-')) + "-pc-windows-msvc";
  });
  edit("meta_input_dtype", INVALID, {"input 'x' has unknown dtype 99"}, [](fb::PlanT& p) { p.inputs[0]->dtype = 99; });
  edit("meta_input_negative_dim", INVALID, {"input 'x' has a negative dimension"},
       [](fb::PlanT& p) { p.inputs[0]->shape[0] = -2; });
  edit("meta_input_byte_size", INVALID, {"input 'x' has a byte size that does not match"},
       [](fb::PlanT& p) { p.inputs[0]->byte_size += 4; });
  // 2^32 x 2^32 x 4 elements: the count wraps to 0 in 64 bits, which a byte size of 0 matched.
  edit("meta_input_count_wraps", INVALID, {"input 'x' has more elements than kiln's limit"}, [](fb::PlanT& p) {
    p.inputs[0]->shape = {int64_t{1} << 32, int64_t{1} << 32, 4};
    p.inputs[0]->byte_size = 0;
  });
  edit("meta_input_rank", INVALID, {"input 'x' has rank 33", "limit of 32"}, [](fb::PlanT& p) {
    p.inputs[0]->shape.assign(33, 1);
    p.inputs[0]->shape[0] = 2;
    p.inputs[0]->shape[1] = 4;
  });
  edit("meta_input_unnamed", INVALID, {"an input without a name"}, [](fb::PlanT& p) { p.inputs[0]->name.clear(); });
  edit("meta_output_names_repeat", INVALID, {"two outputs are named 'y'"}, [](fb::PlanT& p) { p.outputs[1]->name = "y"; });
  edit("meta_output_copies_later", INVALID, {"an output copies a later output"},
       [](fb::PlanT& p) { p.outputs[0]->same_as_output = 1; });
  // The runtime copies the copy's byte size from its source: a larger copy read past the source.
  edit("meta_output_copies_other_size", INVALID, {"output 'z' copies output 'y', which has another dtype or size"},
       [](fb::PlanT& p) { p.outputs[1]->same_as_output = 0; });
  edit("meta_output_copies_negative", INVALID, {"output 'z' copies output -5"},
       [](fb::PlanT& p) { p.outputs[1]->same_as_output = -5; });
  edit("meta_arena_negative", INVALID, {"a negative arena size"}, [](fb::PlanT& p) { p.arena_bytes = -64; });
  edit("meta_kernel_no_symbol", INVALID, {"a kernel without a symbol"}, [](fb::PlanT& p) { p.kernels[0]->symbol.clear(); });
  edit("meta_kernel_unknown_symbol", INVALID, {"the plan's code lacks kernel kiln_no_such_kernel"},
       [](fb::PlanT& p) { p.kernels[0]->symbol = "kiln_no_such_kernel"; });
  edit("meta_kernel_extent", INVALID, {"parallel extent or chunk below 1"},
       [](fb::PlanT& p) { p.kernels[0]->parallel_extent = 0; });
  edit("meta_kernel_chunk", INVALID, {"parallel extent or chunk below 1"},
       [](fb::PlanT& p) { p.kernels[0]->minimum_chunk = -3; });
  edit("meta_kernel_cost_nan", INVALID, {"negative or non-finite cost estimate"},
       [](fb::PlanT& p) { p.kernels[0]->estimated_flops = std::numeric_limits<double>::quiet_NaN(); });
  edit("meta_slot_kind", INVALID, {"has an argument slot out of range"}, [](fb::PlanT& p) {
    fb::Slot& slot = p.kernels[0]->slots[0];
    set_slot(slot, static_cast<fb::SlotKind>(9), slot.index(), slot.offset(), slot.size());
  });
  edit("meta_slot_input_index", INVALID, {"has an argument slot out of range"}, [](fb::PlanT& p) {
    fb::Slot& slot = first_slot_of_kind(p, fb::SlotKind_GraphInput);
    set_slot(slot, slot.kind(), 1, slot.offset(), slot.size());
  });
  edit("meta_slot_input_size", INVALID, {"has an argument slot out of range"}, [](fb::PlanT& p) {
    fb::Slot& slot = first_slot_of_kind(p, fb::SlotKind_GraphInput);
    set_slot(slot, slot.kind(), slot.index(), slot.offset(), 1 << 20);
  });
  edit("meta_slot_weight_past_end", INVALID, {"has an argument slot out of range"}, [](fb::PlanT& p) {
    fb::Slot& slot = first_slot_of_kind(p, fb::SlotKind_Weight);
    set_slot(slot, slot.kind(), slot.index(), 1 << 30, slot.size());
  });
  edit("meta_slot_weight_misaligned", INVALID, {"has an argument slot out of range"}, [](fb::PlanT& p) {
    fb::Slot& slot = first_slot_of_kind(p, fb::SlotKind_Weight);
    set_slot(slot, slot.kind(), slot.index(), slot.offset() + 4, 4);
  });
  // offset + size overflows int64 and wrapped below the arena size: the slot pointed far outside.
  edit("meta_slot_arena_wraps", INVALID, {"has an argument slot out of range"}, [](fb::PlanT& p) {
    fb::Slot& slot = first_slot_of_kind(p, fb::SlotKind_Arena);
    set_slot(slot, slot.kind(), slot.index(), std::numeric_limits<int64_t>::max() - 63, 128);
  });
  edit("meta_slot_arena_past_end", INVALID, {"has an argument slot out of range"}, [](fb::PlanT& p) {
    fb::Slot& slot = first_slot_of_kind(p, fb::SlotKind_Arena);
    set_slot(slot, slot.kind(), slot.index(), p.arena_bytes, 64);
  });

  // ---- Symbolic plans (format version 2: variables and size programs), from the good plan made
  // symbolic by make_symbolic, one field at a time.
  auto symbolic = [&](std::string name, kiln_status status, std::vector<std::string> fragments,
                      std::function<void(fb::PlanT&)> change, uint32_t version = 2) {
    add(std::move(name), status, std::move(fragments), [good, change, version] {
      return with_metadata(good, [&](fb::PlanT& p) {
        make_symbolic(p);
        change(p);
      }, version);
    });
  };
  symbolic("sym_loads", KILN_OK, {}, [](fb::PlanT&) {});
  symbolic("sym_version_1", INVALID, {"a plan of format version 1 carries variables or size programs"},
           [](fb::PlanT& p) { p.format_version = 1; }, 1);
  symbolic("sym_unknown_opcode", INVALID, {"input 'x' dimension 0: size program instruction 0: unknown opcode 99"},
           [](fb::PlanT& p) { p.inputs[0]->dims[0]->code = {99, 0}; });
  symbolic("sym_stack_underflow", INVALID,
           {"input 'x' byte size: size program instruction 1: a binary op with fewer than two values on the stack"},
           [](fb::PlanT& p) { p.inputs[0]->byte_size_program->code = {kVariable, 0, kMul, 0}; });
  symbolic("sym_variable_out_of_range", INVALID, {"input 'x' dimension 0: size program instruction 0: variable 1 of 1"},
           [](fb::PlanT& p) { p.inputs[0]->dims[0]->code = {kVariable, 1}; });
  symbolic("sym_overflow_at_max", INVALID,
           {"input 'x' byte size overflows or divides by zero with every variable at its maximum"},
           [](fb::PlanT& p) { p.inputs[0]->byte_size_program->code = {kVariable, 0, kPush, INT64_MAX, kMul, 0}; });
  symbolic("sym_byte_size_wrong", INVALID, {"input 'x' has a byte size (32, its program 64)"},
           [](fb::PlanT& p) { p.inputs[0]->byte_size_program->code = {kVariable, 0, kPush, 32, kMul, 0}; });
  symbolic("sym_fixed_dim_wrong", INVALID, {"input 'x' dimension 1 is 4 in its shape but 5 in its program"},
           [](fb::PlanT& p) { p.inputs[0]->dims[1]->code = {kPush, 5}; });
  symbolic("sym_constant_symbolic_dim", INVALID, {"input 'x' dimension 0 is symbolic (-1) in its shape but its program is the constant 3"},
           [](fb::PlanT& p) { p.inputs[0]->dims[0]->code = {kPush, 3}; });
  symbolic("sym_dims_count", INVALID, {"input 'x' has 1 dimension programs for rank 2"},
           [](fb::PlanT& p) { p.inputs[0]->dims.pop_back(); });
  symbolic("sym_variable_unbound", INVALID, {"variable 'rows' is no input's dimension"},
           [](fb::PlanT& p) { p.inputs[0]->dims[0]->code = {kVariable, 0, kPush, 1, kMul, 0}; });
  symbolic("sym_variables_unsorted", INVALID, {"the variables are not sorted by name ('rows' before 'batch')"},
           [](fb::PlanT& p) {
             auto batch = std::make_unique<fb::VariableT>();
             batch->name = "batch";
             batch->min = batch->max = 1;
             p.variables.push_back(std::move(batch));
           });
  symbolic("sym_variable_twice", INVALID, {"two variables are named 'rows'"}, [](fb::PlanT& p) {
    p.variables.push_back(std::make_unique<fb::VariableT>(*p.variables[0]));
  });
  symbolic("sym_variable_range", INVALID, {"variable 'rows' has the range 3..2"},
           [](fb::PlanT& p) { p.variables[0]->min = 3; });
  symbolic("sym_variable_huge", INVALID, {"variable 'rows' has the range 1..4294967296"},
           [](fb::PlanT& p) { p.variables[0]->max = int64_t{1} << 32; });
  symbolic("sym_too_many_variables", INVALID, {"the plan has 1025 variables, more than 1024"}, [](fb::PlanT& p) {
    for (int v = 0; v < 1024; ++v) {
      auto extra = std::make_unique<fb::VariableT>();
      extra->name = "v" + std::to_string(1000 + v);
      extra->min = extra->max = 1;
      p.variables.push_back(std::move(extra));
    }
  });
  symbolic("sym_variable_unnamed", INVALID, {"a variable without a name"},
           [](fb::PlanT& p) { p.variables[0]->name.clear(); });
  symbolic("sym_kernel_variable_index", INVALID, {"lists variable 3, out of range or out of name order"},
           [](fb::PlanT& p) { p.kernels[0]->variables = {3}; });
  symbolic("sym_kernel_extent_program", INVALID, {"parallel extent is 4 with every variable at its maximum"},
           [](fb::PlanT& p) {
             p.kernels[0]->parallel_extent_program = program({kVariable, 0, kPush, 2, kMul, 0});
             p.kernels[0]->parallel_extent = 3;
           });
  // An arena slot whose program passes the arena at the maxima (Slot.size, which the section check
  // covers, left as it was): refused because the program and the slot disagree.
  symbolic("sym_arena_slot_past_arena", INVALID, {"with every variable at its maximum, but the slot says"},
           [](fb::PlanT& p) {
             for (auto& kernel : p.kernels) {
               for (const fb::Slot& slot : kernel->slots) kernel->slot_sizes.push_back(program({kPush, slot.size()}));
               for (size_t s = 0; s < kernel->slots.size(); ++s)
                 if (kernel->slots[s].kind() == fb::SlotKind_Arena)
                   kernel->slot_sizes[s] = program({kVariable, 0, kPush, p.arena_bytes, kMul, 0});
             }
           });
  symbolic("sym_slot_sizes_count", INVALID, {"slot size programs for"},
           [](fb::PlanT& p) { p.kernels[0]->slot_sizes.push_back(program({kPush, 0})); });

  // ---- Sizes the run decides and pinned inputs (format version 6), from the good plan given a
  // run binding and a pin by make_run_bound, one field at a time.
  auto run_bound = [&](std::string name, kiln_status status, std::vector<std::string> fragments,
                       std::function<void(fb::PlanT&)> change, uint32_t version = 6) {
    add(std::move(name), status, std::move(fragments), [good, change, version] {
      return with_metadata(good, [&](fb::PlanT& p) {
        make_run_bound(p);
        change(p);
      }, version);
    });
  };
  run_bound("run_loads", KILN_OK, {}, [](fb::PlanT&) {});
  run_bound("run_version_5", INVALID, {"a plan of format version 5 has run bindings (a format version 6 field)"},
            [](fb::PlanT& p) { p.format_version = 5; }, 5);
  run_bound("run_variable_index", INVALID, {"run binding 1 binds variable 7 (the plan has 1)"}, [](fb::PlanT& p) {
    auto second = std::make_unique<fb::RunBindingT>();
    second->variable = 7;
    second->source = std::make_unique<fb::Slot>(fb::SlotKind_Arena, 0, 0, 8);
    second->dtype = KILN_DTYPE_INT64;
    p.run_bindings.push_back(std::move(second));
  });
  run_bound("run_bound_twice", INVALID, {"variable 'count' is bound by the run twice"}, [](fb::PlanT& p) {
    auto second = std::make_unique<fb::RunBindingT>();
    second->variable = 0;
    second->source = std::make_unique<fb::Slot>(fb::SlotKind_Arena, 0, 0, 8);
    second->dtype = KILN_DTYPE_INT64;
    second->after_kernel = 0;
    p.run_bindings.push_back(std::move(second));
  });
  run_bound("run_input_dimension", INVALID, {"input 'x' has a dimension over 'count', which the run decides"},
            [](fb::PlanT& p) {
              p.variables[0]->min = 1;
              p.variables[0]->max = p.inputs[0]->shape[0];
              fb::ValueT& x = *p.inputs[0];
              int64_t inner = x.shape[1];
              x.shape[0] = -1;
              x.dims.push_back(program({kVariable, 0}));
              x.dims.push_back(program({kPush, inner}));
              x.byte_size_program = program({kVariable, 0, kPush, inner * 4, kMul, 0});
              p.pinned_inputs.clear();
            });
  run_bound("run_past_arena", INVALID, {"run binding 0 ('count') reads an element outside the arena"},
            [](fb::PlanT& p) { p.run_bindings[0]->source = std::make_unique<fb::Slot>(fb::SlotKind_Arena, 0, p.arena_bytes, 8); });
  run_bound("run_misaligned", INVALID, {"run binding 0 ('count') reads an element outside the arena"},
            [](fb::PlanT& p) { p.run_bindings[0]->source = std::make_unique<fb::Slot>(fb::SlotKind_Arena, 0, 4, 8); });
  run_bound("run_weight_source", INVALID, {"run binding 0 ('count') reads an element outside the arena"},
            [](fb::PlanT& p) { p.run_bindings[0]->source = std::make_unique<fb::Slot>(fb::SlotKind_Weight, 0, 0, 8); });
  run_bound("run_dtype", INVALID, {"run binding 0 ('count') reads a value of dtype"},
            [](fb::PlanT& p) { p.run_bindings[0]->dtype = KILN_DTYPE_FLOAT32; });
  run_bound("run_element_size", INVALID, {"run binding 0 ('count') reads 4 bytes for one int64"},
            [](fb::PlanT& p) { p.run_bindings[0]->source = std::make_unique<fb::Slot>(fb::SlotKind_Arena, 0, 0, 4); });
  run_bound("run_after_kernel_range", INVALID, {"run binding 0 ('count') is read after kernel 99"},
            [](fb::PlanT& p) { p.run_bindings[0]->after_kernel = 99; });
  run_bound("run_kernel_too_early", INVALID, {"uses 'count', which the run decides only after kernel 0"},
            [](fb::PlanT& p) { p.kernels[0]->variables = {0}; });
  run_bound("pinned_version_5", INVALID, {"a plan of format version 5 has pinned inputs (a format version 6 field)"},
            [](fb::PlanT& p) {
              p.format_version = 5;
              p.run_bindings.clear();
              p.variables.clear();
            }, 5);
  run_bound("pinned_bytes", INVALID, {"the pinned value of input 'x' has 4 bytes; the input has 32"},
            [](fb::PlanT& p) { p.pinned_inputs[0]->bytes.resize(4); });
  run_bound("pinned_input_index", INVALID, {"a pinned value of input 5 (the plan has 1)"},
            [](fb::PlanT& p) { p.pinned_inputs[0]->input = 5; });

  // ---- Resource limits: scratch memory per run (kiln_plan_options.max_memory_bytes).
  std::string big = compile_plan(big_intermediate_model(), work, "big_intermediate");
  auto limited = [big](size_t limit) {
    kiln_plan_options options;
    kiln_plan_options_init(&options);
    options.max_memory_bytes = limit;
    return load(big, &options);
  };
  // The 256 KiB intermediate alone passes a 128 KiB limit (inputs and outputs need about 1 KiB;
  // the exact arena is the memory planner's business, so the message is not held to a number).
  area.cases.push_back({"limit_memory_below_need", KILN_ERROR_OUT_OF_MEMORY,
                        {"bytes of scratch memory per run (arena ", " bytes for intermediate values, staging ",
                         "more than the limit options->max_memory_bytes = 131072"},
                        [limited] { return limited(128 << 10); }});
  area.cases.push_back({"limit_memory_above_need", KILN_OK, {}, [limited] { return limited(size_t{16} << 20); }});
  // An arena no allocator can give (2^62 bytes, slots still in range): an error, not a crash.
  edit("meta_arena_huge", KILN_ERROR_OUT_OF_MEMORY, {"cannot allocate the plan's arena"},
       [](fb::PlanT& p) { p.arena_bytes = int64_t{1} << 62; });
  return area;
}

}  // namespace bad_input
