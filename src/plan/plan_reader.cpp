// Plan verification: nothing in a plan is trusted until the checks below pass, and the code
// section is only handed to the dynamic loader afterwards (plan_runner.cpp).
#include "plan/plan_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string_view>

#include "kiln/version.h"
#include "plan/plan_format.h"
#include "plan/run_bound_metadata.h"
#include "plan/symbolic_metadata.h"
#include "runtime/cpu/cpu_features.h"
#include "support/limits.h"

namespace kiln {
namespace {

[[noreturn]] void invalid(const std::string& message) { invalid_plan(message); }

std::string number(uint64_t value) { return std::to_string(value); }

bool known_dtype(int dtype) { return dtype >= KILN_DTYPE_BOOL && dtype <= KILN_DTYPE_FLOAT64; }

// The flatbuffers verifier checks only the 4-byte length of a vector; elements of 8 bytes (a
// shape's dimensions, the Slot structs) at an address that is 4 mod 8 would be misaligned loads,
// undefined behaviour (found by tests/fuzz plan_metadata). An empty vector has nothing to load,
// and flatbuffers does not align one: a scalar's shape (rank 0) may sit at 4 mod 8.
template <class T>
bool aligned_elements(const flatbuffers::Vector<T>* vector) {
  return vector == nullptr || vector->size() == 0 || reinterpret_cast<uintptr_t>(vector->Data()) % 8 == 0;
}

void check_value(const plan_fb::Value* value, const char* what) {
  if (value == nullptr || value->name() == nullptr) invalid(std::string("an ") + what + " without a name");
  std::string name = value->name()->str();
  if (!aligned_elements(value->shape())) invalid(std::string(what) + " '" + name + "' has a misaligned shape");
  if (!known_dtype(value->dtype())) invalid(std::string(what) + " '" + name + "' has unknown dtype " + std::to_string(value->dtype()));
  if (value->shape() != nullptr && value->shape()->size() > static_cast<uint64_t>(limits::kMaxTensorRank))
    invalid(std::string(what) + " '" + name + "' has rank " + number(value->shape()->size()) + ", more than kiln's limit of " +
            number(limits::kMaxTensorRank));
  // A symbolic value's dims (-1 in its shape) and byte size are check_symbolic_metadata's.
  if (value->dims() != nullptr) return;
  // The element count is checked against the byte limit at each step, so it cannot wrap around
  // (a wrapped count could match a small byte_size and let a huge shape through).
  uint64_t count = 1;
  if (value->shape() != nullptr)
    for (int64_t size : *value->shape()) {
      if (size < 0) invalid(std::string(what) + " '" + name + "' has a negative dimension");
      if (size != 0 && count > limits::kMaxTensorBytes / static_cast<uint64_t>(size)) count = limits::kMaxTensorBytes + 1;
      else count *= static_cast<uint64_t>(size);
    }
  if (count > limits::kMaxTensorBytes)
    invalid(std::string(what) + " '" + name + "' has more elements than kiln's limit of " + number(limits::kMaxTensorBytes) +
            " bytes per tensor allows");
  if (value->byte_size() < 0 ||
      static_cast<uint64_t>(value->byte_size()) != count * kiln_dtype_size(static_cast<kiln_dtype>(value->dtype())))
    invalid(std::string(what) + " '" + name + "' has a byte size that does not match its shape and dtype");
}

// Bound by name, so each name must be unique among the inputs (outputs).
void check_unique_names(const flatbuffers::Vector<flatbuffers::Offset<plan_fb::Value>>& values, const char* what) {
  std::set<std::string_view> names;
  for (const plan_fb::Value* value : values)
    if (!names.insert(value->name()->string_view()).second)
      invalid(std::string("two ") + what + "s are named '" + value->name()->str() + "'");
}

// "sm_NN" or "sm_NNN": the compute capability a CUDA plan's PTX was compiled for.
bool is_cuda_architecture(const std::string& text) {
  if (text.size() < 5 || text.size() > 6 || text.rfind("sm_", 0) != 0) return false;
  for (size_t i = 3; i < text.size(); ++i)
    if (text[i] < '0' || text[i] > '9') return false;
  return text[3] != '0';
}

// Device plans (format version 3): the device is one this libkiln runs, every kernel carries its
// program and entry point and binds no more buffers than it has slots; variables only from format
// version 5; a kernel's work-group size (format version 4) divides its parallel extent (a symbolic
// one at the maxima here, and at each run's values when it runs: DevicePlan::run).
// CPU plans carry none of these fields (an older reader would ignore them and find no code).
void check_device_fields(const plan_fb::Plan& plan, uint32_t version) {
  bool device = plan.device() != nullptr;
  bool kernel_fields = false;
  for (const plan_fb::Kernel* kernel : *plan.kernels())
    kernel_fields = kernel_fields || kernel->device_source() != nullptr || kernel->device_entry() != nullptr ||
                    kernel->device_arguments() != 0;
  if (version < plan::kPlanFormatVersionDevice && (device || kernel_fields || plan.device_requirements() != nullptr))
    invalid("a plan of format version " + number(version) + " carries device fields (format version " +
            number(plan::kPlanFormatVersionDevice) + ")");
  if (!device) {
    if (kernel_fields || plan.device_requirements() != nullptr) invalid("a CPU plan carries device kernels");
    return;
  }
  if (plan.device()->str() != "opencl" && plan.device()->str() != "cuda")
    throw PlanError(KILN_ERROR_UNSUPPORTED_TARGET, "the plan is for device '" + plan.device()->str() +
                                                       "'; this libkiln runs plans for the CPU, OpenCL and CUDA");
  if (plan.variables() != nullptr && plan.variables()->size() > 0 && version < plan::kPlanFormatVersionSymbolicDevice)
    invalid("a device plan with variables in format version " + number(version) + " (a format version " +
            number(plan::kPlanFormatVersionSymbolicDevice) + " feature)");
  for (const plan_fb::Kernel* kernel : *plan.kernels()) {
    std::string symbol = kernel->symbol()->str();
    if (kernel->device_source() == nullptr || kernel->device_entry() == nullptr)
      invalid("device kernel " + symbol + " has no program or entry point");
    if (kernel->device_arguments() < 0 || static_cast<size_t>(kernel->device_arguments()) > kernel->slots()->size())
      invalid("device kernel " + symbol + " takes more buffers than it has slots");
    int64_t local_size = kernel->device_local_size();
    if (local_size != 0 && version < plan::kPlanFormatVersionLocalSizes)
      invalid("device kernel " + symbol + " fixes its work-group size in a plan of format version " + number(version) +
              " (a format version " + number(plan::kPlanFormatVersionLocalSizes) + " field)");
    // 1024: the most threads a CUDA block may have, and more than any group kiln's compiler makes.
    if (local_size < 0 || local_size > 1024 || (local_size > 0 && kernel->parallel_extent() % local_size != 0))
      invalid("device kernel " + symbol + " has a work-group size of " + std::to_string(local_size) +
              ", not one from 1 to 1024 that divides its parallel extent");
  }
  if (plan.device_requirements() != nullptr)
    for (const flatbuffers::String* requirement : *plan.device_requirements())
      if (requirement->str() != "f16" && requirement->str() != "f64" && !is_cuda_architecture(requirement->str()))
        throw PlanError(KILN_ERROR_UNSUPPORTED_TARGET,
                        "the plan needs device feature '" + requirement->str() + "', which this libkiln does not know");
}

// What the verifier cannot know: that every index and offset the runtime will follow is in range.
void check_consistency(const plan_fb::Plan& plan, uint32_t version, uint64_t weights_size) {
  if (plan.kiln_version() == nullptr || plan.target_triple() == nullptr || plan.cpu_name() == nullptr ||
      plan.inputs() == nullptr || plan.outputs() == nullptr || plan.kernels() == nullptr)
    invalid("the metadata lacks a required field");
  // An older reader would ignore the version-2 fields and run a symbolic plan as a fixed one.
  if (version < plan::kPlanFormatVersionSymbolic && has_symbolic_fields(plan))
    invalid("a plan of format version " + number(version) + " carries variables or size programs (format version " +
            number(plan::kPlanFormatVersionSymbolic) + " fields)");
  for (const plan_fb::Value* value : *plan.inputs()) check_value(value, "input");
  for (size_t i = 0; i < plan.outputs()->size(); ++i) {
    const plan_fb::Value* value = plan.outputs()->Get(static_cast<flatbuffers::uoffset_t>(i));
    check_value(value, "output");
    int source = value->same_as_output();
    if (source >= static_cast<int>(i)) invalid("an output copies a later output");
    if (source < -1) invalid("output '" + value->name()->str() + "' copies output " + std::to_string(source));
    // The runtime copies byte_size bytes from the source: it must be as large, and the same value.
    if (source >= 0) {
      const plan_fb::Value* copied = plan.outputs()->Get(static_cast<flatbuffers::uoffset_t>(source));
      if (copied->dtype() != value->dtype() || copied->byte_size() != value->byte_size())
        invalid("output '" + value->name()->str() + "' copies output '" + copied->name()->str() +
                "', which has another dtype or size");
    }
  }
  check_unique_names(*plan.inputs(), "input");
  check_unique_names(*plan.outputs(), "output");
  if (plan.arena_bytes() < 0) invalid("a negative arena size");
  for (const plan_fb::Kernel* kernel : *plan.kernels()) {
    if (kernel->symbol() == nullptr || kernel->slots() == nullptr) invalid("a kernel without a symbol or slots");
    std::string symbol = kernel->symbol()->str();
    if (!aligned_elements(kernel->slots())) invalid("kernel " + symbol + " has misaligned argument slots");
    if (kernel->parallel_extent() < 1 || kernel->minimum_chunk() < 1)
      invalid("kernel " + symbol + " has a parallel extent or chunk below 1");
    // Read by tools only (kiln bench --profile), but a tool must not print garbage either.
    if (!(kernel->estimated_flops() >= 0) || !(kernel->estimated_bytes() >= 0) ||
        !std::isfinite(kernel->estimated_flops()) || !std::isfinite(kernel->estimated_bytes()))
      invalid("kernel " + symbol + " has a negative or non-finite cost estimate");
    for (const plan_fb::Slot* slot : *kernel->slots()) {
      bool ok = slot->size() >= 0 && slot->offset() >= 0;
      switch (slot->kind()) {
        case plan_fb::SlotKind_GraphInput:
          ok = ok && slot->index() >= 0 && static_cast<size_t>(slot->index()) < plan.inputs()->size() &&
               slot->size() <= plan.inputs()->Get(static_cast<flatbuffers::uoffset_t>(slot->index()))->byte_size();
          break;
        case plan_fb::SlotKind_GraphOutput:
          ok = ok && slot->index() >= 0 && static_cast<size_t>(slot->index()) < plan.outputs()->size() &&
               slot->size() <= plan.outputs()->Get(static_cast<flatbuffers::uoffset_t>(slot->index()))->byte_size() &&
               plan.outputs()->Get(static_cast<flatbuffers::uoffset_t>(slot->index()))->same_as_output() < 0;
          break;
        case plan_fb::SlotKind_Weight:
          ok = ok && static_cast<uint64_t>(slot->offset()) % plan::kPlanWeightAlignment == 0 &&
               static_cast<uint64_t>(slot->offset()) + static_cast<uint64_t>(slot->size()) <= weights_size;
          break;
        case plan_fb::SlotKind_Arena:
          // offset <= arena - size: offset + size could overflow int64 and wrap below the arena.
          ok = ok && slot->offset() % 64 == 0 && slot->size() <= plan.arena_bytes() &&
               slot->offset() <= plan.arena_bytes() - slot->size();
          break;
        default: ok = false;
      }
      if (!ok) invalid("kernel " + symbol + " has an argument slot out of range");
    }
  }
  if (version >= plan::kPlanFormatVersionSymbolic) check_symbolic_metadata(plan);
  check_device_fields(plan, version);
  check_run_bindings(plan, version);
  check_pinned_inputs(plan, version);
}

void check_target(const plan_fb::Plan& plan) {
  std::string triple = plan.target_triple()->str();
  std::string arch = triple.substr(0, triple.find('-'));
#if defined(__x86_64__)
  const char* host_arch = "x86_64";
#elif defined(__aarch64__)
  const char* host_arch = "aarch64";
#else
  const char* host_arch = "unknown";
#endif
  if (arch != host_arch || triple.find("linux") == std::string::npos)
    throw PlanError(KILN_ERROR_UNSUPPORTED_TARGET, "the plan was compiled for " + triple + ", this runtime runs on " +
                                                       host_arch + " Linux");
  if (plan.cpu_features() == nullptr) return;
  for (const flatbuffers::String* feature : *plan.cpu_features()) {
    std::optional<bool> present = host_has_cpu_feature(feature->string_view());
    if (present.has_value() && !*present)
      throw PlanError(KILN_ERROR_UNSUPPORTED_TARGET,
                      "the plan needs CPU feature '" + feature->str() + "', which this CPU lacks (the plan was compiled for " +
                          plan.cpu_name()->str() + "; compile it on, or for, a CPU like this one)");
  }
}

}  // namespace

void invalid_plan(const std::string& message) { throw PlanError(KILN_ERROR_INVALID_PLAN, "invalid plan: " + message); }

std::string shape_text(const int64_t* shape, size_t rank) {
  std::string text = "(";
  for (size_t i = 0; i < rank; ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + ")";
}

PlanBytes PlanBytes::map_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw PlanError(KILN_ERROR_IO, "cannot open plan '" + path + "': " + std::strerror(errno));
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    int error = errno;
    ::close(fd);
    throw PlanError(KILN_ERROR_IO, "cannot stat plan '" + path + "': " + std::strerror(error));
  }
  PlanBytes bytes;
  bytes.size_ = static_cast<size_t>(info.st_size);
  if (bytes.size_ == 0) {
    ::close(fd);
    invalid("'" + path + "' is empty");
  }
  void* mapping = ::mmap(nullptr, bytes.size_, PROT_READ, MAP_PRIVATE, fd, 0);
  int error = errno;
  ::close(fd);
  if (mapping == MAP_FAILED) throw PlanError(KILN_ERROR_IO, "cannot map plan '" + path + "': " + std::strerror(error));
  bytes.data_ = static_cast<const unsigned char*>(mapping);
  bytes.mapped_ = true;
  return bytes;
}

