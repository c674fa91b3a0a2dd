// classify_digits.cpp: the C++ counterpart of classify_digits.c.
//
// It does the same job as the C sample: load a plan made by `kiln compile` from the digits
// classifier that samples/models/make_digits_model.py trains (input "pixels": float32 [B, 64],
// raw 8x8 images with values 0..16; output "logits": float32 [B, 10]), classify the held-out test
// images that the same script saves, and print a few predictions, the accuracy and the latency per
// image. The difference is how it holds the C handles: kiln.h is a C API, and in C++ each handle is
// best owned by a small RAII wrapper, so that every exit path (an early return, an exception)
// releases it exactly once.
//
// Like the C sample it links only libkiln (check: `ldd build/samples/classify_digits_cpp` shows no
// LLVM, no protobuf) and includes only include/kiln/kiln.h. libkiln's C ABI is the stable boundary:
// this file may be built with another compiler or standard library than libkiln was.
//
//     python3 samples/models/make_digits_model.py build/demo
//     build/tools/kiln compile build/demo/digits.onnx -o build/demo/digits.kiln --shape N=1
//     build/samples/classify_digits_cpp build/demo/digits.kiln
//         build/demo/digits_test_pixels.npy build/demo/digits_test_labels.npy   (one command line)
//
// The batch size B is whatever the plan was compiled for; any B works (chunks of B images).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace {

// ---- Errors --------------------------------------------------------------------------------------
// Every fallible kiln call returns a kiln_status. check() turns a failure into a C++ exception that
// carries the C message. kiln_error_message() is per thread and describes the last call that failed
// on this thread, so reading it right after the failing call is race-free even when other threads
// use kiln at the same time.
struct KilnError : std::runtime_error {
  KilnError(const std::string& what, kiln_status status)
      : std::runtime_error(what + ": " + kiln_error_message() + " (" + kiln_status_string(status) + ")"),
        status(status) {}
  kiln_status status;
};

void check(kiln_status status, const std::string& what) {
  if (status != KILN_OK) throw KilnError(what, status);
}

// ---- RAII over the plan handle --------------------------------------------------------------------
// A kiln_plan* is owned by whoever loaded it and released with kiln_plan_free. A unique_ptr with a
// custom deleter expresses exactly that: move-only, freed once, never copied. (kiln_plan_free(NULL)
// is a no-op, but unique_ptr does not even call the deleter for a null pointer.)
struct PlanDeleter {
  void operator()(kiln_plan* plan) const noexcept { kiln_plan_free(plan); }
};

// A view of one plan input or output. The name and the shape point into the plan: they stay valid
// as long as the Plan that returned them lives (until kiln_plan_free).
struct TensorInfo {
  const char* name;
  kiln_dtype dtype;
  std::span<const int64_t> shape;
};

class Plan {
 public:
  // Loads and verifies the file (magic, version, content hash, metadata, CPU features) before any
  // of its code is loaded; each failure has its own status and message, thrown as KilnError.
  explicit Plan(const std::string& path) {
    kiln_plan* raw = nullptr;
    check(kiln_plan_load_file(path.c_str(), &raw), path);
    plan_.reset(raw);
  }

  std::size_t input_count() const noexcept { return kiln_plan_input_count(plan_.get()); }
  std::size_t output_count() const noexcept { return kiln_plan_output_count(plan_.get()); }

  TensorInfo input(std::size_t index) const {
    TensorInfo info{};
    std::size_t rank = 0;
    const int64_t* shape = nullptr;
    check(kiln_plan_input_info(plan_.get(), index, &info.name, &info.dtype, &rank, &shape), "kiln_plan_input_info");
    info.shape = {shape, rank};
    return info;
  }

  TensorInfo output(std::size_t index) const {
    TensorInfo info{};
    std::size_t rank = 0;
    const int64_t* shape = nullptr;
    check(kiln_plan_output_info(plan_.get(), index, &info.name, &info.dtype, &rank, &shape),
          "kiln_plan_output_info");
    info.shape = {shape, rank};
    return info;
  }

  // One run on caller-owned buffers. A plan is immutable once loaded: run() may be called from many
  // threads at once on the same Plan (each with its own buffers), hence const.
  void run(std::span<const kiln_tensor> inputs, std::span<const kiln_tensor> outputs) const {
    check(kiln_plan_run(plan_.get(), inputs.data(), inputs.size(), outputs.data(), outputs.size()), "kiln_plan_run");
  }

