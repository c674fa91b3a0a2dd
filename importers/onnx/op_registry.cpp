// The op table: name → builders by opset, and the registry that holds every op family.
#include "op_registry.h"

#include <algorithm>

#include "support/error.h"

namespace kiln::onnx_import {
namespace {

// "ai.onnx" and "" name the same default domain; models use both spellings.
std::string canonical_domain(const std::string& domain) { return domain == "ai.onnx" ? std::string() : domain; }

std::string registry_key(const std::string& domain, const std::string& name) {
  return canonical_domain(domain) + "::" + name;
}

}  // namespace

void OpRegistry::add(const std::string& name, OpBuilder builder, int64_t since, const std::string& domain) {
  add_value_op(
      name,
      [builder = std::move(builder)](const OnnxNode& node) {
        std::vector<Tensor> tensors = builder(node);
        return std::vector<OnnxValue>(tensors.begin(), tensors.end());
      },
      since, domain);
}

void OpRegistry::add_value_op(const std::string& name, ValueOpBuilder builder, int64_t since,
                              const std::string& domain) {
  auto& versions = ops_[registry_key(domain, name)].by_since;
  auto position = std::lower_bound(versions.begin(), versions.end(), since,
                                   [](const auto& entry, int64_t value) { return entry.first < value; });
  // Two builders for the same op and opset would make the table depend on registration order.
  if (position != versions.end() && position->first == since)
    throw_internal_error(str_cat("op ", name, " (domain '", domain, "') registered twice for opset ", since));
  versions.insert(position, {since, std::move(builder)});
}

const ValueOpBuilder* OpRegistry::find(const std::string& domain, const std::string& name, int64_t opset) const {
  auto found = ops_.find(registry_key(domain, name));
  if (found == ops_.end()) return nullptr;
  const ValueOpBuilder* best = nullptr;
  for (const auto& [since, builder] : found->second.by_since)
    if (since <= opset) best = &builder;
  return best;
}

const OpRegistry& default_registry() {
  // Built on first use (thread-safe static); explicit calls instead of static constructors, so the
  // set of families is visible here and does not depend on link order (STYLE.md).
  static const OpRegistry registry = [] {
    OpRegistry table;
    register_elementwise_ops(table);
    register_reduce_ops(table);
    register_shape_ops(table);
    register_nn_ops(table);
    register_resize_ops(table);
    register_attention_ops(table);
    register_loss_ops(table);
    register_quant_ops(table);
    register_signal_ops(table);
    register_data_dependent_ops(table);
    register_preview_ops(table);
    register_spatial_ops(table);
    register_control_ops(table);
    register_recurrent_ops(table);
    register_misc_ops(table);
    register_ml_linear_ops(table);
    register_ml_tree_ops(table);
    register_ml_preprocess_ops(table);
    return table;
  }();
  return registry;
}

}  // namespace kiln::onnx_import