PlanBytes PlanBytes::copy_buffer(const void* data, size_t size) {
  PlanBytes bytes;
  size_t rounded = (size + plan::kPlanSectionAlignment - 1) / plan::kPlanSectionAlignment * plan::kPlanSectionAlignment;
  void* copy = std::aligned_alloc(plan::kPlanSectionAlignment, rounded == 0 ? plan::kPlanSectionAlignment : rounded);
  if (copy == nullptr) throw PlanError(KILN_ERROR_OUT_OF_MEMORY, "cannot allocate " + number(size) + " bytes for the plan");
  if (size > 0) std::memcpy(copy, data, size);
  bytes.data_ = static_cast<const unsigned char*>(copy);
  bytes.size_ = size;
  return bytes;
}

PlanBytes::PlanBytes(PlanBytes&& other) noexcept : data_(other.data_), size_(other.size_), mapped_(other.mapped_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

PlanBytes::~PlanBytes() {
  if (data_ == nullptr) return;
  if (mapped_) ::munmap(const_cast<unsigned char*>(data_), size_);
  else std::free(const_cast<unsigned char*>(data_));
}

VerifiedPlan verify_plan(const unsigned char* data, size_t size) {
  namespace field = plan::header_field;
  size_t magic_bytes = size < sizeof plan::kPlanMagic ? size : sizeof plan::kPlanMagic;
  if (magic_bytes == 0 || std::memcmp(data, plan::kPlanMagic, magic_bytes) != 0)
    invalid("not a kiln plan (bad magic: the file does not start with \"KILNPLAN\")");
  if (size < plan::kPlanHeaderSize)
    invalid("the plan is truncated: " + number(size) + " bytes, shorter than its " + number(plan::kPlanHeaderSize) +
            "-byte header");
  uint32_t version = plan::read_u32(data + field::format_version);
  if (version > plan::kPlanFormatVersion)
    throw PlanError(KILN_ERROR_UNSUPPORTED_VERSION,
                    "the plan has format version " + number(version) + ", newer than this libkiln (" KILN_VERSION_STRING
                    ") reads (up to " + number(plan::kPlanFormatVersion) +
                    "): update libkiln, or compile the plan with a matching kiln");
  if (version == 0) invalid("format version 0");
  if (plan::read_u32(data + field::header_size) != plan::kPlanHeaderSize) invalid("a header of the wrong size");
  for (size_t at = field::code_size + 8; at < plan::kPlanHeaderSize; ++at)
    if (data[at] != 0) invalid("the header's reserved bytes are not zero");
  uint64_t file_size = plan::read_u64(data + field::file_size);
  if (file_size > size)
    invalid("the plan is truncated: " + number(size) + " bytes, its header says " + number(file_size));
  if (file_size < size)
    invalid("the plan has " + number(size - file_size) + " bytes after its end (" + number(file_size) + " bytes)");
  struct Section {
    const char* name;
    uint64_t offset, size;
  };
  Section sections[3] = {
      {"metadata", plan::read_u64(data + field::metadata_offset), plan::read_u64(data + field::metadata_size)},
      {"weights", plan::read_u64(data + field::weights_offset), plan::read_u64(data + field::weights_size)},
      {"code", plan::read_u64(data + field::code_offset), plan::read_u64(data + field::code_size)},
  };
  uint64_t previous_end = plan::kPlanHeaderSize;
  for (const Section& section : sections) {
    if (section.offset < previous_end || section.offset > size || section.size > size - section.offset)
      invalid(std::string("the ") + section.name + " section lies outside the file or overlaps another");
    previous_end = section.offset + section.size;
  }
  if (sections[1].offset % plan::kPlanSectionAlignment != 0 || sections[2].offset % plan::kPlanSectionAlignment != 0 ||
      sections[0].offset % 8 != 0)
    invalid("a misaligned section");
  uint64_t stored_hash = plan::read_u64(data + field::content_hash);
  uint64_t hash = plan::plan_content_hash(data + plan::kPlanHeaderSize, size - plan::kPlanHeaderSize);
  if (hash != stored_hash)
    invalid("content hash mismatch (the file is corrupt or was modified after kiln compile wrote it)");

  flatbuffers::Verifier verifier(data + sections[0].offset, sections[0].size);
  if (!plan_fb::VerifyPlanBuffer(verifier)) invalid("the metadata fails the flatbuffers verifier");
  const plan_fb::Plan* metadata = plan_fb::GetPlan(data + sections[0].offset);
  if (metadata->format_version() != version) invalid("the metadata and the header disagree on the format version");
  check_consistency(*metadata, version, sections[1].size);
  if (metadata->device() != nullptr && sections[2].size != 0) invalid("a device plan with a CPU code section");
  check_target(*metadata);

  VerifiedPlan plan;
  plan.metadata = metadata;
  plan.weights = data + sections[1].offset;
  plan.weights_size = sections[1].size;
  plan.code = data + sections[2].offset;
  plan.code_size = sections[2].size;
  return plan;
}

}  // namespace kiln
