// write_plan: schedule → buffer classes → kernel objects → LLD → flatbuffers metadata → one file.
// Everything that reaches the file is ordered by the schedule (never by pointers or hash maps), so
// two compiles of one model give the same bytes.
#include "plan/plan_writer.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "codegen/llvm/llvm_target.h"
#include "driver/compile_kernels.h"
#include "kiln/kiln.h"
#include "passes/pipeline.h"
#include "plan/link_shared_object.h"
#include "plan/plan_dtype.h"
#include "plan/plan_format.h"
#include "plan/plan_generated.h"
#include "schedule/schedule.h"
#include "support/error.h"
#include "tensor/tensor_internal.h"

namespace kiln {
namespace {

using detail::TensorData;

int kiln_dtype_of(DType dtype) {
  std::optional<kiln_dtype> type = plan::plan_dtype_of(dtype.scalar());
  if (!type) throw UserError(str_cat("a plan cannot hold values of type ", dtype.name()));
  return *type;
}

uint64_t align_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

// The data of every BUFFER the graphs of `roots` read, by buffer id (found through the handles'
// inputs); placeholders (graph inputs) have none and are left out.
std::unordered_map<int64_t, const HostBuffer*> data_buffers(const std::vector<const TensorData*>& roots) {
  std::unordered_map<int64_t, const HostBuffer*> buffers;
  std::unordered_set<const TensorData*> seen;
  std::vector<const TensorData*> stack(roots.begin(), roots.end());
  while (!stack.empty()) {
    const TensorData* data = stack.back();
    stack.pop_back();
    if (!seen.insert(data).second) continue;
    if (data->buffer) buffers.emplace(data->buffer_id, data->buffer.get());
    for (const auto& input : data->inputs) stack.push_back(input.get());
  }
  return buffers;
}

// "+avx2,+fma,-sse4a,..." → the enabled features, sorted.
std::vector<std::string> enabled_features(const std::string& features) {
  std::vector<std::string> enabled;
  std::stringstream stream(features);
  std::string feature;
  while (std::getline(stream, feature, ','))
    if (feature.size() > 1 && feature[0] == '+') enabled.push_back(feature.substr(1));
  std::sort(enabled.begin(), enabled.end());
  return enabled;
}

}  // namespace

PlanSchedule schedule_plan(const std::vector<std::pair<std::string, Tensor>>& outputs, const PlanWriteOptions& options) {
  auto progress = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  PlanSchedule planned;
  for (const auto& [name, tensor] : outputs) {
    if (!tensor.defined()) throw UserError(str_cat("plan output '", name, "' is an empty Tensor"));
    planned.values.push_back(tensor);
  }
  if (options.fold_constants) {
    progress("folding constants");
    ConstantFoldReport folded;
    planned.values = fold_constants(planned.values, {}, &folded);
    progress(str_cat("folded ", folded.values, " weight-only values (", folded.bytes, " bytes)"));
  }
  std::vector<UOpPtr> nodes;
  for (const Tensor& tensor : planned.values) nodes.push_back(tensor.data().node);
  progress("scheduling");
  planned.schedule = create_schedule(nodes);
  return planned;
}

std::string write_plan(const std::vector<std::pair<std::string, Tensor>>& inputs,
                       const std::vector<std::pair<std::string, Tensor>>& outputs, const PlanWriteOptions& options) {
  auto progress = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  std::map<int64_t, int> input_of_buffer;  // placeholder buffer id → input position
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& tensor = inputs[i].second;
    if (!tensor.defined() || tensor.data().graph_input_name.empty())
      throw UserError(str_cat("plan input '", inputs[i].first, "' is not a graph input placeholder"));
    input_of_buffer[tensor.data().buffer_id] = static_cast<int>(i);
  }
  PlanSchedule planned = schedule_plan(outputs, options);
  Schedule& schedule = planned.schedule;
  std::vector<const TensorData*> roots;
  for (const Tensor& tensor : planned.values) roots.push_back(&tensor.data());
  OptimizeOptions optimize_options;
  optimize_options.tuning = options.tuning;
  if (options.tuning != nullptr) optimize_options.target_id = cpu_target_id();
  OptimizeReport optimized = optimize_schedule(schedule, host_cpu_caps(), optimize_options);
  if (options.tuning != nullptr)
    progress(str_cat("opts of ", optimized.from_tuning, " of ", optimized.kernels,
                     " kernels from the tuning database ", options.tuning->source(), ", the others' from the heuristics"));
  auto buffer_data = data_buffers(roots);

