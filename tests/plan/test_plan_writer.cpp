// The plan writer on small Tensor graphs, checked through libkiln's C API in the same process: a
// plan's outputs equal realize() of the same graph bit for bit (same kernels), graph inputs are
// placeholders that cannot be read at compile time, and repeated outputs are copies.
#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <string_view>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/kiln.h"
#include "plan/plan_format.h"
#include "plan/plan_generated.h"
#include "plan/plan_writer.h"
#include "ir/build.h"
#include "ir/substitute.h"
#include "passes/symbolic.h"
#include "schedule/schedule.h"
#include "support/error.h"
#include "tensor/tensor_internal.h"

using namespace kiln;

namespace {

std::vector<float> iota(size_t count, float scale) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = (static_cast<float>(i) - 7.0f) * scale;
  return values;
}

// (x * w + 1).relu() and its row sums: one weight, one elementwise kernel, one reduction.
std::pair<Tensor, Tensor> small_graph(const Tensor& x, const Tensor& w) {
  Tensor y = (x * w + 1.0f).relu();
  return {y, y.sum({1})};
}

}  // namespace

TEST_CASE("a CPU plan folds an f16 matmul weight into f32 panels; a device plan keeps it f16") {
  // (K, N) = (256, 256): large enough for panels of 32 columns (tensor_matmul.cpp, in_panels). The CPU
  // casts before the copy, so the fold keeps the panel order; row-major, each step of K would read
  // a row 1 KB from the last.
  std::vector<uint16_t> halves(256 * 256);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(0x3000 + i % 0x400);
  Tensor w = Tensor::from_data(halves.data(), {256, 256}, ScalarType::Float16);
  auto weight_of = [&](const std::string& device) {
    Tensor x = graph_input("x", {4, 256}, ScalarType::Float16);
    PlanWriteOptions options;
    options.device = device;
    PlanSchedule planned = schedule_plan({{"y", x.matmul(w)}}, options);
    const Schedule& schedule = planned.schedule;
    for (const ScheduledKernel& kernel : schedule.kernels)
      for (const UOp* node : toposort(kernel.ast)) {
        if (node->op() != Ops::LOAD) continue;
        const UOp* index = node->src(0).get();
        const ScheduledBuffer& buffer = schedule.buffers[static_cast<size_t>(kernel.buffers[static_cast<size_t>(index->src(0)->arg_int())])];
        if (buffer.kind != ScheduledBuffer::Kind::Input || buffer.count != 256 * 256) continue;
        // The distance between the elements read at reduction steps 1 and 0 (other ranges at 0).
        std::unordered_map<const UOp*, UOpPtr> at0, at1;
        for (const UOp* r : kernel_ranges(kernel.ast)) {
          at0.emplace(r, const_int(dtypes::index, 0));
          at1.emplace(r, const_int(dtypes::index, r->arg_int() >= 1000 && r->arg_int() < 2000 ? 1 : 0));
        }
        int64_t step = static_cast<int64_t>(simplify(substitute(index->src(1), at1))->const_int()) -
                       static_cast<int64_t>(simplify(substitute(index->src(1), at0))->const_int());
        return std::pair<DType, int64_t>(buffer.dtype, step);
      }
    FAIL("no kernel reads the weight");
    return std::pair<DType, int64_t>(dtypes::void_, 0);
  };
  auto [cpu_type, cpu_step] = weight_of("");
  CHECK(cpu_type == dtypes::f32);
  CHECK(cpu_step == 32);  // one panel row further
  CHECK(weight_of("opencl").first == dtypes::f16);  // device plans keep the weight narrow
}

TEST_CASE("reading a graph input at compile time is a UserError naming it") {
  Tensor x = graph_input("image", {2, 3}, ScalarType::Float32);
  Tensor y = x * 2.0f;
  CHECK_THROWS_WITH_AS(y.realize(), doctest::Contains("the value of graph input 'image' is needed at compile time"),
                       UserError);
  CHECK_THROWS_WITH_AS(y.to_vector<float>(), doctest::Contains("graph input 'image'"), UserError);
}

