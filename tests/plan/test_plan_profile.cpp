// The per-kernel profile metadata (docs/profiling.md): each scheduled kernel names the model nodes
// it computes (their provenance tags) and carries the compiler's work estimates, and write_plan
// stores both in the plan's Kernel table, where the reader checks them and older plans (without
// them) still verify. `--model DIR` adds the mnist_8 case (the ONNX importer end to end); the test
// exits 77 (skipped) when DIR/model.onnx is absent.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "onnx_model.h"
#include "plan/plan_format.h"
#include "plan/plan_reader.h"
#include "plan/plan_writer.h"
#include "schedule/schedule.h"
#include "support/kernel_profile.h"
#include "tensor/tensor_internal.h"

using namespace kiln;

namespace {

std::string model_dir;  // --model DIR

const plan_fb::Plan& metadata_of(const std::string& plan) {
  return *verify_plan(reinterpret_cast<const unsigned char*>(plan.data()), plan.size()).metadata;
}

std::vector<std::string> sources_of(const plan_fb::Kernel& kernel) {
  std::vector<std::string> sources;
  if (kernel.sources() != nullptr)
    for (const flatbuffers::String* source : *kernel.sources()) sources.push_back(source->str());
  return sources;
}

std::vector<float> ramp(size_t count) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<float>(i) * 0.5f - 3.0f;
  return values;
}

// A plan file around `metadata`, with empty weights and code: enough for verify_plan, which checks
// everything but never loads the code.
std::string plan_file(const flatbuffers::FlatBufferBuilder& builder) {
  namespace field = plan::header_field;
  uint64_t metadata_size = builder.GetSize();
  uint64_t end = (plan::kPlanHeaderSize + metadata_size + plan::kPlanSectionAlignment - 1) /
                 plan::kPlanSectionAlignment * plan::kPlanSectionAlignment;
  std::string file(end, '\0');
  auto* bytes = reinterpret_cast<unsigned char*>(file.data());
  std::memcpy(bytes, plan::kPlanMagic, sizeof plan::kPlanMagic);
  std::memcpy(bytes + plan::kPlanHeaderSize, builder.GetBufferPointer(), metadata_size);
  plan::write_u32(bytes + field::format_version, plan::kPlanFormatVersion);
  plan::write_u32(bytes + field::header_size, static_cast<uint32_t>(plan::kPlanHeaderSize));
  plan::write_u64(bytes + field::file_size, end);
  plan::write_u64(bytes + field::metadata_offset, plan::kPlanHeaderSize);
  plan::write_u64(bytes + field::metadata_size, metadata_size);
  plan::write_u64(bytes + field::weights_offset, end);
  plan::write_u64(bytes + field::code_offset, end);
  plan::write_u64(bytes + field::content_hash,
                  plan::plan_content_hash(bytes + plan::kPlanHeaderSize, end - plan::kPlanHeaderSize));
  return file;
}

// The metadata of a plan with one output and one kernel; `estimates` adds the appended fields.
std::string one_kernel_plan(bool estimates, double flops, double bytes) {
  flatbuffers::FlatBufferBuilder builder;
  std::vector<int64_t> shape{4};
  std::vector<flatbuffers::Offset<plan_fb::Value>> outputs{
      plan_fb::CreateValueDirect(builder, "y", KILN_DTYPE_FLOAT32, &shape, 16)};
  std::vector<flatbuffers::Offset<plan_fb::Value>> inputs;
  std::vector<plan_fb::Slot> slots{plan_fb::Slot(plan_fb::SlotKind_GraphOutput, 0, 0, 16)};
  std::vector<flatbuffers::Offset<flatbuffers::String>> sources{builder.CreateString("node 'n' (Relu, opset 13)")};
  flatbuffers::Offset<plan_fb::Kernel> kernel =
      estimates ? plan_fb::CreateKernelDirect(builder, "E_4", &slots, 4, 1, flops, bytes, &sources)
                : plan_fb::CreateKernelDirect(builder, "E_4", &slots, 4, 1);  // what a first-version writer wrote
  std::vector<flatbuffers::Offset<plan_fb::Kernel>> kernels{kernel};
  std::vector<flatbuffers::Offset<flatbuffers::String>> features;
  std::vector<flatbuffers::Offset<plan_fb::Weight>> weights;
#if defined(__x86_64__)
  const char* triple = "x86_64-pc-linux-gnu";
#else
  const char* triple = "aarch64-unknown-linux-gnu";
#endif
  builder.Finish(plan_fb::CreatePlanDirect(builder, plan::kPlanFormatVersion, "test", triple, "generic", &features,
                                           &inputs, &outputs, &weights, 0, &kernels),
                 plan_fb::PlanIdentifier());
  return plan_file(builder);
}

}  // namespace

