// Binding the symbolic dimensions (dim_param) of a model's inputs at compile time, from shapes the
// user gives as `input=1,3,224,224` or `batch=1` (see onnx_model.h).
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>

#include "onnx_model.h"
#include "op_helpers.h"
#include "support/error.h"

namespace kiln::onnx_import {
namespace {

std::string shape_text(const Dims& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += str_cat(i ? ", " : "", shape[i]);
  return text + ")";
}

std::string shape_text(const Shape& shape) { return shape_text(to_dims(shape)); }

// "(batch, 3, ?, ?)": the model's view of an input's shape.
std::string dims_text(const std::vector<OnnxDim>& dims) {
  std::string text = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    const OnnxDim& dim = dims[i];
    text += i ? ", " : "";
    text += dim.size ? str_cat(*dim.size) : dim.symbol.empty() ? std::string("?") : dim.symbol;
  }
  return text + ")";
}

int64_t parse_size(const std::string& spec, const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    throw UserError(str_cat("shape '", spec, "': '", text, "' is not a size (sizes are non-negative integers)"));
  errno = 0;
  const unsigned long long value = std::strtoull(text.c_str(), nullptr, 10);
  if (errno != 0 || value > static_cast<unsigned long long>(std::numeric_limits<int64_t>::max()))
    throw UserError(str_cat("shape '", spec, "': size ", text, " is too large"));
  return static_cast<int64_t>(value);
}

// Where a symbol's size came from, for messages about conflicting sizes.
struct SymbolBinding {
  int64_t size;
  std::string source;  // "'batch=2'" or "the shape of input 'x'"
};

}  // namespace

