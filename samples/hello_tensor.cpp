// hello_tensor: a first kiln program. It builds a small MLP (two dense layers and a softmax) with
// the lazy Tensor API, runs it, and prints the class probabilities.
//
// Build and run (scripts/demo.sh does this): ./build/samples/hello_tensor
// Set KILN_DEBUG=1 to see how many kernels were made and how long compiling took; run it twice to
// see the second run load every kernel from the disk cache instead of compiling it.
#include <cstdio>
#include <vector>

#include "kiln/kiln.hpp"

int main() {
  using kiln::Tensor;

  // Inputs: 4 samples with 8 features each. Tensors copy host data when they are created.
  std::vector<float> features(4 * 8);
  for (size_t i = 0; i < features.size(); ++i) features[i] = static_cast<float>(i * 7 % 13) * 0.15f - 0.9f;
  Tensor x = Tensor::from_vector(features, {4, 8});

  // Weights: seeded random numbers, so every run (and every machine) sees the same values.
  Tensor w1 = Tensor::normal({8, 16}, /*seed=*/1, 0.0, 0.5);
  Tensor b1 = Tensor::zeros({16});
  Tensor w2 = Tensor::normal({16, 3}, /*seed=*/2, 0.0, 0.5);
  Tensor b2 = Tensor::full({3}, 0.1);

  // The forward pass. Nothing runs yet: each line only extends a lazy graph.
  Tensor hidden = (x.matmul(w1) + b1).relu();
  Tensor probabilities = (hidden.matmul(w2) + b2).softmax(/*axis=*/1);

  // realize() runs the graph: kiln fuses it into a few kernels, compiles them with LLVM for this
  // CPU, and runs them on a thread pool. Afterwards `probabilities` is a plain buffer, so the argmax
  // below reads it instead of computing the network again.
  probabilities.realize();
  std::vector<float> result = probabilities.to_vector<float>();
  std::vector<int64_t> predicted = probabilities.argmax(1).to_vector<int64_t>();

  for (int sample = 0; sample < 4; ++sample) {
    std::printf("sample %d: p = [%.4f, %.4f, %.4f] -> class %lld\n", sample, result[sample * 3 + 0],
                result[sample * 3 + 1], result[sample * 3 + 2], static_cast<long long>(predicted[sample]));
  }
  return 0;
}
