// ONNX recurrent layers: RNN, GRU and LSTM.
//
// kiln has no loop primitive, so a layer is unrolled over its (static) sequence length into
// ordinary Tensor operations. The input projection X·W^T (plus the biases that do not depend on the
// state) is hoisted out of the recurrence into one matmul over every time step; each step then
// costs one small state·R^T matmul and the gate arithmetic. sequence_lens stays lazy: a step leaves
// the state of a batch entry unchanged (and writes zeros to Y) where the step lies past that entry's
// length, which also makes the reverse direction start at each entry's own last element.
#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>
#include <string>

#include "op_helpers.h"
#include "op_registry.h"
#include "tensor/tensor_internal.h"  // contiguous(): a fusion barrier the public API does not offer

namespace kiln::onnx_import {
namespace {

using Outputs = std::vector<Tensor>;

// ---------------------------------------------------------------------------------------------
// Activation functions (the list the RNN/GRU/LSTM specs name)

enum class ActivationKind {
  Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus
};

struct ActivationInfo {
  const char* name;
  ActivationKind kind;
  bool takes_alpha, takes_beta;
  double default_alpha, default_beta;  // those of the matching ONNX operators
};

constexpr ActivationInfo kActivations[] = {
    {"relu", ActivationKind::Relu, false, false, 0.0, 0.0},
    {"tanh", ActivationKind::Tanh, false, false, 0.0, 0.0},
    {"sigmoid", ActivationKind::Sigmoid, false, false, 0.0, 0.0},
    {"affine", ActivationKind::Affine, true, true, 1.0, 0.0},
    {"leakyrelu", ActivationKind::LeakyRelu, true, false, 0.01, 0.0},
    {"thresholdedrelu", ActivationKind::ThresholdedRelu, true, false, 1.0, 0.0},
    {"scaledtanh", ActivationKind::ScaledTanh, true, true, 1.0, 1.0},
    {"hardsigmoid", ActivationKind::HardSigmoid, true, true, 0.2, 0.5},
    {"elu", ActivationKind::Elu, true, false, 1.0, 0.0},
    {"softsign", ActivationKind::Softsign, false, false, 0.0, 0.0},
    {"softplus", ActivationKind::Softplus, false, false, 0.0, 0.0},
};

struct Activation {
  ActivationKind kind = ActivationKind::Tanh;
  double alpha = 0.0, beta = 0.0;