TEST_CASE("write_plan rejects inputs that are not placeholders") {
  Tensor x = Tensor::from_vector<float>({1, 2}, {2});
  CHECK_THROWS_WITH_AS(write_plan({{"x", x}}, {{"y", x * 2.0f}}), doctest::Contains("plan input 'x' is not a graph input"),
                       UserError);
}

TEST_CASE("a plan computes what realize computes, and repeated outputs are copies") {
  Tensor w = Tensor::from_vector<float>(iota(8, 0.25f), {8});
  Tensor x = graph_input("x", {4, 8}, ScalarType::Float32);
  auto [y, row_sums] = small_graph(x, w);
  std::string bytes = write_plan({{"x", x}}, {{"y", y}, {"sums", row_sums}, {"y_again", y}});

  kiln_plan* plan = nullptr;
  REQUIRE_MESSAGE(kiln_plan_load_buffer(bytes.data(), bytes.size(), &plan) == KILN_OK, kiln_error_message());
  CHECK(kiln_plan_input_count(plan) == 1);
  CHECK(kiln_plan_output_count(plan) == 3);
  const char* name = nullptr;
  kiln_dtype dtype{};
  size_t rank = 0;
  const int64_t* shape = nullptr;
  REQUIRE(kiln_plan_output_info(plan, 1, &name, &dtype, &rank, &shape) == KILN_OK);
  CHECK(std::string(name) == "sums");
  CHECK(dtype == KILN_DTYPE_FLOAT32);
  REQUIRE(rank == 1);
  CHECK(shape[0] == 4);

  std::vector<float> input = iota(32, 0.5f);
  alignas(64) float y_out[32], sums_out[4], again_out[32];
  int64_t x_shape[] = {4, 8}, sums_shape[] = {4};
  kiln_tensor inputs[] = {{"x", KILN_DTYPE_FLOAT32, 2, x_shape, input.data(), sizeof(float) * 32}};
  kiln_tensor outputs[] = {{"y", KILN_DTYPE_FLOAT32, 2, x_shape, y_out, sizeof y_out},
                           {"sums", KILN_DTYPE_FLOAT32, 1, sums_shape, sums_out, sizeof sums_out},
                           {"y_again", KILN_DTYPE_FLOAT32, 2, x_shape, again_out, sizeof again_out}};
  REQUIRE_MESSAGE(kiln_plan_run(plan, inputs, 1, outputs, 3) == KILN_OK, kiln_error_message());

  auto [y_ref, sums_ref] = small_graph(Tensor::from_vector<float>(input, {4, 8}), w);
  std::vector<float> y_expected = y_ref.to_vector<float>(), sums_expected = sums_ref.to_vector<float>();
  CHECK(std::memcmp(y_out, y_expected.data(), sizeof y_out) == 0);
  CHECK(std::memcmp(sums_out, sums_expected.data(), sizeof sums_out) == 0);
  CHECK(std::memcmp(again_out, y_out, sizeof y_out) == 0);
  kiln_plan_free(plan);
}

TEST_CASE("writing the same graph twice gives the same bytes") {
  auto make = [] {
    Tensor w = Tensor::from_vector<float>(iota(8, 0.25f), {8});
    Tensor x = graph_input("x", {4, 8}, ScalarType::Float32);
    auto [y, sums] = small_graph(x, w);
    return write_plan({{"x", x}}, {{"y", y}, {"sums", sums}});
  };
  std::string first = make(), second = make();
  CHECK(first == second);
}

