// Padded copies and concatenations stored part by part into their buffers (Rangeifier's
// padded_store_of and concat_stores_of): the value is computed straight into its place in the
// buffer, and the border (or the concatenation's other parts) by kernels of their own.
#include "schedule/rangeifier.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/build.h"
#include "passes/symbolic.h"
#include "schedule/copy_elision.h"
#include "schedule/order_output_axes.h"
#include "schedule/reduce_collapse.h"
#include "schedule/reduce_factors.h"
#include "schedule/schedule.h"
#include "schedule/split_reduce_ranges.h"
#include "support/debug.h"
#include "support/error.h"
#include "support/hash.h"
#include "tensor/tensor_data.h"

namespace kiln::rangeify {

// A padded copy of a computed value, CONTIGUOUS(PAD(S)) where S (or the value S copies, when S is
// itself a CONTIGUOUS) is computed and read by nothing else: its PaddedStore, or none when
// the copy is an ordinary kernel. Such a copy is built as two kernels that store into the padded
// buffer, the value into its interior and zeros into its border (build_padded_interior and
// build_padded_border), so S never gets a buffer of its own and the interior's stores carry no
// padding masks. A conv's padded input is the common case (Tensor::conv): the activation before
// it was stored by one kernel and copied with its border by a second, a pass over memory as
// long as the depthwise conv that reads it (MobileNetV2's 96-channel 112x112 stage: 0.46 ms of
// copy for a 0.49 ms conv).
//
// The copy may also transpose: CONTIGUOUS(PERMUTE(PAD(S))), a conv's channels-last padded input
// (Tensor::conv). S is then computed in the buffer's order, so a conv that produces it stores
// its filters contiguously instead of one NCHW plane per lane, and the transposing copy (3 GB/s,
// scattered stores) goes away.
std::optional<Rangeifier::PaddedStore> Rangeifier::padded_store_of(const UOp* node) {
  if (node->op() != Ops::CONTIGUOUS || output_nodes_.contains(node)) return std::nullopt;
  const UOp* pad = node->src(0).get();
  std::vector<int64_t> order;
  if (pad->op() == Ops::PERMUTE && consumers_[pad].size() == 1) {
    order = pad->arg_list();
    pad = pad->src(0).get();
  }
  if (pad->op() != Ops::PAD || consumers_[pad].size() != 1) return std::nullopt;
  // Outer sizes may be symbolic (a CNN's batch, an image's height); the pads are known, and so is
  // the row (below).
  for (int64_t bound : pad->arg_list())
    if (!decode_dim(bound).is_known()) return std::nullopt;
  const UOp* value = pad->src(0).get();
  if (consumers_[value].size() != 1 || buffer_of_.contains(value) || output_nodes_.contains(value)) return std::nullopt;
  if (value->op() == Ops::CONTIGUOUS) {
    value = value->src(0).get();
    if (consumers_[value].size() != 1 || buffer_of_.contains(value) || output_nodes_.contains(value)) return std::nullopt;
  }
  if (value->op() == Ops::BUFFER || computes_nothing(value)) return std::nullopt;  // a plain copy: nothing to save
  const Dims& interior = shapes_.of(pad->src(0).get());
  if (interior.empty()) return std::nullopt;
  if (order.empty()) {
    order.resize(interior.size());
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  // Rows of whole 64-byte lines only. Stored at a padded row pitch, the value's rows can no longer
  // merge into one long vector axis; a row of 56 or 14 floats then ends in a part vector, and the
  // producer lost what the copy cost (MobileNetV2's 1x1 convs at 56x56 and 14x14 took 30-50 %
  // longer, while its 112-wide stage, 7 vectors a row, ran as fast as before). A row of symbolic
  // length (an image of any width) is a whole number of lines at few of its sizes; it takes the
  // padded stores where even its shortest row is long (kSymbolicPaddedRowLines), so that the part
  // vector at its end is a small share of it. DeepLabV3 over images of 224 to 512, one thread,
  // its 112-to-256-wide stage stored padded: at 224 the copy's 0.23 ms went for 0.02 more in
  // its producer (the plan 1.16 -> 1.08x its fixed twin), at 512 2.3 ms for 0.5 (1.02 -> 0.98x);
  // its 56-wide stages stored padded as well gave back half of the gain at 224 in their producers.
  const Dim& row = interior[static_cast<size_t>(order.back())];
  int64_t row_bytes = (row.is_known() ? row.value() : row.min()) * node->dtype().scalar_bytes();
  if (row.is_known() ? row_bytes % kLineBytes != 0 : row_bytes < kSymbolicPaddedRowLines * kLineBytes)
    return std::nullopt;
  return PaddedStore{pad, value, std::move(order)};
}

// Whether `node` is true everywhere: a true constant seen through reshapes and broadcasts (the
// masks Tensor::concat selects its inputs with are PADs of such a value).
bool Rangeifier::true_everywhere(const UOp* node) {
  while (node->op() == Ops::RESHAPE || node->op() == Ops::EXPAND || node->op() == Ops::PERMUTE) node = node->src(0).get();
  if (node->op() != Ops::CONST || !node->dtype().is_bool()) return false;
  const bool* value = std::get_if<bool>(&node->arg());  // (a constant folded elsewhere may hold an integer)
  return value != nullptr && *value;
}

std::optional<std::vector<Rangeifier::PaddedStore>> Rangeifier::concat_stores_of(const UOp* node) {
  if (env_integer("KILN_CONCAT_STORES", 1) == 0) return std::nullopt;
  const UOp* chain = node->op() == Ops::CONTIGUOUS ? node->src(0).get() : node;
  if (chain->op() != Ops::WHERE || (chain != node && consumers_[chain].size() != 1)) return std::nullopt;
  // Axes before the concatenated one may be symbolic (a CNN's batch); that axis and the rest of
  // each row are known (checked below).
  const Dims& shape = shapes_.of(node);
  std::vector<PaddedStore> parts;
  std::vector<int64_t> identity(shape.size());
  std::iota(identity.begin(), identity.end(), int64_t{0});
  auto add_part = [&](const UOp* pad) {
    if (pad->op() != Ops::PAD || consumers_[pad].size() != 1 || pad->arg_list().size() != 2 * shape.size()) return false;
    for (int64_t bound : pad->arg_list())
      if (!decode_dim(bound).is_known()) return false;
    parts.push_back(PaddedStore{pad, pad->src(0).get(), identity});
    return true;
  };
  const UOp* rest = chain;
  while (rest->op() == Ops::WHERE) {
    if (rest != chain && consumers_[rest].size() != 1) return std::nullopt;
    const UOp* mask = rest->src(0).get();
    const UOp* chosen = rest->src(1).get();
    if (mask->op() != Ops::PAD || chosen->op() != Ops::PAD || mask->arg_list() != chosen->arg_list() ||
        !true_everywhere(mask->src(0).get()) || !add_part(chosen))
      return std::nullopt;
    rest = rest->src(2).get();
  }
  if (!add_part(rest) || parts.size() < 2) return std::nullopt;
  // One padded axis, the same for every part, whose intervals tile it in order of the chain.
  std::optional<size_t> axis;
  std::vector<std::pair<int64_t, int64_t>> spans;  // [begin, end) along the axis
  for (const PaddedStore& part : parts) {
    const auto& pads = part.pad->arg_list();
    for (size_t a = 0; a < shape.size(); ++a) {
      int64_t before = decode_dim(pads[2 * a]).value(), after = decode_dim(pads[2 * a + 1]).value();
      if (before == 0 && after == 0) continue;
      if (before < 0 || after < 0 || (axis && *axis != a) || !shape[a].is_known()) return std::nullopt;
      axis = a;
      spans.emplace_back(before, shape[a].value() - after);
    }
  }
  if (!axis || spans.size() != parts.size()) return std::nullopt;
  std::sort(spans.begin(), spans.end());
  int64_t next = 0;
  for (auto [begin, end] : spans) {
    if (begin != next || end <= begin) return std::nullopt;
    next = end;
  }
  if (next != shape[*axis].value()) return std::nullopt;
  int64_t row = 1;
  for (size_t a = *axis + 1; a < shape.size(); ++a) {
    if (!shape[a].is_known()) return std::nullopt;
    row *= shape[a].value();
  }
  if (row < kConcatRow) return std::nullopt;
  return parts;
}

// The zeros around a padded store's interior, one kernel per padded axis: it loops over that
// axis's pad positions only (before and after the interior) and over every other axis in full,
// so it stores nothing twice per axis, loads nothing and needs no mask. Run every time (the arena
// bytes under the border belong to other buffers between runs). One kernel over the whole padded
// shape with a masked store ran scalar: 3-4x the copy it replaced on 16x16 images.
void Rangeifier::build_padded_border(const UOp* node, const PaddedStore& padded, int output_buffer) {
  const Dims& shape = shapes_.of(node);
  const Dims& interior = shapes_.of(padded.pad->src(0).get());
  const auto& pads = padded.pad->arg_list();
  DType type = node->dtype();
  UOpPtr zero = zero_of(type);
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    auto source_axis = static_cast<size_t>(padded.order[axis]);
    int64_t before = decode_dim(pads[2 * source_axis]).value(), after = decode_dim(pads[2 * source_axis + 1]).value();
    if (before + after == 0) continue;
    Dims faces = shape;
    faces[axis] = Dim(before + after);
    if (dims_numel(faces).max() == 0) continue;
    KernelState kernel = start_kernel(node, output_buffer);
    std::string name;
    Index index = output_ranges(faces, name);
    // Position p of the faces: p before the interior, or past it.
    UOpPtr position = index[axis];
    UOpPtr length = interior[source_axis].expression();  // (a CONST when known)
    if (before == 0) {
      index[axis] = position + length;
    } else if (after != 0) {
      index[axis] = where(lt(position, before), position, position + length);
    }
    add_kernel(kernel, node, store_into(kernel, output_buffer, flatten_index(index, shape), zero), name);
  }
}

// The padded store's interior: the value computed over its own shape (loops in the buffer's
// order), stored at the pad's offsets.
void Rangeifier::build_padded_interior(const UOp* node, const PaddedStore& padded, int output_buffer) {
  const Dims& shape = shapes_.of(node);
  const Dims& interior = shapes_.of(padded.pad->src(0).get());
  if (dims_numel(interior).max() == 0) return;
  KernelState kernel = start_kernel(node, output_buffer);
  Dims stored_interior;
  for (int64_t source_axis : padded.order) stored_interior.push_back(interior[static_cast<size_t>(source_axis)]);
  std::string name;
  Index index = output_ranges(stored_interior, name);
  Index shifted, source_index(index.size());
  const auto& pads = padded.pad->arg_list();
  for (size_t i = 0; i < index.size(); ++i) {
    auto source_axis = static_cast<size_t>(padded.order[i]);
    Dim before = decode_dim(pads[2 * source_axis]);
    shifted.push_back(before.is(0) ? index[i] : index[i] + before.expression());
    source_index[source_axis] = index[i];
  }
  UOpPtr result = lower(padded.value, source_index, nullptr, false, kernel);
  // (PAD and CONTIGUOUS keep their source's dtype)
  KILN_ASSERT(result->dtype() == node->dtype(), "rangeify: a padded store's value has another dtype than its buffer");
  add_kernel(kernel, node, store_into(kernel, output_buffer, flatten_index(shifted, shape), result), name);
}

}  // namespace kiln::rangeify
