// Test helper (C++): turns an ONNX test data set into raw little-endian files that the C plan tests
// read without protobuf, and runs the model in process (the JIT path) for the reference outputs.
//   plan-reference MODEL.onnx DATA_SET_DIR OUT_DIR [DATA_SET_DIR OUT_DIR]...
// writes, for each data set, OUT_DIR/input_NAME.bin (NAME: the input's name with every character but
// letters and digits replaced by '_'), expected_K.bin (the data set's outputs), inprocess_K.bin and
// shapes.txt (one `NAME=D1,D2,...` line per input, the data set's shapes as `kiln compile --shape`
// takes them). The model is loaded once for all the data sets.
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "onnx_model.h"
#include "tensor_file.h"

namespace fs = std::filesystem;

namespace {

void write_raw(const fs::path& path, const kiln::Tensor& tensor) {
  std::string bytes(static_cast<size_t>(tensor.numel()) * kiln::scalar_type_size(tensor.dtype()), '\0');
  tensor.copy_to(bytes.data(), bytes.size());
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string file_safe(std::string name) {
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc % 2 != 0) {
    std::cerr << "usage: plan-reference MODEL.onnx DATA_SET_DIR OUT_DIR [DATA_SET_DIR OUT_DIR]...\n";
    return 2;
  }
  try {
    auto model = kiln::onnx_import::OnnxModel::load_file(argv[1]);
    for (int set = 2; set + 1 < argc; set += 2) {
      fs::path data = argv[set], out = argv[set + 1];
      fs::create_directories(out);
      std::ofstream shapes(out / "shapes.txt");
      std::vector<std::pair<std::string, kiln::Tensor>> inputs;
      // Data sets name their inputs in the TensorProto; unnamed ones follow the inputs without
      // initializers, in graph order.
      std::vector<std::string> required;
      for (const auto& info : model.inputs())
        if (!info.has_initializer) required.push_back(info.name);
      for (size_t k = 0; fs::exists(data / ("input_" + std::to_string(k) + ".pb")); ++k) {
        auto read = kiln::tools::read_tensor_file((data / ("input_" + std::to_string(k) + ".pb")).string());
        std::string name = !read.name.empty() ? read.name : required.at(k);
        write_raw(out / ("input_" + file_safe(name) + ".bin"), read.tensor);
        shapes << name << "=";
        for (size_t axis = 0; axis < read.tensor.shape().size(); ++axis)
          shapes << (axis ? "," : "") << read.tensor.shape()[axis];
        shapes << "\n";
        inputs.emplace_back(name, read.tensor);
      }
      for (size_t k = 0; fs::exists(data / ("output_" + std::to_string(k) + ".pb")); ++k) {
        auto read = kiln::tools::read_tensor_file((data / ("output_" + std::to_string(k) + ".pb")).string());
        write_raw(out / ("expected_" + std::to_string(k) + ".bin"), read.tensor);
      }
      // run() folds weight-only values as `kiln compile` does, so the plan's outputs can be
      // compared with these bit for bit.
      auto outputs = model.run(inputs);
      for (size_t k = 0; k < outputs.size(); ++k)
        write_raw(out / ("inprocess_" + std::to_string(k) + ".bin"), outputs[k].second);
      if (!shapes.flush()) throw std::runtime_error("cannot write " + (out / "shapes.txt").string());
    }
    return 0;
  } catch (const std::exception& error) {
    std::cerr << "plan-reference: " << error.what() << "\n";
    return 1;
  }
}