  // Classify the schedule's buffers. An output buffer belongs to the first output that names it;
  // later outputs of the same node are copies of it (same_as_output).
  std::vector<int> output_of_buffer(schedule.buffers.size(), -1);
  std::vector<int> same_as_output(outputs.size(), -1);
  for (size_t i = 0; i < schedule.outputs.size(); ++i) {
    int& owner = output_of_buffer[static_cast<size_t>(schedule.outputs[i])];
    if (owner < 0) owner = static_cast<int>(i);
    else same_as_output[i] = owner;
  }
  std::string weights;
  std::map<int64_t, uint64_t> weight_offset_of_buffer;  // data buffer id → offset in `weights`
  std::vector<std::pair<uint64_t, uint64_t>> weight_ranges;
  std::vector<plan_fb::Slot> buffer_slots(schedule.buffers.size());
  for (size_t b = 0; b < schedule.buffers.size(); ++b) {
    const ScheduledBuffer& buffer = schedule.buffers[b];
    auto bytes = static_cast<int64_t>(buffer.bytes());
    switch (buffer.kind) {
      case ScheduledBuffer::Kind::Input: {
        if (auto found = input_of_buffer.find(buffer.input_id); found != input_of_buffer.end()) {
          buffer_slots[b] = plan_fb::Slot(plan_fb::SlotKind_GraphInput, found->second, 0, bytes);
          break;
        }
        auto data = buffer_data.find(buffer.input_id);
        if (data == buffer_data.end()) {
          // A placeholder that is not among `inputs`: the graph reads an input the caller left out.
          throw UserError(str_cat("the outputs read a graph input that is not an input of the plan (buffer ",
                                  buffer.input_id, ")"));
        }
        auto [at, added] = weight_offset_of_buffer.emplace(buffer.input_id, 0);
        if (added) {
          at->second = align_up(weights.size(), plan::kPlanWeightAlignment);
          weights.resize(at->second, '\0');
          weights.append(static_cast<const char*>(data->second->data()), data->second->bytes());
          weight_ranges.emplace_back(at->second, data->second->bytes());
        }
        buffer_slots[b] = plan_fb::Slot(plan_fb::SlotKind_Weight, 0, static_cast<int64_t>(at->second), bytes);
        break;
      }
      case ScheduledBuffer::Kind::Output:
        KILN_ASSERT(output_of_buffer[b] >= 0, "an output buffer that no output names");
        buffer_slots[b] = plan_fb::Slot(plan_fb::SlotKind_GraphOutput, output_of_buffer[b], 0, bytes);
        break;
      case ScheduledBuffer::Kind::Intermediate:
        buffer_slots[b] = plan_fb::Slot(plan_fb::SlotKind_Arena, 0, buffer.arena_offset, bytes);
        break;
    }
  }

  // Kernel objects, one per distinct symbol (a symbol names its AST, so equal symbols are equal code).
  KernelBuildOptions build_options;
  build_options.product = KernelProduct::Object;
  build_options.progress = options.progress;
  std::vector<std::string> objects;
  int from_cache_count = 0;
  for (KernelBuild& kernel : compile_schedule_kernels(schedule, build_options)) {
    if (kernel.repeat) continue;
    objects.push_back(std::move(kernel.object));
    if (kernel.from_cache) ++from_cache_count;
  }
  // A graph that folds away completely (every output a weight or an input's known shape) has no
  // kernels: its code section is empty, and the runtime loads no library for it.
  std::string code;
  if (!objects.empty()) {
    progress(str_cat("linking ", objects.size(), " kernel objects"));
    code = link_shared_object(objects);
  }