 private:
  std::unique_ptr<kiln_plan, PlanDeleter> plan_;
};

// ---- Aligned buffers --------------------------------------------------------------------------
// kiln_plan_run reads and writes the caller's buffers in place when they are 64-byte aligned (any
// other alignment works too, at the price of a copy per run). std::aligned_alloc wants a size that
// is a multiple of the alignment, hence the rounding; the unique_ptr frees it with std::free.
struct FreeDeleter {
  void operator()(void* pointer) const noexcept { std::free(pointer); }
};

template <typename T>
class AlignedBuffer {
 public:
  explicit AlignedBuffer(std::size_t count) : count_(count) {
    std::size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
    data_.reset(static_cast<T*>(std::aligned_alloc(64, bytes == 0 ? 64 : bytes)));
    if (!data_) throw std::bad_alloc();
    std::fill_n(data_.get(), count, T{});
  }
  T* data() noexcept { return data_.get(); }
  std::size_t size() const noexcept { return count_; }
  std::size_t bytes() const noexcept { return count_ * sizeof(T); }
  T& operator[](std::size_t i) noexcept { return data_.get()[i]; }

 private:
  std::unique_ptr<T, FreeDeleter> data_;
  std::size_t count_;
};

// ---- A minimal .npy reader -----------------------------------------------------------------------
// The same format as in classify_digits.c: "\x93NUMPY", version bytes, a little-endian header
// length (2 bytes in version 1, 4 in versions 2 and 3), a dict literal such as
//     {'descr': '<f4', 'fortran_order': False, 'shape': (300, 64), }
// and then the raw elements in C order. Only what the sample needs: one expected dtype, C order.
template <typename T>
std::vector<T> read_npy(const std::string& path, const std::string& descr, std::size_t& rows) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error("cannot open " + path);
  char prefix[10];
  if (!file.read(prefix, 10) || std::memcmp(prefix, "\x93NUMPY", 6) != 0)
    throw std::runtime_error(path + " is not an .npy file");
  auto byte = [&](int i) { return static_cast<std::size_t>(static_cast<unsigned char>(prefix[i])); };
  std::size_t header_length = byte(8) | byte(9) << 8;
  if (prefix[6] != 1) {  // versions 2 and 3: a 4-byte length
    char more[2];
    if (!file.read(more, 2)) throw std::runtime_error(path + " is truncated");
    header_length |= static_cast<std::size_t>(static_cast<unsigned char>(more[0])) << 16 |
                     static_cast<std::size_t>(static_cast<unsigned char>(more[1])) << 24;
  }
  std::string header(header_length, '\0');
  if (!file.read(header.data(), static_cast<std::streamsize>(header_length)))
    throw std::runtime_error(path + " is truncated");
  // The dtype must be the expected one and the array in C order; otherwise the bytes would mean
  // something else.
  if (header.find("'descr': '" + descr + "'") == std::string::npos ||
      header.find("'fortran_order': False") == std::string::npos)
    throw std::runtime_error(path + ": expected a C-order array of dtype " + descr + ", header is " + header);
  // The shape tuple: the product of its dimensions is the element count; keep the first.
  auto at = header.find("'shape': (");
  if (at == std::string::npos) throw std::runtime_error(path + ": no shape in the header");
  const char* cursor = header.c_str() + at + std::strlen("'shape': (");
  std::size_t count = 1;
  rows = 0;
  bool first = true;
  while (*cursor && *cursor != ')') {
    char* end = nullptr;
    unsigned long long dimension = std::strtoull(cursor, &end, 10);
    if (end == cursor) break;
    count *= static_cast<std::size_t>(dimension);
    if (first) rows = static_cast<std::size_t>(dimension);
    first = false;
    cursor = end;
    while (*cursor == ',' || *cursor == ' ') ++cursor;
  }
  std::vector<T> data(count);
  if (!file.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(count * sizeof(T))))
    throw std::runtime_error(path + " is truncated");
  return data;
}

