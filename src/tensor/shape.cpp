// Shape inference for tensor-level nodes (see tensor_data.h for what each op means).
#include <unordered_map>

#include "support/error.h"
#include "tensor/tensor_data.h"
#include "tensor/tensor_internal.h"

namespace kiln {

int64_t shape_numel(const Shape& shape) {
  // A model can declare any sizes; a product past int64 is refused rather than wrapped (signed
  // overflow is undefined; found by tests/fuzz onnx).
  int64_t count = 1;
  for (int64_t size : shape)
    if (__builtin_mul_overflow(count, size, &count))
      throw UserError(str_cat("the shape ", shape_string(shape), " has more than 2^63 elements"));
  return count;
}

Dims infer_shape(const UOp& node, const std::vector<const Dims*>& sources) {
  auto source = [&](size_t i) -> const Dims& {
    KILN_ASSERT(i < sources.size() && sources[i] != nullptr, "shape of a missing source");
    return *sources[i];
  };
  switch (node.op()) {
    case Ops::BUFFER: return {decode_dim(node.arg_list().at(1))};
    case Ops::CONST: return {};
    case Ops::SPECIAL: {
      // The count is a CONST: a length, or a marker naming a symbolic one (arange_dim).
      int64_t value = node.src(0)->const_int();
      if (value < kFirstDimMarker) return {decode_dim(value)};
      return {Dim(value < 0 ? 0 : value)};
    }
    case Ops::RESHAPE:
    case Ops::EXPAND: return decode_dims(node.arg_list());
    case Ops::PERMUTE: {
      const Dims& in = source(0);
      Dims out;
      for (int64_t axis : node.arg_list()) out.push_back(in.at(static_cast<size_t>(axis)));
      return out;
    }
    case Ops::PAD: {
      Dims out = source(0);
      const auto& pads = node.arg_list();
      for (size_t i = 0; i < out.size(); ++i) out[i] = out[i] + decode_dim(pads.at(2 * i)) + decode_dim(pads.at(2 * i + 1));
      return out;
    }
    case Ops::SHRINK: {
      Dims out = source(0);
      const auto& bounds = node.arg_list();
      for (size_t i = 0; i < out.size(); ++i) out[i] = decode_dim(bounds.at(2 * i + 1)) - decode_dim(bounds.at(2 * i));
      return out;
    }
    case Ops::REDUCE_AXIS: {
      Dims out = source(0);
      const auto& arg = node.arg_list();
      for (size_t i = 1; i < arg.size(); ++i) out.at(static_cast<size_t>(arg[i])) = 1;
      return out;
    }
    case Ops::DEFINE_VAR: return {};  // a size variable's value as a scalar (dim_tensor)
    default:
      // Elementwise ops, casts, FLIP and CONTIGUOUS keep their first source's shape (the Tensor
      // front end broadcasts every source to one shape first).
      KILN_ASSERT(!sources.empty(), str_cat("no shape rule for ", op_name(node.op())));
      return source(0);
  }
}

const Dims& ShapeMap::of(const UOp* root) {
  if (auto found = shapes_.find(root); found != shapes_.end()) return found->second;
  // Iterative post-order so deep graphs do not overflow the stack.
  std::vector<std::pair<const UOp*, bool>> stack{{root, false}};
  while (!stack.empty()) {
    auto [node, expanded] = stack.back();
    stack.pop_back();
    if (shapes_.contains(node)) continue;
    if (!expanded) {
      stack.push_back({node, true});
      for (const UOpPtr& src : node->srcs())
        if (!shapes_.contains(src.get())) stack.push_back({src.get(), false});
      continue;
    }
    std::vector<const Dims*> source_shapes;
    // SPECIAL's and BUFFER's sources are not tensors.
    if (node->op() != Ops::SPECIAL && node->op() != Ops::BUFFER)
      for (const UOpPtr& src : node->srcs()) source_shapes.push_back(&shapes_.at(src.get()));
    shapes_.emplace(node, infer_shape(*node, source_shapes));
  }
  return shapes_.at(root);
}

}  // namespace kiln