  // Metadata.
  flatbuffers::FlatBufferBuilder builder;
  auto make_value = [&](const std::string& name, const Tensor& tensor, int same_as) {
    std::vector<int64_t> shape(tensor.shape().begin(), tensor.shape().end());
    DType dtype = tensor.data().dtype;
    int64_t byte_size = tensor.numel() * dtype.scalar_bytes();
    return plan_fb::CreateValueDirect(builder, name.c_str(), kiln_dtype_of(dtype), &shape, byte_size, same_as);
  };
  std::vector<flatbuffers::Offset<plan_fb::Value>> input_values, output_values;
  for (const auto& [name, tensor] : inputs) input_values.push_back(make_value(name, tensor, -1));
  for (size_t i = 0; i < outputs.size(); ++i)
    output_values.push_back(make_value(outputs[i].first, outputs[i].second, same_as_output[i]));
  std::vector<flatbuffers::Offset<plan_fb::Weight>> weight_values;
  for (const auto& [offset, size] : weight_ranges)
    weight_values.push_back(plan_fb::CreateWeight(builder, static_cast<int64_t>(offset), static_cast<int64_t>(size)));
  std::vector<flatbuffers::Offset<plan_fb::Kernel>> kernel_values;
  for (const ScheduledKernel& kernel : schedule.kernels) {
    std::vector<plan_fb::Slot> slots;
    for (int buffer : kernel.buffers) slots.push_back(buffer_slots[static_cast<size_t>(buffer)]);
    std::vector<flatbuffers::Offset<flatbuffers::String>> sources;
    for (const std::string& source : kernel.sources) sources.push_back(builder.CreateString(source));
    kernel_values.push_back(plan_fb::CreateKernelDirect(builder, kernel.name().c_str(), &slots,
                                                        kernel.parallel_extent.value("a plan kernel"), kernel_minimum_chunk(kernel),
                                                        kernel.estimated_flops, kernel.estimated_bytes, &sources));
  }
  const CpuTarget& target = CpuTarget::host();
  std::vector<std::string> features = enabled_features(target.features());
  std::vector<flatbuffers::Offset<flatbuffers::String>> feature_strings;
  for (const std::string& feature : features) feature_strings.push_back(builder.CreateString(feature));
  auto root = plan_fb::CreatePlanDirect(builder, plan::kPlanFormatVersion, KILN_VERSION_STRING,
                                        target.triple().c_str(), target.cpu().c_str(), &feature_strings,
                                        &input_values, &output_values, &weight_values, schedule.arena_bytes,
                                        &kernel_values);
  builder.Finish(root, plan_fb::PlanIdentifier());
  std::string metadata(reinterpret_cast<const char*>(builder.GetBufferPointer()), builder.GetSize());

  // File: header | metadata | (page) weights | (page) code.
  uint64_t metadata_offset = plan::kPlanHeaderSize;
  uint64_t weights_offset = align_up(metadata_offset + metadata.size(), plan::kPlanSectionAlignment);
  uint64_t code_offset = align_up(weights_offset + weights.size(), plan::kPlanSectionAlignment);
  uint64_t file_size = code_offset + code.size();
  std::string file(file_size, '\0');
  auto* bytes = reinterpret_cast<unsigned char*>(file.data());
  std::copy(metadata.begin(), metadata.end(), file.begin() + static_cast<std::ptrdiff_t>(metadata_offset));
  std::copy(weights.begin(), weights.end(), file.begin() + static_cast<std::ptrdiff_t>(weights_offset));
  std::copy(code.begin(), code.end(), file.begin() + static_cast<std::ptrdiff_t>(code_offset));
  namespace field = plan::header_field;
  std::copy(std::begin(plan::kPlanMagic), std::end(plan::kPlanMagic), file.begin());
  plan::write_u32(bytes + field::format_version, plan::kPlanFormatVersion);
  plan::write_u32(bytes + field::header_size, static_cast<uint32_t>(plan::kPlanHeaderSize));
  plan::write_u64(bytes + field::file_size, file_size);
  plan::write_u64(bytes + field::metadata_offset, metadata_offset);
  plan::write_u64(bytes + field::metadata_size, metadata.size());
  plan::write_u64(bytes + field::weights_offset, weights_offset);
  plan::write_u64(bytes + field::weights_size, weights.size());
  plan::write_u64(bytes + field::code_offset, code_offset);
  plan::write_u64(bytes + field::code_size, code.size());
  plan::write_u64(bytes + field::content_hash,
                  plan::plan_content_hash(bytes + plan::kPlanHeaderSize, file_size - plan::kPlanHeaderSize));
  progress(str_cat("plan: ", schedule.kernels.size(), " kernel launches (", objects.size(), " distinct, ",
                   from_cache_count, " from the disk cache), ", weights.size(), " bytes of weights, arena ",
                   schedule.arena_bytes, " bytes, ", file_size, " bytes in all"));
  return file;
}

}  // namespace kiln
