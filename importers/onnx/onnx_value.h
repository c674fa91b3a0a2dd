// OnnxValue: what one name in an ONNX graph holds — a tensor, a sequence of tensors, or an optional
// (empty, or holding a tensor or a sequence). Op builders, subgraphs (If/Loop/Scan bodies) and the
// model's graph inputs and outputs exchange values of this type; most ops only ever see tensors.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kiln.hpp"

namespace kiln::onnx_import {

class OnnxValue {
 public:
  enum class Kind { Tensor, Sequence, Optional };

  // A tensor value; an empty Tensor handle means "not produced" (an optional output left out).
  OnnxValue() = default;
  OnnxValue(Tensor tensor) : tensor_(std::move(tensor)) {}  // NOLINT: implicit, tensors are the common case

  // A sequence; `element_type` is what its elements are (known even when it is empty, from
  // SequenceEmpty's dtype or a declared type), nullopt when nobody said.
  static OnnxValue sequence(std::vector<Tensor> elements, std::optional<ScalarType> element_type = std::nullopt) {
    OnnxValue value;
    value.kind_ = Kind::Sequence;
    if (!element_type && !elements.empty()) element_type = elements.front().dtype();
    value.elements_ = std::move(elements);
    value.element_type_ = element_type;
    return value;
  }
  // An optional holding `element` (a tensor or a sequence), or an empty optional for nullopt.
  static OnnxValue optional(std::optional<OnnxValue> element) {
    OnnxValue value;
    value.kind_ = Kind::Optional;
    if (element) value.optional_element_ = std::make_shared<OnnxValue>(std::move(*element));
    return value;
  }

  Kind kind() const { return kind_; }
  bool is_tensor() const { return kind_ == Kind::Tensor; }
  bool is_sequence() const { return kind_ == Kind::Sequence; }
  bool is_optional() const { return kind_ == Kind::Optional; }
  // False only for the "not produced" tensor value.
  bool defined() const { return kind_ != Kind::Tensor || tensor_.defined(); }

  // Kind accessors: calling the wrong one is a bug in the caller (check kind() first);
  // OnnxNode's input accessors turn a wrong kind in a model into a UserError instead.
  const Tensor& tensor() const { return tensor_; }
  const std::vector<Tensor>& elements() const { return elements_; }
  std::optional<ScalarType> element_type() const { return element_type_; }
  bool has_element() const { return optional_element_ != nullptr; }
  const OnnxValue& element() const { return *optional_element_; }

  // Every tensor handle inside (sequence elements and an optional's contents included), to realize
  // them in place. An optional's contents are shared by its copies, which all see the realized
  // handles: the same values, computed once.
  void collect_tensors(std::vector<Tensor*>& tensors) {
    switch (kind_) {
      case Kind::Tensor: tensors.push_back(&tensor_); break;
      case Kind::Sequence:
        for (Tensor& element : elements_) tensors.push_back(&element);
        break;
      case Kind::Optional:
        if (optional_element_) optional_element_->collect_tensors(tensors);
        break;
    }
  }

  // "tensor", "sequence", "optional" (for error messages).
  std::string kind_name() const {
    switch (kind_) {
      case Kind::Tensor: return "tensor";
      case Kind::Sequence: return "sequence";
      case Kind::Optional: return "optional";
    }
    return "value";
  }

 private:
  Kind kind_ = Kind::Tensor;
  Tensor tensor_;
  std::vector<Tensor> elements_;
  std::optional<ScalarType> element_type_;
  std::shared_ptr<OnnxValue> optional_element_;
};

}  // namespace kiln::onnx_import
