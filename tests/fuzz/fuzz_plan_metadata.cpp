// Fuzz target: plan metadata (the flatbuffers blob of docs/plan-format.md) → a plan re-sealed with a
// valid content hash → kiln_plan_load_buffer. The bytes are the metadata only. The header, the
// weights and the code section come from one trusted plan (KILN_FUZZ_BASE_PLAN, made by
// make_seeds.py), so every input reaches the flatbuffers verifier, the consistency checks, the
// target checks, and for the plans that pass them the dynamic loader, the symbol lookups and the
// output-shape computation (a symbolic plan's size programs; no kernel runs).
//
// Why only the metadata: a plan is code, trusted like a shared library once its hash matches. If the
// fuzzer could change the code section (or move the code offset over bytes it controls), a re-sealed
// plan would make the loader map and run arbitrary machine code, and every crash would be by design.
// For the same reason these plans are loaded but never run: the kernels index the buffers the way
// they were compiled to, so metadata that, say, raises a parallel extent makes trusted code read out
// of bounds, which no check on the metadata alone can prevent. fuzz_plan.cpp runs the plans whose
// bytes are all original.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "plan/plan_format.h"
#include "plan_generated.h"

namespace {

namespace field = kiln::plan::header_field;

struct TrustedSections {
  std::string weights, code;
};

const TrustedSections& trusted() {
  static const TrustedSections sections = [] {
    std::ifstream stream(KILN_FUZZ_BASE_PLAN, std::ios::binary);
    std::string plan((std::istreambuf_iterator<char>(stream)), std::istreambuf_iterator<char>());
    const auto* bytes = reinterpret_cast<const unsigned char*>(plan.data());
    if (plan.size() < kiln::plan::kPlanHeaderSize) {
      std::fprintf(stderr, "fuzz_plan_metadata: cannot read the base plan %s\n", KILN_FUZZ_BASE_PLAN);
      std::abort();
    }
    auto section = [&](size_t offset_field, size_t size_field) {
      return plan.substr(kiln::plan::read_u64(bytes + offset_field), kiln::plan::read_u64(bytes + size_field));
    };
    return TrustedSections{section(field::weights_offset, field::weights_size), section(field::code_offset, field::code_size)};
  }();
  return sections;
}

uint64_t align_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

// The header's format version: the metadata's own where it has one (so that version-2 metadata,
// with variables and size programs, reaches the checks of its fields), else version 1.
uint32_t format_version_of(const uint8_t* metadata, size_t size) {
  flatbuffers::Verifier verifier(metadata, size);
  if (!kiln::plan_fb::VerifyPlanBuffer(verifier)) return kiln::plan::kPlanFormatVersionFixedShapes;
  return kiln::plan_fb::GetPlan(metadata)->format_version();
}

// The plan file the writer would make around this metadata, with the trusted weights and code.
std::string seal(const uint8_t* metadata, size_t size) {
  const TrustedSections& sections = trusted();
  uint64_t weights_offset = align_up(kiln::plan::kPlanHeaderSize + size, kiln::plan::kPlanSectionAlignment);
  uint64_t code_offset = align_up(weights_offset + sections.weights.size(), kiln::plan::kPlanSectionAlignment);
  std::string plan(code_offset + sections.code.size(), '\0');
  auto* bytes = reinterpret_cast<unsigned char*>(plan.data());
  std::memcpy(bytes + field::magic, kiln::plan::kPlanMagic, sizeof kiln::plan::kPlanMagic);
  kiln::plan::write_u32(bytes + field::format_version, format_version_of(metadata, size));
  kiln::plan::write_u32(bytes + field::header_size, kiln::plan::kPlanHeaderSize);
  kiln::plan::write_u64(bytes + field::file_size, plan.size());
  kiln::plan::write_u64(bytes + field::metadata_offset, kiln::plan::kPlanHeaderSize);
  kiln::plan::write_u64(bytes + field::metadata_size, size);
  kiln::plan::write_u64(bytes + field::weights_offset, weights_offset);
  kiln::plan::write_u64(bytes + field::weights_size, sections.weights.size());
  kiln::plan::write_u64(bytes + field::code_offset, code_offset);
  kiln::plan::write_u64(bytes + field::code_size, sections.code.size());
  if (size > 0) std::memcpy(bytes + kiln::plan::kPlanHeaderSize, metadata, size);
  std::memcpy(bytes + weights_offset, sections.weights.data(), sections.weights.size());
  std::memcpy(bytes + code_offset, sections.code.data(), sections.code.size());
  kiln::plan::write_u64(bytes + field::content_hash,
                        kiln::plan::plan_content_hash(bytes + kiln::plan::kPlanHeaderSize, plan.size() - kiln::plan::kPlanHeaderSize));
  return plan;
}

// A trusted plan may ask for any amount of memory at load (its arena and the staging space for its
// inputs and outputs); the fuzzer's memory limit cannot tell that from a leak, so such plans are not
// loaded. Metadata the verifier refuses is passed on: the refusal is what is being tested.
bool within_memory_budget(const uint8_t* metadata, size_t size) {
  constexpr uint64_t kBudget = uint64_t{64} << 20;
  flatbuffers::Verifier verifier(metadata, size);
  if (!kiln::plan_fb::VerifyPlanBuffer(verifier)) return true;
  const kiln::plan_fb::Plan* plan = kiln::plan_fb::GetPlan(metadata);
  uint64_t total = plan->arena_bytes() > 0 ? static_cast<uint64_t>(plan->arena_bytes()) : 0;
  for (const auto* values : {plan->inputs(), plan->outputs()}) {
    if (values == nullptr) continue;
    for (const kiln::plan_fb::Value* value : *values)
      if (value != nullptr && value->byte_size() > 0) total += std::min<uint64_t>(value->byte_size(), kBudget);
  }
  return total <= kBudget;
}

// For a plan that loads: every output's shape for inputs of the plan's shapes, each variable at its
// minimum. This runs a symbolic plan's binding and size programs (kiln_plan_output_shape) on
// hostile metadata, but no kernel: the shapes are computed, never used.
void query_output_shapes(const kiln_plan* plan) {
  size_t count = kiln_plan_input_count(plan);
  std::vector<std::vector<int64_t>> shapes(count);
  std::vector<kiln_tensor> inputs(count);
  for (size_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    kiln_dtype dtype{};
    size_t rank = 0;
    const int64_t* shape = nullptr;
    const int64_t* variables = nullptr;
    if (kiln_plan_input_info_v2(plan, i, &name, &dtype, &rank, &shape, nullptr, &variables) != KILN_OK) return;
    for (size_t d = 0; d < rank; ++d) {
      int64_t size = shape[d] >= 0 ? shape[d] : 1;
      if (variables[d] >= 0) kiln_plan_variable_info(plan, static_cast<size_t>(variables[d]), nullptr, &size, nullptr);
      shapes[i].push_back(size);
    }
    inputs[i] = {name, dtype, rank, shapes[i].data(), nullptr, 0};
  }
  for (size_t o = 0; o < kiln_plan_output_count(plan); ++o) {
    size_t rank = 0;
    if (kiln_plan_output_info(plan, o, nullptr, nullptr, &rank, nullptr) != KILN_OK) return;
    std::vector<int64_t> shape(rank + 1);
    kiln_plan_output_shape(plan, inputs.data(), count, o, shape.data(), rank, nullptr);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!within_memory_budget(data, size)) return 0;
  std::string plan = seal(data, size);
  kiln_plan* loaded = nullptr;
  if (kiln_plan_load_buffer(plan.data(), plan.size(), &loaded) == KILN_OK) {
    query_output_shapes(loaded);
    kiln_plan_free(loaded);
  }
  return 0;
}