ShapeSpec parse_shape_spec(const std::string& text) {
  const size_t equals = text.rfind('=');
  if (equals == std::string::npos)
    throw UserError(str_cat("shape '", text, "' has no '=': write INPUT=D1,D2,... or SYMBOL=N"));
  ShapeSpec spec;
  spec.name = text.substr(0, equals);
  if (spec.name.empty()) throw UserError(str_cat("shape '", text, "' names no input or dimension before '='"));
  const std::string sizes = text.substr(equals + 1);
  // INPUT[AXIS]: one unnamed dimension of an input.
  if (size_t open = spec.name.rfind('['); open != std::string::npos && open > 0 && spec.name.back() == ']') {
    spec.axis = parse_size(text, spec.name.substr(open + 1, spec.name.size() - open - 2));
    spec.name = spec.name.substr(0, open);
    if (sizes.find("..") == std::string::npos && sizes.find(',') != std::string::npos)
      throw UserError(str_cat("shape '", text, "': one dimension takes one size (N) or a range (MIN..MAX)"));
  }
  if (sizes.empty()) return spec;  // a scalar input
  if (size_t dots = sizes.find(".."); dots != std::string::npos) {
    int64_t min = parse_size(text, sizes.substr(0, dots)), max = parse_size(text, sizes.substr(dots + 2));
    if (min > max) throw UserError(str_cat("shape '", text, "': the range ", min, "..", max, " is empty"));
    spec.range = std::make_pair(min, max);
    return spec;
  }
  size_t start = 0;
  while (true) {
    const size_t comma = sizes.find(',', start);
    spec.dims.push_back(parse_size(text, sizes.substr(start, comma == std::string::npos ? comma : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return spec;
}

std::vector<std::pair<std::string, Shape>> OnnxModel::bind_input_shapes(const std::vector<ShapeSpec>& specs) const {
  for (const auto& spec : specs)
    if (spec.range)
      throw UserError(str_cat("'", spec.name, spec.axis ? str_cat("[", *spec.axis, "]") : std::string(), "=",
                              spec.range->first, "..", spec.range->second,
                              "': a range keeps a dimension symbolic, and this needs fixed shapes (give one size)"));
  std::vector<std::pair<std::string, Shape>> shapes;
  for (auto& [name, dims] : bind_input_dims(specs, UnboundSymbols::ErrorFixedOnly))
    shapes.emplace_back(name, known_sizes(dims));
  return shapes;
}

std::vector<std::pair<std::string, Dims>> OnnxModel::bind_input_dims(const std::vector<ShapeSpec>& specs,
                                                                     UnboundSymbols unbound_symbols) const {
  auto find_input = [&](const std::string& name) {
    return std::find_if(inputs_.begin(), inputs_.end(), [&](const OnnxValueInfo& info) { return info.name == name; });
  };
  std::set<std::string> symbols;  // every dim_param of the inputs
  for (const auto& info : inputs_)
    if (info.dims)
      for (const auto& dim : *info.dims)
        if (!dim.symbol.empty()) symbols.insert(dim.symbol);

  // Sort the specs: whole input shapes and symbol sizes; a name given twice is a mistake.
  std::map<std::string, Shape> whole_shapes;
  std::map<std::string, SymbolBinding> bound;
  std::map<std::string, Dim> variables;  // symbols kept symbolic
  std::map<std::pair<std::string, int64_t>, Dim> unnamed;  // INPUT[AXIS] specs: a size or a variable
  std::set<std::string> seen;
  for (const auto& spec : specs) {
    if (spec.axis) {
      std::string label = str_cat(spec.name, "[", *spec.axis, "]");
      auto input = find_input(spec.name);
      if (input == inputs_.end())
        throw UserError(str_cat("shape for '", label, "': the model has no input '", spec.name, "'"));
      if (!input->dims || *spec.axis >= static_cast<int64_t>(input->dims->size()))
        throw UserError(str_cat("shape for '", label, "': input '", spec.name, "' has ",
                                input->dims ? str_cat("shape ", dims_text(*input->dims)) : std::string("no shape in the model"),
                                ", with no dimension ", *spec.axis));
      const OnnxDim& dim = (*input->dims)[static_cast<size_t>(*spec.axis)];
      if (dim.size || !dim.symbol.empty())
        throw UserError(str_cat("shape for '", label, "': dimension ", *spec.axis, " of input '", spec.name, "' ",
                                dims_text(*input->dims), " is ",
                                dim.size ? str_cat("fixed to ", *dim.size) : str_cat("named '", dim.symbol, "' (give '", dim.symbol, "=...')")));
      if (!unnamed.emplace(std::make_pair(spec.name, *spec.axis),
                           spec.range ? size_variable(label, spec.range->first, spec.range->second) : Dim(spec.dims.at(0)))
               .second)
        throw UserError(str_cat("shape for '", label, "' is given twice"));
      continue;
    }
    if (!seen.insert(spec.name).second) throw UserError(str_cat("shape for '", spec.name, "' is given twice"));
    if (find_input(spec.name) != inputs_.end()) {
      if (spec.range)
        throw UserError(str_cat("'", spec.name, "' is an input: give its whole shape ('", spec.name,
                                "=D1,D2,...'); a range applies to a symbolic dimension"));
      whole_shapes[spec.name] = spec.dims;
    } else if (symbols.count(spec.name) && spec.range) {
      variables.emplace(spec.name, size_variable(spec.name, spec.range->first, spec.range->second));
    } else if (symbols.count(spec.name)) {
      if (spec.dims.size() != 1)
        throw UserError(str_cat("'", spec.name, "' is a symbolic dimension: give one size ('", spec.name,
                                "=N'), not ", spec.dims.size()));
      bound[spec.name] = {spec.dims[0], str_cat("'", spec.name, "=", spec.dims[0], "'")};
    } else {
      std::string inputs_list, symbols_list;
      for (const auto& info : inputs_) inputs_list += str_cat(inputs_list.empty() ? "" : ", ", "'", info.name, "'");
      for (const auto& symbol : symbols) symbols_list += str_cat(symbols_list.empty() ? "" : ", ", "'", symbol, "'");
      throw UserError(str_cat("shape for '", spec.name, "': the model has no input or symbolic dimension of that name",
                              " (inputs: ", inputs_list.empty() ? "none" : inputs_list,
                              "; symbolic dimensions: ", symbols_list.empty() ? "none" : symbols_list, ")"));
    }
  }

  // A whole shape must agree with the model's rank and fixed sizes, and gives its symbols a size.
  for (const auto& [name, shape] : whole_shapes) {
    const OnnxValueInfo& info = *find_input(name);
    if (!info.is_tensor) throw UserError(str_cat("input '", name, "' is not a tensor; only tensor inputs are supported"));
    if (!info.dims) continue;  // the model gives no shape: any shape goes
    if (shape.size() != info.dims->size())
      throw UserError(str_cat("shape for input '", name, "' is ", shape_text(shape), " (rank ", shape.size(),
                              ") but the model gives it rank ", info.dims->size(), ": ", dims_text(*info.dims)));
    for (size_t axis = 0; axis < shape.size(); ++axis) {
      const OnnxDim& dim = (*info.dims)[axis];
      if (dim.size && *dim.size != shape[axis])
        throw UserError(str_cat("shape for input '", name, "' is ", shape_text(shape), " but the model fixes dimension ",
                                axis, " to ", *dim.size, ": ", dims_text(*info.dims)));
      if (dim.symbol.empty()) continue;
      auto [it, inserted] =
          bound.emplace(dim.symbol, SymbolBinding{shape[axis], str_cat("the shape of input '", name, "'")});
      if (!inserted && it->second.size != shape[axis])
        throw UserError(str_cat("dimension '", dim.symbol, "' is ", it->second.size, " from ", it->second.source,
                                " but ", shape[axis], " from the shape of input '", name, "'"));
    }
  }

  // A symbol that an input's whole shape fixes is not symbolic, whatever range it was given.
  for (const auto& [symbol, binding] : bound)
    if (variables.contains(symbol))
      throw UserError(str_cat("dimension '", symbol, "' is given a range and is ", binding.size, " from ", binding.source));

  // Every input the caller must give gets a shape; collect every unbound dimension at once.
  std::vector<std::pair<std::string, Dims>> shapes;
  std::vector<std::string> unbound;
  for (const auto& info : inputs_) {
    auto whole = whole_shapes.find(info.name);
    if (whole != whole_shapes.end()) {
      shapes.emplace_back(info.name, to_dims(whole->second));
      continue;
    }
    if (info.has_initializer) continue;  // its initializer gives the value
    if (!info.is_tensor) throw UserError(str_cat("input '", info.name, "' is not a tensor; only tensor inputs are supported"));
    if (!info.dims) {
      unbound.push_back(str_cat("input '", info.name, "' has no shape in the model (give '", info.name, "=D1,D2,...')"));
      continue;
    }
    Dims shape;
    for (size_t axis = 0; axis < info.dims->size(); ++axis) {
      const OnnxDim& dim = (*info.dims)[axis];
      if (dim.size) {
        shape.push_back(*dim.size);
      } else if (auto it = bound.find(dim.symbol); !dim.symbol.empty() && it != bound.end()) {
        shape.push_back(it->second.size);
      } else if (auto variable = variables.find(dim.symbol); !dim.symbol.empty() && variable != variables.end()) {
        shape.push_back(variable->second);
      } else if (auto given = unnamed.find({info.name, static_cast<int64_t>(axis)});
                 dim.symbol.empty() && given != unnamed.end()) {
        shape.push_back(given->second);
      } else {
        unbound.push_back(dim.symbol.empty()
                              ? str_cat("input '", info.name, "' dimension ", axis, " has no size or name in the model ",
                                        dims_text(*info.dims), " (give '", info.name, "[", axis, "]=N'",
                                        unbound_symbols == UnboundSymbols::Error
                                            ? str_cat(", or '", info.name, "[", axis, "]=MIN..MAX' to keep it symbolic")
                                            : std::string(),
                                        ", or '", info.name, "=D1,D2,...')")
                              : str_cat("input '", info.name, "' dimension ", axis, " ('", dim.symbol, "') in ",
                                        dims_text(*info.dims), " (give '", dim.symbol, "=N'",
                                        unbound_symbols == UnboundSymbols::Error
                                            ? str_cat(", or '", dim.symbol, "=MIN..MAX' to keep it symbolic")
                                            : std::string(),
                                        ")"));
        shape.push_back(0);
      }
    }
    shapes.emplace_back(info.name, std::move(shape));
  }
  if (!unbound.empty()) {
    std::string list;
    for (const auto& entry : unbound) list += str_cat(list.empty() ? "" : "; ", entry);
    throw UserError(str_cat("unbound input dimension", unbound.size() == 1 ? "" : "s", ": ", list));
  }
  for (const auto& [name, dims] : shapes)
    if (!element_count_fits(max_sizes(dims)))
      throw UserError(str_cat("input '", name, "' would have shape ", shape_text(dims),
                              all_known(dims) ? "" : " (at its variables' maxima)", ", more elements than fit in 64 bits"));
  return shapes;
}

}  // namespace kiln::onnx_import