int classify(const std::string& plan_path, const std::string& pixels_path, const std::string& labels_path) {
  // A header/library mismatch is worth knowing about before anything else goes wrong.
  std::cout << "kiln " << kiln_version() << " (header " << KILN_VERSION_STRING << ")\n";

  // 1. Load the plan. From here on, `plan` frees itself however this function is left.
  const Plan plan(plan_path);

  // 2. Ask the plan what it expects rather than assuming: one float32 input [B, 64], one float32
  //    output [B, 10].
  if (plan.input_count() != 1 || plan.output_count() != 1)
    throw std::runtime_error(plan_path + " is not the digits classifier (one input, one output)");
  const TensorInfo in = plan.input(0), out = plan.output(0);
  if (in.dtype != KILN_DTYPE_FLOAT32 || in.shape.size() != 2 || in.shape[1] != 64 ||
      out.dtype != KILN_DTYPE_FLOAT32 || out.shape.size() != 2 || out.shape[1] != 10 || out.shape[0] != in.shape[0])
    throw std::runtime_error(plan_path + " is not the digits classifier (float32 [B, 64] -> float32 [B, 10])");
  const auto batch = static_cast<std::size_t>(in.shape[0]);
  std::cout << "plan " << plan_path << ": input '" << in.name << "' float32 [" << batch << ", 64], output '"
            << out.name << "' float32 [" << batch << ", 10]\n";

  // 3. Read the test set: pixels float32 [count, 64] and labels int64 [count].
  std::size_t image_count = 0, label_rows = 0;
  const auto pixels = read_npy<float>(pixels_path, "<f4", image_count);
  const auto labels = read_npy<int64_t>(labels_path, "<i8", label_rows);
  if (pixels.size() != image_count * 64 || labels.size() != image_count)
    throw std::runtime_error("the pixel and label files do not match");

  // 4. The buffers are ours, allocated once and reused for every run: a run itself allocates
  //    nothing. A kiln_tensor describes one of them: name (nullptr would bind by position), dtype,
  //    rank, shape, data and size; dtype and shape must equal the plan's, so they are taken from it.
  AlignedBuffer<float> input(batch * 64), logits(batch * 10);
  const kiln_tensor input_tensor{in.name, KILN_DTYPE_FLOAT32, in.shape.size(), in.shape.data(), input.data(),
                                 input.bytes()};
  const kiln_tensor output_tensor{out.name, KILN_DTYPE_FLOAT32, out.shape.size(), out.shape.data(), logits.data(),
                                  logits.bytes()};

  // 5. Classify in chunks of `batch` images; a last partial chunk is padded with blank images whose
  //    results are ignored. The prediction is the class with the largest logit.
  std::size_t correct = 0;
  std::chrono::duration<double, std::milli> run_time{0};
  for (std::size_t start = 0; start < image_count; start += batch) {
    const std::size_t in_chunk = std::min(batch, image_count - start);
    std::fill_n(input.data(), input.size(), 0.0f);
    std::copy_n(pixels.begin() + static_cast<std::ptrdiff_t>(start * 64), in_chunk * 64, input.data());
    const auto before = std::chrono::steady_clock::now();
    plan.run({&input_tensor, 1}, {&output_tensor, 1});
    run_time += std::chrono::steady_clock::now() - before;
    for (std::size_t i = 0; i < in_chunk; ++i) {
      const float* row = logits.data() + i * 10;
      const auto best = static_cast<int64_t>(std::max_element(row, row + 10) - row);
      const std::size_t image = start + i;
      correct += best == labels[image];
      if (image < 8)
        std::printf("image %3zu: predicted %d, true %d%s\n", image, static_cast<int>(best),
                    static_cast<int>(labels[image]), best == labels[image] ? "" : "   <- wrong");
    }
  }
  std::printf("accuracy: %.1f%% (%zu of %zu test images)\n",
              100.0 * static_cast<double>(correct) / static_cast<double>(image_count), correct, image_count);
  std::printf("latency: %.4f ms per image (%zu runs of batch %zu, %.3f ms in all)\n",
              run_time.count() / static_cast<double>(image_count), (image_count + batch - 1) / batch, batch,
              run_time.count());
  // 6. Nothing to release by hand: the buffers and then the plan free themselves here, in reverse
  //    order of construction (the plan last, after the buffers it was given; no run is in flight).
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: " << argv[0] << " PLAN TEST_PIXELS.npy TEST_LABELS.npy\n";
    return 2;
  }
  // libkiln's C functions never throw (its shims catch every exception); the exceptions here are
  // this program's own, raised by check() and the reader, and all end here with a message.
  try {
    return classify(argv[1], argv[2], argv[3]);
  } catch (const std::exception& error) {
    std::cerr << "classify_digits_cpp: " << error.what() << "\n";
    return 1;
  }
}