  Tensor operator()(const Tensor& x) const {
    Tensor zero = Tensor::scalar(0.0, x.dtype());
    switch (kind) {
      case ActivationKind::Relu: return x.relu();
      case ActivationKind::Tanh: return x.tanh();
      case ActivationKind::Sigmoid: return x.sigmoid();
      case ActivationKind::Affine: return x * alpha + beta;
      case ActivationKind::LeakyRelu: return x.ge(zero).where(x, x * alpha);
      case ActivationKind::ThresholdedRelu: return x.ge(Tensor::scalar(alpha, x.dtype())).where(x, zero);
      case ActivationKind::ScaledTanh: return (x * beta).tanh() * alpha;
      case ActivationKind::HardSigmoid: return (x * alpha + beta).clip(0.0, 1.0);
      case ActivationKind::Elu: return x.ge(zero).where(x, (x.exp() - 1.0) * alpha);
      case ActivationKind::Softsign: return x / (x.abs() + 1.0);
      case ActivationKind::Softplus: return x.softplus();
    }
    return x;
  }
};

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// The activations of every direction, in the attribute's order (direction-major). Exporters spell
// the names in different cases ("Tanh", "tanh"), so they are matched case-insensitively. alpha and
// beta values are consumed in order by the activations that take them; the rest keep the defaults.
std::vector<Activation> read_activations(const OnnxNode& node, const std::vector<std::string>& defaults,
                                         int64_t directions) {
  std::vector<std::string> names;
  for (int64_t d = 0; d < directions; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  if (node.has_attribute("activations")) {
    names = node.attr_strings("activations");
    // A per-direction list for a bidirectional layer is applied to both directions.
    if (directions == 2 && names.size() == defaults.size()) {
      std::vector<std::string> once = names;
      names.insert(names.end(), once.begin(), once.end());
    }
    if (names.size() != defaults.size() * static_cast<size_t>(directions))
      node.fail("activations must list " + std::to_string(defaults.size() * static_cast<size_t>(directions)) +
                " functions");
  }
  std::vector<double> alphas = node.attr_floats("activation_alpha", std::vector<double>{});
  std::vector<double> betas = node.attr_floats("activation_beta", std::vector<double>{});
  size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> result;
  for (const std::string& name : names) {
    const ActivationInfo* info = nullptr;
    for (const auto& candidate : kActivations)
      if (lowercase(name) == candidate.name) info = &candidate;
    if (!info) node.fail("unsupported: activation '" + name + "'");
    Activation activation{info->kind, info->default_alpha, info->default_beta};
    if (info->takes_alpha && next_alpha < alphas.size()) activation.alpha = alphas[next_alpha++];
    if (info->takes_beta && next_beta < betas.size()) activation.beta = betas[next_beta++];
    result.push_back(activation);
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// What the three layers share: inputs in layout-0 form, directions, the unrolled loop.

enum class Direction { Forward, Reverse, Bidirectional };

struct RecurrentLayer {
  Tensor x;  // (seq, batch, input), whatever the model's layout
  Tensor w;  // (directions, gates·hidden, input)
  Tensor r;  // (directions, gates·hidden, hidden)
  std::optional<Tensor> bias;     // (directions, 2·gates·hidden): Wb then Rb
  std::optional<Tensor> lengths;  // (batch, 1) i64
  std::optional<Tensor> initial_h;  // (directions, batch, hidden)
  Direction direction = Direction::Forward;
  int64_t directions = 1, seq = 0, batch = 0, hidden = 0;
  bool batch_first = false;  // layout 1
  std::optional<double> clip;
};

// A state tensor input given as (directions, batch, hidden), or (batch, directions, hidden) in
// layout 1, in the (directions, batch, hidden) form.
std::optional<Tensor> read_state(const OnnxNode& node, size_t index, const RecurrentLayer& layer, const char* what) {
  if (!node.has_input(index)) return std::nullopt;
  Tensor state = node.input(index);
  if (layer.batch_first && state.ndim() == 3) state = state.permute({1, 0, 2});
  if (state.shape() != Shape{layer.directions, layer.batch, layer.hidden})
    node.fail(std::string(what) + " must have shape (num_directions, batch_size, hidden_size) for its layout");
  return state;
}

RecurrentLayer read_layer(const OnnxNode& node, int64_t gates) {
  RecurrentLayer layer;
  std::string direction = node.attr_string("direction", std::string("forward"));
  if (direction == "forward") layer.direction = Direction::Forward;
  else if (direction == "reverse") layer.direction = Direction::Reverse;
  else if (direction == "bidirectional") layer.direction = Direction::Bidirectional;
  else node.fail("unsupported: direction '" + direction + "'");
  layer.directions = layer.direction == Direction::Bidirectional ? 2 : 1;

  // layout appeared in opset 14; earlier versions are always sequence-first.
  int64_t layout = node.opset() >= 14 ? node.attr_int("layout", 0) : 0;
  if (layout != 0 && layout != 1) node.fail("unsupported: layout " + std::to_string(layout));
  layer.batch_first = layout == 1;

  layer.x = node.input(0);
  if (!is_floating(layer.x.dtype())) node.fail("X must be a floating-point tensor");
  if (layer.x.ndim() != 3) node.fail("X must be 3-D");
  if (layer.batch_first) layer.x = layer.x.permute({1, 0, 2});
  layer.seq = layer.x.dim(0);
  layer.batch = layer.x.dim(1);
  if (layer.seq == 0) node.fail("unsupported: an empty sequence (seq_length 0)");

  layer.w = node.input(1);
  layer.r = node.input(2);
  if (layer.r.ndim() != 3) node.fail("R must be 3-D");
  layer.hidden = layer.r.dim(2);
  if (node.has_attribute("hidden_size") && node.attr_int("hidden_size") != layer.hidden)
    node.fail("hidden_size does not match R's last dimension");
  int64_t input_size = layer.x.dim(2);
  if (layer.w.shape() != Shape{layer.directions, gates * layer.hidden, input_size})
    node.fail("W must have shape (num_directions, " + std::to_string(gates) + "·hidden_size, input_size)");
  if (layer.r.shape() != Shape{layer.directions, gates * layer.hidden, layer.hidden})
    node.fail("R must have shape (num_directions, " + std::to_string(gates) + "·hidden_size, hidden_size)");
  if (node.has_input(3)) {
    layer.bias = node.input(3);
    if (layer.bias->shape() != Shape{layer.directions, 2 * gates * layer.hidden})
      node.fail("B must have shape (num_directions, " + std::to_string(2 * gates) + "·hidden_size)");
  }
  if (node.has_input(4)) {
    const Tensor& lengths = node.input(4);
    if (lengths.shape() != Shape{layer.batch}) node.fail("sequence_lens must have shape (batch_size)");
    layer.lengths = lengths.cast(ScalarType::Int64).reshape({layer.batch, 1});
  }
  layer.initial_h = read_state(node, 5, layer, "initial_h");
  if (node.has_attribute("clip")) {
    double clip = node.attr_float("clip");
    if (!(clip > 0.0)) node.fail("clip must be positive");
    layer.clip = clip;
  }
  return layer;
}

// The pre-activation clip the spec applies to the input of every activation.
Tensor clipped(const RecurrentLayer& layer, const Tensor& x) { return layer.clip ? x.clip(-*layer.clip, *layer.clip) : x; }

// Columns [gate·hidden, (gate + count)·hidden) of a (…, gates·hidden) tensor.
Tensor gate_slice(const Tensor& t, int64_t hidden, int64_t gate, int64_t count = 1) {
  return t.slice(-1, gate * hidden, (gate + count) * hidden);
}

// X·W^T for every time step at once: (seq, batch, gates·hidden), plus `bias` (gates·hidden) if given.
Tensor project_input(const RecurrentLayer& layer, int64_t direction, const std::optional<Tensor>& bias) {
  Tensor w = layer.w.slice(0, direction, direction + 1).squeeze({0});
  Tensor flat = layer.x.reshape({layer.seq * layer.batch, layer.x.dim(2)});
  Tensor projected = flat.matmul(w.transpose()).reshape({layer.seq, layer.batch, w.dim(0)});
  return bias ? projected + *bias : projected;
}

// The (directions, …) parameter row of one direction.
Tensor direction_row(const Tensor& t, int64_t direction) { return t.slice(0, direction, direction + 1).squeeze({0}); }

struct State {
  Tensor h;
  std::optional<Tensor> c;  // LSTM only
};

// One step: the projected input of this time step (batch, gates·hidden) and the previous state.
using Step = std::function<State(const Tensor& projected, const State& previous)>;

struct DirectionResult {
  Tensor y;  // (seq, batch, hidden)
  State last;
};

DirectionResult unroll(const RecurrentLayer& layer, const Tensor& projected, State state, bool reverse, const Step& step) {
  std::vector<Tensor> outputs(static_cast<size_t>(layer.seq));
  for (int64_t k = 0; k < layer.seq; ++k) {
    int64_t t = reverse ? layer.seq - 1 - k : k;
    // The step's input slice gets its own (tiny) copy so that every step's main kernel reads the
    // same buffer layout: those kernels are then identical and compiled once, not once per step.
    State next = step(contiguous(projected.slice(0, t, t + 1).squeeze({0})), state);
    Tensor output = next.h;
    if (layer.lengths) {
      // Past an entry's length the state is carried unchanged and Y is zero.
      Tensor active = layer.lengths->gt(Tensor::scalar(static_cast<double>(t), ScalarType::Int64));
      next.h = active.where(next.h, state.h);
      if (next.c) next.c = active.where(*next.c, *state.c);
      output = active.where(next.h, Tensor::scalar(0.0, next.h.dtype()));
    }
    outputs[static_cast<size_t>(t)] = output;
    // The new state is an elementwise function of the previous one, so a fused kernel would
    // recompute the whole chain back to the first step (kernels grow with t, compile time with t²).
    // A buffer per step keeps every step's kernels the same small size.
    next.h = contiguous(next.h);
    if (next.c) next.c = contiguous(*next.c);
    state = std::move(next);
  }
  return {Tensor::stack(outputs, 0), state};
}

// The initial state of one direction: the given (directions, batch, hidden) tensor or zeros.
Tensor initial_state(const RecurrentLayer& layer, const std::optional<Tensor>& given, int64_t direction) {
  if (given) return direction_row(*given, direction).cast(layer.x.dtype());
  return Tensor::zeros({layer.batch, layer.hidden}, layer.x.dtype());
}

bool is_reverse(const RecurrentLayer& layer, int64_t direction) {
  return layer.direction == Direction::Reverse || (layer.direction == Direction::Bidirectional && direction == 1);
}

// Y (seq, directions, batch, hidden), Y_h and Y_c (directions, batch, hidden), in the model's layout.
Outputs layer_outputs(const OnnxNode& node, const RecurrentLayer& layer, const std::vector<DirectionResult>& results) {
  std::vector<Tensor> ys, hs, cs;
  for (const auto& result : results) {
    ys.push_back(result.y);
    hs.push_back(result.last.h);
    if (result.last.c) cs.push_back(*result.last.c);
  }
  Tensor y = Tensor::stack(ys, 1);
  Tensor y_h = Tensor::stack(hs, 0);
  std::optional<Tensor> y_c;
  if (!cs.empty()) y_c = Tensor::stack(cs, 0);
  if (layer.batch_first) {
    y = y.permute({2, 0, 1, 3});  // (batch, seq, directions, hidden)
    y_h = y_h.permute({1, 0, 2});  // (batch, directions, hidden)
    if (y_c) y_c = y_c->permute({1, 0, 2});
  }
  Outputs outputs{y, y_h};
  if (y_c) outputs.push_back(*y_c);
  return declared_outputs(node, outputs);
}

// ---------------------------------------------------------------------------------------------
// RNN: Ht = f(Xt·Wi^T + Ht-1·Ri^T + Wbi + Rbi)

Outputs rnn(const OnnxNode& node) {
  RecurrentLayer layer = read_layer(node, 1);
  std::vector<Activation> activations = read_activations(node, {"Tanh"}, layer.directions);
  std::vector<DirectionResult> results;
  for (int64_t d = 0; d < layer.directions; ++d) {
    std::optional<Tensor> bias;
    if (layer.bias) {
      Tensor row = direction_row(*layer.bias, d);
      bias = gate_slice(row, layer.hidden, 0) + gate_slice(row, layer.hidden, 1);
    }
    Tensor recurrence = direction_row(layer.r, d).transpose();
    const Activation& f = activations[static_cast<size_t>(d)];
    Step step = [&](const Tensor& projected, const State& previous) {
      return State{f(clipped(layer, projected + previous.h.matmul(recurrence))), std::nullopt};
    };
    results.push_back(unroll(layer, project_input(layer, d, bias), {initial_state(layer, layer.initial_h, d), std::nullopt},
                             is_reverse(layer, d), step));
  }
  return layer_outputs(node, layer, results);
}

// ---------------------------------------------------------------------------------------------
// GRU (gates z, r, h):
//   zt = f(Xt·Wz^T + Ht-1·Rz^T + Wbz + Rbz),  rt = f(Xt·Wr^T + Ht-1·Rr^T + Wbr + Rbr)
//   ht = g(Xt·Wh^T + (rt ⊙ Ht-1)·Rh^T + Rbh + Wbh)          linear_before_reset = 0
//   ht = g(Xt·Wh^T + rt ⊙ (Ht-1·Rh^T + Rbh) + Wbh)          linear_before_reset ≠ 0
//   Ht = (1 - zt) ⊙ ht + zt ⊙ Ht-1

Outputs gru(const OnnxNode& node) {
  RecurrentLayer layer = read_layer(node, 3);
  std::vector<Activation> activations = read_activations(node, {"Sigmoid", "Tanh"}, layer.directions);
  // linear_before_reset appeared in opset 3; GRU-1 is the default form.
  bool linear_before_reset = node.opset() >= 3 && node.attr_int("linear_before_reset", 0) != 0;
  int64_t hidden = layer.hidden;
  std::vector<DirectionResult> results;
  for (int64_t d = 0; d < layer.directions; ++d) {
    // Hoisted bias: Wb for every gate, Rb for z and r, and Rbh too unless the reset gate scales it.
    std::optional<Tensor> bias, hidden_recurrent_bias;
    if (layer.bias) {
      Tensor row = direction_row(*layer.bias, d);
      Tensor input_bias = gate_slice(row, hidden, 0, 3), recurrent_bias = gate_slice(row, hidden, 3, 3);
      if (linear_before_reset) {
        hidden_recurrent_bias = gate_slice(recurrent_bias, hidden, 2);
        recurrent_bias = Tensor::concat({gate_slice(recurrent_bias, hidden, 0, 2),
                                         Tensor::zeros({hidden}, recurrent_bias.dtype())}, 0);
      }
      bias = input_bias + recurrent_bias;
    }
    Tensor r = direction_row(layer.r, d);
    Tensor update_reset_recurrence = gate_slice(r.transpose(), hidden, 0, 2);  // (hidden, 2·hidden)
    Tensor hidden_recurrence = gate_slice(r.transpose(), hidden, 2);           // (hidden, hidden)
    const Activation& f = activations[static_cast<size_t>(2 * d)];
    const Activation& g = activations[static_cast<size_t>(2 * d + 1)];
    Step step = [&, hidden_recurrent_bias](const Tensor& projected, const State& previous) {
      const Tensor& h = previous.h;
      Tensor update_reset = gate_slice(projected, hidden, 0, 2) + h.matmul(update_reset_recurrence);
      Tensor z = f(clipped(layer, gate_slice(update_reset, hidden, 0)));
      Tensor reset = f(clipped(layer, gate_slice(update_reset, hidden, 1)));
      Tensor candidate_input = gate_slice(projected, hidden, 2);
      if (linear_before_reset) {
        Tensor linear = h.matmul(hidden_recurrence);
        if (hidden_recurrent_bias) linear = linear + *hidden_recurrent_bias;
        candidate_input = candidate_input + reset * linear;
      } else {
        candidate_input = candidate_input + (reset * h).matmul(hidden_recurrence);
      }
      Tensor candidate = g(clipped(layer, candidate_input));
      return State{(1.0 - z) * candidate + z * h, std::nullopt};
    };
    results.push_back(unroll(layer, project_input(layer, d, bias), {initial_state(layer, layer.initial_h, d), std::nullopt},
                             is_reverse(layer, d), step));
  }
  return layer_outputs(node, layer, results);
}

// ---------------------------------------------------------------------------------------------
// LSTM (gates i, o, f, c; peepholes P[iof]):
//   it = f(Xt·Wi^T + Ht-1·Ri^T + Pi ⊙ Ct-1 + Wbi + Rbi)
//   ft = f(Xt·Wf^T + Ht-1·Rf^T + Pf ⊙ Ct-1 + Wbf + Rbf)     (1 - it with input_forget)
//   ct = g(Xt·Wc^T + Ht-1·Rc^T + Wbc + Rbc)
//   Ct = ft ⊙ Ct-1 + it ⊙ ct
//   ot = f(Xt·Wo^T + Ht-1·Ro^T + Po ⊙ Ct + Wbo + Rbo)
//   Ht = ot ⊙ h(Ct)

Outputs lstm(const OnnxNode& node) {
  RecurrentLayer layer = read_layer(node, 4);
  std::optional<Tensor> initial_c = read_state(node, 6, layer, "initial_c");
  std::optional<Tensor> peepholes;
  if (node.has_input(7)) {
    peepholes = node.input(7);
    if (peepholes->shape() != Shape{layer.directions, 3 * layer.hidden})
      node.fail("P must have shape (num_directions, 3·hidden_size)");
  }
  std::vector<Activation> activations = read_activations(node, {"Sigmoid", "Tanh", "Tanh"}, layer.directions);
  // Coupled gates (input_forget = 1): the forget gate is 1 - it, as in CIFG LSTMs.
  bool input_forget = node.attr_int("input_forget", 0) != 0;
  int64_t hidden = layer.hidden;
  enum Gate : int64_t { kInput = 0, kOutput = 1, kForget = 2, kCell = 3 };
  std::vector<DirectionResult> results;
  for (int64_t d = 0; d < layer.directions; ++d) {
    std::optional<Tensor> bias;
    if (layer.bias) {
      Tensor row = direction_row(*layer.bias, d);
      bias = gate_slice(row, hidden, 0, 4) + gate_slice(row, hidden, 4, 4);
    }
    std::optional<Tensor> peephole_i, peephole_o, peephole_f;
    if (peepholes) {
      Tensor row = direction_row(*peepholes, d);
      peephole_i = gate_slice(row, hidden, 0);
      peephole_o = gate_slice(row, hidden, 1);
      peephole_f = gate_slice(row, hidden, 2);
    }
    Tensor recurrence = direction_row(layer.r, d).transpose();
    const Activation& f = activations[static_cast<size_t>(3 * d)];
    const Activation& g = activations[static_cast<size_t>(3 * d + 1)];
    const Activation& h = activations[static_cast<size_t>(3 * d + 2)];
    auto with_peephole = [](const Tensor& x, const std::optional<Tensor>& peephole, const Tensor& cell) {
      return peephole ? x + *peephole * cell : x;
    };
    Step step = [&, peephole_i, peephole_o, peephole_f](const Tensor& projected, const State& previous) {
      const Tensor& cell = *previous.c;
      Tensor gates = projected + previous.h.matmul(recurrence);
      Tensor input_gate = f(clipped(layer, with_peephole(gate_slice(gates, hidden, kInput), peephole_i, cell)));
      Tensor forget_gate = input_forget
                               ? 1.0 - input_gate
                               : f(clipped(layer, with_peephole(gate_slice(gates, hidden, kForget), peephole_f, cell)));
      Tensor cell_input = g(clipped(layer, gate_slice(gates, hidden, kCell)));
      Tensor new_cell = forget_gate * cell + input_gate * cell_input;
      Tensor output_gate = f(clipped(layer, with_peephole(gate_slice(gates, hidden, kOutput), peephole_o, new_cell)));
      return State{output_gate * h(clipped(layer, new_cell)), new_cell};
    };
    State initial{initial_state(layer, layer.initial_h, d), initial_state(layer, initial_c, d)};
    results.push_back(unroll(layer, project_input(layer, d, bias), initial, is_reverse(layer, d), step));
  }
  return layer_outputs(node, layer, results);
}

}  // namespace

void register_recurrent_ops(OpRegistry& registry) {
  registry.add("RNN", rnn, 1);
  registry.add("GRU", gru, 1);
  registry.add("LSTM", lstm, 1);
}

}  // namespace kiln::onnx_import