TEST_CASE("a kernel names the tagged nodes it computes, reductions first, and the plan keeps them") {
  Tensor w = Tensor::from_vector<float>(ramp(8), {8});
  Tensor x = graph_input("x", {4, 8}, ScalarType::Float32);
  Tensor scaled, activated, sums;
  {
    ProvenanceScope scope("node 'scale' (Mul, opset 13)");
    scaled = x * w;
  }
  {
    ProvenanceScope scope("node 'act' (Relu, opset 13)");
    activated = scaled.relu();
  }
  {
    ProvenanceScope scope("unnamed node producing 'total' (ReduceSum, opset 13)");
    sums = activated.sum({1});
  }
  Schedule schedule = create_schedule({sums.data().node});
  REQUIRE(schedule.kernels.size() == 1);
  const ScheduledKernel& kernel = schedule.kernels[0];
  // The reduction first (the kernel's bulk), then the elementwise work before it, producers first.
  std::vector<std::string> expected{"unnamed node producing 'total' (ReduceSum, opset 13)",
                                    "node 'scale' (Mul, opset 13)", "node 'act' (Relu, opset 13)"};
  CHECK(kernel.sources == expected);
  CHECK(kernel.estimated_flops > 0);
  CHECK(kernel.estimated_bytes > 0);

  std::string plan = write_plan({{"x", x}}, {{"sums", sums}});
  const plan_fb::Plan& metadata = metadata_of(plan);
  REQUIRE(metadata.kernels()->size() == 1);
  const plan_fb::Kernel& stored = *metadata.kernels()->Get(0);
  CHECK(sources_of(stored) == expected);
  CHECK(stored.estimated_flops() == kernel.estimated_flops);
  CHECK(stored.estimated_bytes() == kernel.estimated_bytes);

  // libkiln (an older reader would too: the fields are appended) loads and runs it.
  kiln_plan* loaded = nullptr;
  REQUIRE_MESSAGE(kiln_plan_load_buffer(plan.data(), plan.size(), &loaded) == KILN_OK, kiln_error_message());
  kiln_plan_free(loaded);
}

TEST_CASE("a kernel that only moves data names its root; untagged graphs name nothing") {
  Tensor x = graph_input("x", {3, 5}, ScalarType::Float32);
  Tensor moved;
  {
    ProvenanceScope scope("node 'flip' (Transpose, opset 13)");
    moved = x.transpose(0, 1);
  }
  Schedule schedule = create_schedule({moved.data().node});
  REQUIRE(schedule.kernels.size() == 1);
  CHECK(schedule.kernels[0].sources == std::vector<std::string>{"node 'flip' (Transpose, opset 13)"});

  Tensor plain = (x * 3.0f).exp();
  Schedule untagged = create_schedule({plain.data().node});
  REQUIRE(untagged.kernels.size() == 1);
  CHECK(untagged.kernels[0].sources.empty());
  std::string plan = write_plan({{"x", x}}, {{"y", plain}});
  const plan_fb::Kernel& stored = *metadata_of(plan).kernels()->Get(0);
  CHECK(sources_of(stored).empty());
  CHECK(stored.estimated_flops() > 0);
}

