// ONNX transformer building blocks: Attention (opset 23/24) and RotaryEmbedding (opset 23).
//
// Both are ONNX "functions" whose reference semantics are a handful of tensor operations, so they
// are lowered here into kiln's lazy Tensor operations rather than a dedicated kernel: the compiler
// fuses the masking, scaling and softmax chains by itself.
//
// RMSNormalization, MeanVarianceNormalization (ops_nn.cpp), Swish and Shrink
// (ops_elementwise.cpp) are registered by their own families; registering them here again would
// make the registry throw (one builder per op and opset).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "op_helpers.h"
#include "op_registry.h"

namespace kiln::onnx_import {
namespace {

using Outputs = std::vector<Tensor>;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Half-precision inputs are computed in f32 and cast back: the references are produced in higher
// precision than a 16-bit accumulation would give, and the tolerance is relative 1e-3.
ScalarType compute_type(ScalarType type) {
  return (type == ScalarType::Float16 || type == ScalarType::BFloat16) ? ScalarType::Float32 : type;
}

Tensor as_type(const Tensor& x, ScalarType type) { return x.dtype() == type ? x : x.cast(type); }

// (B, S, H·D) → (B, H, S, D): the 3-D layout packs the heads into the hidden axis.
Tensor split_heads(const OnnxNode& node, const Tensor& x, int64_t heads, const char* what) {
  if (heads <= 0) node.fail(std::string("3-D inputs need a positive ") + what);
  if (x.dim(2) % heads != 0)
    node.fail(std::string("hidden size ") + std::to_string(x.dim(2)) + " is not divisible by " + what + " = " +
              std::to_string(heads));
  return x.reshape({x.dim(0), x.dim(1), heads, x.dim(2) / heads}).permute({0, 2, 1, 3});
}

// Softmax over the last axis that gives zeros (not NaN) for a row whose every score is -inf (a
// fully masked query): the row max is then -inf and x − max would be NaN, so it is replaced by
// 0, and the zero denominator by 1.
Tensor masked_softmax(const Tensor& x) {
  Tensor zero = Tensor::scalar(0.0, x.dtype());
  Tensor row_max = x.max({-1}, true);
  Tensor safe_max = row_max.eq(Tensor::scalar(kNegInf, x.dtype())).where(zero, row_max);
  Tensor e = (x - safe_max).exp();
  Tensor denominator = e.sum({-1}, true);
  return e / denominator.eq(zero).where(Tensor::scalar(1.0, x.dtype()), denominator);
}

// The ONNX TensorProto data types softmax_precision may name, mapped to what kiln computes in.
ScalarType softmax_type(const OnnxNode& node, ScalarType work) {
  if (!node.has_attribute("softmax_precision")) return work;
  int64_t precision = node.attr_int("softmax_precision");
  switch (precision) {
    case 1:   // FLOAT
    case 10:  // FLOAT16: computed in f32 at least (more precise than asked, never less)
    case 16:  // BFLOAT16: same
      return work == ScalarType::Float64 ? work : ScalarType::Float32;
    case 11:  // DOUBLE
      return ScalarType::Float64;
    default:
      node.fail("unsupported: softmax_precision " + std::to_string(precision));
  }
}

// Attention (opset 23; opset 24 adds nonpad_kv_seqlen). Inputs: Q, K, V, attn_mask, past_key,
// past_value, nonpad_kv_seqlen. Outputs: Y, present_key, present_value, qk_matmul_output.
Outputs attention(const OnnxNode& node) {
  const Tensor& q_in = node.input(0);
  const Tensor& k_in = node.input(1);
  const Tensor& v_in = node.input(2);
  int64_t rank = q_in.ndim();
  if (rank != 3 && rank != 4) node.fail("unsupported: Q of rank " + std::to_string(rank) + " (3 or 4 expected)");
  if (k_in.ndim() != rank || v_in.ndim() != rank) node.fail("Q, K and V must have the same rank");
  ScalarType io_type = q_in.dtype();
  if (!is_floating(io_type)) node.fail("Q must be a floating-point tensor");

  int64_t mode = node.attr_int("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3) node.fail("unsupported: qk_matmul_output_mode " + std::to_string(mode));
  double softcap = node.attr_float("softcap", 0.0);
  // The reference only caps for a positive value; a negative one has no defined meaning.
  if (softcap < 0.0) node.fail("unsupported: negative softcap");
  bool is_causal = node.attr_int("is_causal", 0) != 0;

  Tensor q = q_in, k = k_in, v = v_in;
  if (rank == 3) {
    q = split_heads(node, q, node.attr_int("q_num_heads", 0), "q_num_heads");
    k = split_heads(node, k, node.attr_int("kv_num_heads", 0), "kv_num_heads");
    v = split_heads(node, v, node.attr_int("kv_num_heads", 0), "kv_num_heads");
  } else {
    // 4-D inputs carry the head counts in their shapes; attributes, if given, must agree.
    if (node.has_attribute("q_num_heads") && node.attr_int("q_num_heads") != q.dim(1))
      node.fail("q_num_heads does not match Q's head axis");
    if (node.has_attribute("kv_num_heads") && node.attr_int("kv_num_heads") != k.dim(1))
      node.fail("kv_num_heads does not match K's head axis");
  }
  int64_t batch = q.dim(0), q_heads = q.dim(1), q_len = q.dim(2), head_size = q.dim(3);
  int64_t kv_heads = k.dim(1);
  if (k.dim(3) != head_size) node.fail("Q and K head sizes differ");
  if (v.dim(1) != kv_heads || v.dim(2) != k.dim(2)) node.fail("K and V shapes do not agree");

  // The KV cache: present = concat(past, new) along the sequence axis, in the input dtype.
  int64_t past_len = 0;
  if (node.has_input(4) != node.has_input(5)) node.fail("past_key and past_value must be given together");
  if (node.has_input(4)) {
    past_len = node.input(4).dim(2);
    k = Tensor::concat({as_type(node.input(4), k.dtype()), k}, 2);
    v = Tensor::concat({as_type(node.input(5), v.dtype()), v}, 2);
  }
  Tensor present_key = k, present_value = v;
  int64_t kv_len = k.dim(2);

  ScalarType work = compute_type(io_type);
  q = as_type(q, work);
  k = as_type(k, work);
  v = as_type(v, work);

  // Grouped-query attention: each KV head serves q_heads / kv_heads consecutive query heads
  // ([h0, h0, h1, h1, …]); the expand is a view, so nothing is copied until the matmul reads it.
  if (q_heads != kv_heads) {
    if (kv_heads <= 0 || q_heads % kv_heads != 0)
      node.fail("q_num_heads (" + std::to_string(q_heads) + ") is not a multiple of kv_num_heads (" +
                std::to_string(kv_heads) + ")");
    int64_t group = q_heads / kv_heads;
    auto repeat_heads = [&](const Tensor& t) {
      return t.unsqueeze(2)
          .expand({batch, kv_heads, group, t.dim(2), t.dim(3)})
          .reshape({batch, q_heads, t.dim(2), t.dim(3)});
    };
    k = repeat_heads(k);
    v = repeat_heads(v);
  }

  double scale = node.has_attribute("scale") ? node.attr_float("scale")
                                              : 1.0 / std::sqrt(static_cast<double>(head_size));
  Tensor qk = (q * Tensor::scalar(scale, work)).matmul(k.transpose(-2, -1));  // (B, Hq, S, L)
  Tensor raw_qk = qk;

  // Softcap comes before the mask so that -inf mask entries stay -inf (capping them would leak
  // probability to masked keys), as the reference does.
  Tensor capped = qk;
  if (softcap > 0.0) capped = (qk / Tensor::scalar(softcap, work)).tanh() * Tensor::scalar(softcap, work);

  // The additive bias: attn_mask, causal frontier and key padding, each -inf where a key is out.
  std::vector<Tensor> biases;
  Tensor zero = Tensor::scalar(0.0, work), neg_inf = Tensor::scalar(kNegInf, work);
  if (node.has_input(3)) {
    Tensor mask = node.input(3);
    Tensor bias = mask.dtype() == ScalarType::Bool ? mask.where(zero, neg_inf) : as_type(mask, work);
    // A mask shorter than the total KV length (the new keys of a cached step) leaves the rest
    // masked out.
    int64_t short_by = kv_len - bias.dim(-1);
    if (short_by < 0) node.fail("attn_mask is longer than the key sequence");
    if (short_by > 0) {
      std::vector<int64_t> pads(2 * static_cast<size_t>(bias.ndim()), 0);
      pads.back() = short_by;
      bias = bias.pad(pads, PadMode::Constant, kNegInf);
    }
    biases.push_back(bias);
  }
  bool has_nonpad = node.opset() >= 24 && node.has_input(6);
  if (node.opset() < 24 && node.has_input(6)) node.fail("nonpad_kv_seqlen needs opset 24");
  Tensor nonpad;
  if (has_nonpad) {
    nonpad = as_type(node.input(6), ScalarType::Int64).reshape({batch, 1, 1, 1});
  }
  if (is_causal) {
    // Bottom-right aligned: query i (within this block) sees key j iff j <= i + offset, where
    // offset counts the valid keys before the block: the cache length, or per batch
    // nonpad_kv_seqlen − S for an external (static) cache.
    Tensor rows = Tensor::arange(q_len).reshape({q_len, 1});
    Tensor cols = Tensor::arange(kv_len).reshape({1, kv_len});
    Tensor limit = rows + static_cast<double>(past_len);
    if (has_nonpad && !node.has_input(4)) limit = rows + (nonpad - Tensor::scalar(static_cast<double>(q_len), ScalarType::Int64));
    biases.push_back(cols.le(limit).where(zero, neg_inf));
  }
  if (has_nonpad) {
    Tensor cols = Tensor::arange(kv_len).reshape({1, 1, 1, kv_len});
    biases.push_back(cols.lt(nonpad).where(zero, neg_inf));
  }

  Tensor scores = capped;
  for (const Tensor& bias : biases) scores = scores + bias;

  ScalarType soft = softmax_type(node, work);
  Tensor probabilities = as_type(masked_softmax(as_type(scores, soft)), work);
  Tensor y = probabilities.matmul(v);  // (B, Hq, S, Dv)
  if (rank == 3) y = y.permute({0, 2, 1, 3}).reshape({batch, q_len, q_heads * y.dim(3)});

  // Outputs in order: Y, present_key, present_value, the QK tap; the node declares how many it wants.
  size_t output_count = node.output_count();
  Outputs outputs{as_type(y, io_type)};
  if (output_count >= 3) {
    outputs.push_back(present_key);
    outputs.push_back(present_value);
  }
  // The 4th output taps the score pipeline in its (opset 24) order: 0 the scaled QK product,
  // 1 after softcap, 2 after the mask is added, 3 after softmax.
  if (output_count >= 4) {
    Tensor tapped = mode == 0 ? raw_qk : mode == 1 ? capped : mode == 2 ? scores : probabilities;
    outputs.push_back(as_type(tapped, io_type));
  }
  return outputs;
}

// RotaryEmbedding (opset 23): rotates pairs of features of each head by position-dependent
// angles given as cos/sin caches. Input (B, S, H·D) with num_heads, or (B, H, S, D).
Outputs rotary_embedding(const OnnxNode& node) {
  const Tensor& input = node.input(0);
  int64_t rank = input.ndim();
  if (rank != 3 && rank != 4) node.fail("unsupported: input of rank " + std::to_string(rank) + " (3 or 4 expected)");
  ScalarType work = compute_type(input.dtype());
  Tensor x = as_type(input, work);
  // Work in (B, S, H, D) so the caches, indexed by (batch, position), broadcast over heads.
  if (rank == 4) {
    x = x.permute({0, 2, 1, 3});
  } else {
    int64_t heads = node.attr_int("num_heads", 0);
    if (heads <= 0) node.fail("3-D input needs a positive num_heads");
    if (x.dim(2) % heads != 0) node.fail("hidden size is not divisible by num_heads");
    x = x.reshape({x.dim(0), x.dim(1), heads, x.dim(2) / heads});
  }
  int64_t head_size = x.dim(3);
  int64_t rotary_dim = node.attr_int("rotary_embedding_dim", 0);
  if (rotary_dim == 0) rotary_dim = head_size;
  if (rotary_dim < 0 || rotary_dim > head_size || rotary_dim % 2 != 0)
    node.fail("unsupported: rotary_embedding_dim " + std::to_string(rotary_dim) + " for head size " +
              std::to_string(head_size));
  int64_t half = rotary_dim / 2;
  bool interleaved = node.attr_int("interleaved", 0) != 0;

  Tensor cos = as_type(node.input(1), work), sin = as_type(node.input(2), work);
  // With position_ids the caches are tables (max_position, D/2) looked up per token; without,
  // they are already (B, S, D/2).
  if (node.has_input(3)) {
    Tensor positions = as_type(node.input(3), ScalarType::Int64);
    cos = cos.take(positions, 0);
    sin = sin.take(positions, 0);
  }
  if (cos.ndim() != 3 || cos.dim(-1) != half || sin.shape() != cos.shape())
    node.fail("cos/sin caches must give (batch, sequence, rotary_embedding_dim / 2) values");
  cos = cos.unsqueeze(2);
  sin = sin.unsqueeze(2);

  Tensor rotated = x.slice(3, 0, rotary_dim);
  // Pairs are (2i, 2i+1) when interleaved, else (i, i + D/2).
  Tensor x1 = interleaved ? rotated.slice(3, 0, rotary_dim, 2) : rotated.slice(3, 0, half);
  Tensor x2 = interleaved ? rotated.slice(3, 1, rotary_dim, 2) : rotated.slice(3, half, rotary_dim);
  Tensor real = cos * x1 - sin * x2;
  Tensor imag = sin * x1 + cos * x2;
  if (interleaved) {
    rotated = Tensor::stack({real, imag}, 4).reshape({x.dim(0), x.dim(1), x.dim(2), rotary_dim});
  } else {
    rotated = Tensor::concat({real, imag}, 3);
  }
  Tensor y = rotary_dim < head_size ? Tensor::concat({rotated, x.slice(3, rotary_dim, head_size)}, 3) : rotated;
  y = rank == 4 ? y.permute({0, 2, 1, 3}) : y.reshape(input.shape());
  return {as_type(y, input.dtype())};
}

}  // namespace

void register_attention_ops(OpRegistry& registry) {
  // Opset 24 only adds the nonpad_kv_seqlen input, which the same builder reads by opset.
  registry.add("Attention", attention, 23);
  registry.add("RotaryEmbedding", rotary_embedding, 23);
}

}  // namespace kiln::onnx_import
