#include "codegen/llvm/strided_gather.h"

namespace kiln {

namespace {

// index = term + constant, or index + 0 when it has no constant term.
std::pair<UOpPtr, int64_t> split_constant(const UOpPtr& index) {
  if (index->op() == Ops::ADD && index->src(1)->is_const())
    return {index->src(0), static_cast<int64_t>(index->src(1)->const_int())};
  if (index->op() == Ops::ADD && index->src(0)->is_const())
    return {index->src(1), static_cast<int64_t>(index->src(0)->const_int())};
  return {index, 0};
}

bool is_gatherable_load(const UOp& load) {
  if (load.op() != Ops::LOAD || load.dtype().count() != 1 || load.dtype().is_bool() || load.dtype().is_pointer())
    return false;
  int bytes = load.dtype().scalar_bytes();
  if (bytes != 4 && bytes != 8) return false;
  const UOp& index = *load.src(0);
  if (index.op() != Ops::INDEX || index.src(0)->dtype().addrspace() != AddrSpace::Global) return false;
  if (index.src(1)->dtype().count() != 1) return false;
  if (index.src_count() == 3 && (index.src(2)->dtype().count() != 1 || load.src_count() != 2)) return false;
  return true;
}

bool reads_a_variable(const UOpPtr& node) {
  for (const UOp* source : toposort(node))
    if (source->op() == Ops::DEFINE_VAR) return true;
  return false;
}

// The lanes' valids as `term + offset_k < bound` (LaneBoundCompare), if every lane has one of
// that form with the same term and bound, and the bound reads a size variable.
std::optional<LaneBoundCompare> match_lane_bound_compare(const std::vector<const UOp*>& loads) {
  LaneBoundCompare compare;
  for (const UOp* load : loads) {
    const UOp& index = *load->src(0);
    if (index.src_count() != 3 || index.src(2)->op() != Ops::CMPLT) return std::nullopt;
    const UOpPtr& valid = index.src(2);
    if (!valid->src(0)->dtype().is_int() || valid->src(0)->dtype().count() != 1) return std::nullopt;
    auto [term, offset] = split_constant(valid->src(0));
    if (compare.offsets.empty()) {
      compare.term = term;
      compare.bound = valid->src(1);
    } else if (term != compare.term || valid->src(1) != compare.bound) {
      return std::nullopt;
    }
    compare.offsets.push_back(offset);
  }
  if (!reads_a_variable(compare.bound)) return std::nullopt;
  return compare;
}

}  // namespace

std::optional<StridedGather> match_strided_gather(const UOp& vectorize) {
  if (vectorize.op() != Ops::VECTORIZE || vectorize.src_count() < 2) return std::nullopt;
  StridedGather gather;
  std::vector<int64_t> offsets;
  for (const UOpPtr& lane : vectorize.srcs()) {
    if (!is_gatherable_load(*lane)) return std::nullopt;
    const UOp& index = *lane->src(0);
    auto [term, offset] = split_constant(index.src(1));
    if (gather.loads.empty()) {
      gather.loads_from = index.src(0).get();
      gather.base = term;
    } else if (index.src(0).get() != gather.loads_from || term != gather.base ||
               lane->dtype() != gather.loads.front()->dtype()) {
      return std::nullopt;
    }
    gather.loads.push_back(lane.get());
    offsets.push_back(offset);
  }
  gather.first = offsets[0];
  gather.stride = offsets[1] - offsets[0];
  if (gather.stride < 2 || gather.stride > max_gather_stride) return std::nullopt;
  for (size_t lane = 1; lane < offsets.size(); ++lane)
    if (offsets[lane] - offsets[lane - 1] != gather.stride) return std::nullopt;
  gather.valids = match_lane_bound_compare(gather.loads);
  return gather;
}

}  // namespace kiln