TEST_CASE("the reader: plans without the estimates verify, bad estimates do not") {
  std::string old_plan = one_kernel_plan(false, 0, 0);
  const plan_fb::Kernel& old_kernel = *metadata_of(old_plan).kernels()->Get(0);
  CHECK(old_kernel.estimated_flops() == 0);
  CHECK(old_kernel.estimated_bytes() == 0);
  CHECK(old_kernel.sources() == nullptr);

  std::string new_plan = one_kernel_plan(true, 4, 32);
  const plan_fb::Kernel& new_kernel = *metadata_of(new_plan).kernels()->Get(0);
  CHECK(new_kernel.estimated_flops() == 4);
  CHECK(sources_of(new_kernel) == std::vector<std::string>{"node 'n' (Relu, opset 13)"});
  // These plans have metadata only: libkiln refuses to load kernels from an empty code section.
  kiln_plan* loaded = nullptr;
  CHECK(kiln_plan_load_buffer(new_plan.data(), new_plan.size(), &loaded) == KILN_ERROR_INVALID_PLAN);
  CHECK(std::string(kiln_error_message()).find("the plan lists 1 kernels but has no code") != std::string::npos);
  CHECK(loaded == nullptr);

  const std::vector<std::pair<double, double>> bad{{-1.0, 32.0}, {4.0, -1.0}, {NAN, 32.0}, {4.0, INFINITY}};
  for (auto [flops, bytes] : bad) {
    std::string plan = one_kernel_plan(true, flops, bytes);
    CHECK_THROWS_WITH_AS(metadata_of(plan), doctest::Contains("kernel E_4 has a negative or non-finite cost estimate"),
                         PlanError);
  }
}

TEST_CASE("mnist_8 through the ONNX importer: every kernel has estimates and names its ONNX nodes") {
  if (model_dir.empty()) {
    MESSAGE("no --model: nothing to check");
    return;
  }
  auto model = onnx_import::OnnxModel::load_file(model_dir + "/model.onnx");
  std::vector<std::pair<std::string, Tensor>> inputs;
  for (const auto& [name, shape] : model.bind_input_shapes({})) {
    inputs.emplace_back(name, graph_input(name, shape, ScalarType::Float32));
  }
  std::string plan = write_plan(inputs, model.build(inputs));
  const plan_fb::Plan& metadata = metadata_of(plan);
  std::vector<std::string> labels;
  for (const plan_fb::Kernel* kernel : *metadata.kernels()) {
    INFO("kernel ", kernel->symbol()->str());
    CHECK(kernel->estimated_flops() > 0);
    CHECK(kernel->estimated_bytes() > 0);
    std::vector<std::string> sources = sources_of(*kernel);
    CHECK(!sources.empty());
    for (const std::string& source : sources) labels.push_back(short_source_label(source));
  }
  // Every node of the model that computes (its one Reshape only moves data into the Gemm).
  for (const char* node : {"Convolution28", "ReLU32", "Pooling66", "Convolution110", "ReLU114", "Pooling160",
                           "Gemm→Plus214_Output_0"}) {
    INFO("node ", node);
    CHECK(std::find(labels.begin(), labels.end(), node) != labels.end());
  }
}

int main(int argc, char** argv) {
  std::vector<char*> arguments{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--model") == 0 && i + 1 < argc) model_dir = argv[++i];
    else arguments.push_back(argv[i]);
  }
  if (!model_dir.empty() && !std::filesystem::exists(model_dir + "/model.onnx")) {
    std::printf("skipped: %s/model.onnx is absent\n", model_dir.c_str());
    return 77;
  }
  doctest::Context context;
  context.applyCommandLine(static_cast<int>(arguments.size()), arguments.data());
  return context.run();
}