namespace {

// A plan of the small graph, edited by `edit` (given the metadata section) and re-hashed, so that
// only the checks after the hash can catch the change.
// `header_version` (non-zero) replaces the header's format version, as an older writer's would read.
// `bytes` (a plan) edited by `edit` (given the metadata section) and re-hashed, then loaded: only
// the checks after the hash can catch the change. `header_version` (non-zero) replaces the header's
// format version, as an older writer's would read.
kiln_status load_edited_plan(std::string bytes, const std::function<void(char* metadata, size_t size)>& edit,
                             uint32_t header_version = 0) {
  auto* data = reinterpret_cast<unsigned char*>(bytes.data());
  if (header_version != 0) plan::write_u32(data + plan::header_field::format_version, header_version);
  uint64_t offset = plan::read_u64(data + plan::header_field::metadata_offset);
  uint64_t size = plan::read_u64(data + plan::header_field::metadata_size);
  edit(bytes.data() + offset, size);
  plan::write_u64(data + plan::header_field::content_hash,
                  plan::plan_content_hash(data + plan::kPlanHeaderSize, bytes.size() - plan::kPlanHeaderSize));
  kiln_plan* plan = nullptr;
  kiln_status status = kiln_plan_load_buffer(bytes.data(), bytes.size(), &plan);
  kiln_plan_free(plan);
  return status;
}

// The small graph's plan, edited as load_edited_plan does.
kiln_status load_edited(const std::function<void(char* metadata, size_t size)>& edit, const PlanWriteOptions& options = {},
                        uint32_t header_version = 0) {
  Tensor w = Tensor::from_vector<float>(iota(8, 0.25f), {8});
  Tensor x = graph_input("x", {4, 8}, ScalarType::Float32);
  auto [y, sums] = small_graph(x, w);
  return load_edited_plan(write_plan({{"x", x}}, {{"y", y}}, options), edit, header_version);
}

}  // namespace

TEST_CASE("metadata that fails the flatbuffers verifier is refused before any code is loaded") {
  kiln_status status = load_edited([](char* metadata, size_t) {
    plan::write_u32(reinterpret_cast<unsigned char*>(metadata), 0x7ffffff0u);  // root table offset out of range
  });
  CHECK(status == KILN_ERROR_INVALID_PLAN);
  CHECK(std::string(kiln_error_message()) == "invalid plan: the metadata fails the flatbuffers verifier");
}

TEST_CASE("a plan for another target is refused") {
  kiln_status status = load_edited([](char* metadata, size_t size) {
    std::string_view view(metadata, size);
    size_t at = view.find("x86_64");
    REQUIRE(at != std::string_view::npos);
    std::memcpy(metadata + at, "armv7l", 6);
  });
  CHECK(status == KILN_ERROR_UNSUPPORTED_TARGET);
  CHECK(std::string(kiln_error_message()).find("the plan was compiled for armv7l") != std::string::npos);
}

TEST_CASE("an OpenCL plan is format version 3 with no code; a CPU plan of the same graph keeps version 1") {
  // Writing a device plan needs no device: its kernels are OpenCL C, built when the plan is loaded.
  auto make = [](const std::string& device) {
    Tensor w = Tensor::from_vector<float>(iota(8, 0.25f), {8});
    Tensor x = graph_input("x", {4, 8}, ScalarType::Float32);
    auto [y, sums] = small_graph(x, w);
    PlanWriteOptions options;
    options.device = device;
    return write_plan({{"x", x}}, {{"y", y}, {"sums", sums}}, options);
  };
  std::string opencl = make("opencl"), cpu = make("");
  auto header = [](const std::string& bytes, size_t field) {
    return plan::read_u64(reinterpret_cast<const unsigned char*>(bytes.data()) + field);
  };
  CHECK(plan::read_u32(reinterpret_cast<const unsigned char*>(opencl.data()) + plan::header_field::format_version) ==
        plan::kPlanFormatVersionDevice);
  CHECK(plan::read_u32(reinterpret_cast<const unsigned char*>(cpu.data()) + plan::header_field::format_version) ==
        plan::kPlanFormatVersionFixedShapes);
  CHECK(header(opencl, plan::header_field::code_size) == 0);
  CHECK(header(cpu, plan::header_field::code_size) > 0);
  CHECK(opencl.find("__kernel void") != std::string::npos);
  CHECK(opencl == make("opencl"));  // byte-identical, as CPU plans are
  PlanWriteOptions vulkan;
  vulkan.device = "vulkan";
  Tensor x = graph_input("x", {2}, ScalarType::Float32);
  CHECK_THROWS_WITH_AS(write_plan({{"x", x}}, {{"y", x * 2.0f}}, vulkan),
                       "unsupported: plans for device 'vulkan' (plans are for the CPU, OpenCL or CUDA)", UserError);
}

TEST_CASE("device plans: an unknown device, device fields in an older version, a CPU plan with device fields") {
  PlanWriteOptions opencl;
  opencl.device = "opencl";
  auto rename_device = [](char* metadata, size_t size) {
    std::string_view view(metadata, size);
    size_t at = view.find(std::string_view("opencl\0", 7));
    REQUIRE(at != std::string_view::npos);
    std::memcpy(metadata + at, "vulkan", 6);
  };
  CHECK(load_edited(rename_device, opencl) == KILN_ERROR_UNSUPPORTED_TARGET);
  CHECK(std::string(kiln_error_message()) ==
        "the plan is for device 'vulkan'; this libkiln runs plans for the CPU, OpenCL and CUDA");
  // The same plan under a version-2 header: the metadata says 3, the header 2.
  CHECK(load_edited([](char*, size_t) {}, opencl, plan::kPlanFormatVersionSymbolic) == KILN_ERROR_INVALID_PLAN);
}

namespace {

// The metadata's kernel table `k` of a plan file (for edits in place).
plan_fb::Kernel* kernel_table(char* metadata, size_t k) {
  auto* plan = const_cast<plan_fb::Plan*>(plan_fb::GetPlan(metadata));
  return const_cast<plan_fb::Kernel*>(plan->kernels()->Get(static_cast<flatbuffers::uoffset_t>(k)));
}

// A scalar field of a flatbuffers table (a generated table type, whose flatbuffers::Table base is
// private but is the same bytes), overwritten where the writer stored it.
template <typename T>
void overwrite_field(const void* table, flatbuffers::voffset_t field, T value) {
  const uint8_t* at = static_cast<const flatbuffers::Table*>(table)->GetAddressOf(field);
  REQUIRE(at != nullptr);
  std::memcpy(const_cast<uint8_t*>(at), &value, sizeof value);
}

}  // namespace

TEST_CASE("a device kernel that shares a reduction across a work-group fixes that size; the plan is format version 4") {
  // Two rows of 5,000 steps: on OpenCL a group of 64 work-items per row (opt/gpu_grid.h).
  auto make = [] {
    Tensor x = graph_input("x", {2, 5000}, ScalarType::Float32);
    PlanWriteOptions options;
    options.device = "opencl";
    return write_plan({{"x", x}}, {{"sums", x.sum({1})}}, options);
  };
  std::string bytes = make();
  auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  CHECK(plan::read_u32(data + plan::header_field::format_version) == plan::kPlanFormatVersionLocalSizes);
  const plan_fb::Plan* plan = plan_fb::GetPlan(data + plan::read_u64(data + plan::header_field::metadata_offset));
  REQUIRE(plan->kernels()->size() == 1);
  const plan_fb::Kernel* kernel = plan->kernels()->Get(0);
  CHECK(kernel->device_local_size() == 64);
  CHECK(kernel->parallel_extent() == 2 * 64);
  CHECK(kernel->device_source()->str().find("__local float local0[64];") != std::string::npos);
  CHECK(bytes == make());
  // A device plan whose kernels let the device choose stays version 3 (the small graph's kernels).
  PlanWriteOptions opencl;
  opencl.device = "opencl";
  Tensor w = Tensor::from_vector<float>(iota(8, 0.25f), {8});
  Tensor x = graph_input("x", {4, 8}, ScalarType::Float32);
  std::string small = write_plan({{"x", x}}, {{"y", small_graph(x, w).first}}, opencl);
  CHECK(plan::read_u32(reinterpret_cast<const unsigned char*>(small.data()) + plan::header_field::format_version) ==
        plan::kPlanFormatVersionDevice);

  // The reader: a size that does not divide the extent, one beyond any device's, and the field in
  // a plan that calls itself version 3 (an older libkiln would launch it with its own size).
  auto with_local_size = [](int64_t size) {
    return [size](char* metadata, size_t) {
      overwrite_field(kernel_table(metadata, 0), plan_fb::Kernel::VT_DEVICE_LOCAL_SIZE, size);
    };
  };
  std::string symbol = kernel->symbol()->str();
  CHECK(load_edited_plan(bytes, with_local_size(48)) == KILN_ERROR_INVALID_PLAN);
  CHECK(std::string(kiln_error_message()) == "invalid plan: device kernel " + symbol +
                                                 " has a work-group size of 48, not one from 1 to 1024 that divides its "
                                                 "parallel extent");
  CHECK(load_edited_plan(bytes, with_local_size(2048)) == KILN_ERROR_INVALID_PLAN);
  CHECK(load_edited_plan(bytes, with_local_size(-64)) == KILN_ERROR_INVALID_PLAN);
  auto as_version_3 = [](char* metadata, size_t) {
    overwrite_field(plan_fb::GetPlan(metadata), plan_fb::Plan::VT_FORMAT_VERSION, plan::kPlanFormatVersionDevice);
  };
  CHECK(load_edited_plan(bytes, as_version_3, plan::kPlanFormatVersionDevice) == KILN_ERROR_INVALID_PLAN);
  CHECK(std::string(kiln_error_message()) == "invalid plan: device kernel " + symbol +
                                                 " fixes its work-group size in a plan of format version 3 (a format "
                                                 "version 4 field)");
}


TEST_CASE("a symbolic device plan is format version 5; the reader refuses its variables below that version") {
  Dim n = size_variable("n", 1, 32);
  Tensor x = symbolic_graph_input("x", {n, 8}, ScalarType::Float32);
  PlanWriteOptions options;
  options.device = "opencl";
  std::string bytes = write_plan({{"x", x}}, {{"y", (x * 2.0f).relu()}}, options);
  auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  CHECK(plan::read_u32(data + plan::header_field::format_version) == plan::kPlanFormatVersionSymbolicDevice);
  const plan_fb::Plan* plan = plan_fb::GetPlan(data + plan::read_u64(data + plan::header_field::metadata_offset));
  REQUIRE(plan->variables() != nullptr);
  CHECK(plan->variables()->size() == 1);
  REQUIRE(plan->kernels()->size() == 1);
  const plan_fb::Kernel* kernel = plan->kernels()->Get(0);
  REQUIRE(kernel->variables() != nullptr);
  CHECK(kernel->variables()->size() == 1);
  CHECK(kernel->parallel_extent_program() != nullptr);
  CHECK(kernel->parallel_extent() == 32 * 8);  // at the maximum
  CHECK(kernel->device_source()->str().find(", long var0)") != std::string::npos);
  auto as_version_4 = [](char* metadata, size_t) {
    overwrite_field(plan_fb::GetPlan(metadata), plan_fb::Plan::VT_FORMAT_VERSION, plan::kPlanFormatVersionLocalSizes);
  };
  CHECK(load_edited_plan(bytes, as_version_4, plan::kPlanFormatVersionLocalSizes) == KILN_ERROR_INVALID_PLAN);
  CHECK(std::string(kiln_error_message()) ==
        "invalid plan: a device plan with variables in format version 4 (a format version 5 feature)");
}
