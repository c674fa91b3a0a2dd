// unmask_padded_loads (src/opt/padded_loads.h): which loads of a padded loop lose their mask, and
// that the others keep it. tests/tensor/test_symbolic_tensor.cpp runs such kernels against fixed
// ones at several sizes.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ir/build.h"
#include "opt/opt.h"
#include "opt/padded_loads.h"

namespace kiln {
namespace {

UOpPtr global(int64_t slot) { return UOp::make(Ops::DEFINE_GLOBAL, dtypes::f32.ptr(AddrSpace::Global, 256), {}, slot); }

UOpPtr store(const UOpPtr& buffer, const UOpPtr& index, const UOpPtr& value) {
  return UOp::make(Ops::STORE, dtypes::void_, {UOp::make(Ops::INDEX, buffer->dtype(), {buffer, index}), value});
}

// out[r] = x[2·r] + 1 for r below `end`: a strided read, as a strided conv's windows make.
UOpPtr strided_copy(const UOpPtr& end, std::vector<UOpPtr> extra_stores = {}) {
  UOpPtr x = global(1), out = global(0);
  UOpPtr r = range(end, 0);
  UOpPtr load = UOp::make(Ops::LOAD, dtypes::f32, {UOp::make(Ops::INDEX, x->dtype(), {x, r * 2})});
  std::vector<UOpPtr> stores{store(out, r, load + const_float(dtypes::f32, 1.0))};
  for (UOpPtr& extra : extra_stores) stores.push_back(std::move(extra));
  return UOp::make(Ops::SINK, dtypes::void_, std::move(stores), std::string("strided_copy"));
}

std::vector<const UOp*> nodes_of(const UOpPtr& kernel, Ops op) {
  std::vector<const UOp*> found;
  for (const UOp* node : toposort(kernel))
    if (node->op() == op) found.push_back(node);
  return found;
}

std::vector<UOpPtr> conjuncts(const UOpPtr& gate) {
  std::vector<UOpPtr> conditions;
  collect_conjuncts(gate, conditions);
  return conditions;
}

bool masked(const UOp* access) { return access->src(0)->src_count() == 3; }

// The padded kernel's loads and stores: PADTO(8), then the block of 8 split off and made `kind`.
UOpPtr padded_blocks(const UOpPtr& kernel, OptOp kind) {
  return apply_opts(kernel, {{OptOp::Padto, 0, 8}, {OptOp::Split, 0, 8}, {kind, 1, 8}});
}

}  // namespace

TEST_CASE("a padded loop's unrolled rows read without a mask; the stores keep theirs") {
  UOpPtr padded = padded_blocks(strided_copy(variable("n", 1, 100)), OptOp::Unroll);
  REQUIRE(nodes_of(padded, Ops::LOAD).size() == 1);
  REQUIRE(masked(nodes_of(padded, Ops::LOAD)[0]));
  UOpPtr unmasked = unmask_padded_loads(padded);
  std::vector<const UOp*> loads = nodes_of(unmasked, Ops::LOAD);
  REQUIRE(loads.size() == 1);
  CHECK_FALSE(masked(loads[0]));
  CHECK(loads[0]->src_count() == 1);  // no alternative value either
  // A padded row reads at the block's first row, chosen by a select on the rows.
  CHECK(!nodes_of(loads[0]->src(0), Ops::WHERE).empty());
  for (const UOp* store : nodes_of(unmasked, Ops::STORE)) CHECK(masked(store));
}

TEST_CASE("padded loads keep their mask on vector lanes, in fixed kernels, and where a store is not masked alike") {
  UOpPtr n = variable("n", 1, 100);
  // Lanes: a masked vector load stays contiguous, a select per lane would gather.
  UOpPtr lanes = padded_blocks(strided_copy(n), OptOp::Upcast);
  CHECK(unmask_padded_loads(lanes) == lanes);
  // Fixed sizes keep their masks (and their plans' bytes).
  UOpPtr fixed = padded_blocks(strided_copy(const_like(n, 13)), OptOp::Unroll);
  REQUIRE(masked(nodes_of(fixed, Ops::LOAD)[0]));
  CHECK(unmask_padded_loads(fixed) == fixed);
  // A second store that the padding condition does not mask: only a condition that masks every
  // store is taken (a conservative reading: that store does not depend on the padded loads here).
  UOpPtr other = global(2);
  UOpPtr two_stores = padded_blocks(strided_copy(n, {store(other, const_like(n, 0), const_float(dtypes::f32, 0.0))}),
                                    OptOp::Unroll);
  CHECK(unmask_padded_loads(two_stores) == two_stores);
  // With n possibly 0 the first row is no valid point to read at.
  UOpPtr maybe_empty = padded_blocks(strided_copy(variable("m", 0, 100)), OptOp::Unroll);
  CHECK(unmask_padded_loads(maybe_empty) == maybe_empty);
}

TEST_CASE("a load whose own mask has other conditions keeps them, read at the chosen point") {
  // out[r] = r ≥ 3 ? x[2·r - 6] : 0, as a conv's zero padding reads: the padding condition goes,
  // the window's own condition stays (with its alternative value).
  UOpPtr x = global(1), out = global(0);
  UOpPtr n = variable("n", 1, 100);
  UOpPtr r = range(n, 0);
  UOpPtr inside = lt(const_like(r, 2), r);
  UOpPtr load = UOp::make(Ops::LOAD, dtypes::f32,
                          {UOp::make(Ops::INDEX, x->dtype(), {x, r * 2 + -6, inside}), const_float(dtypes::f32, 0.0)});
  UOpPtr kernel = UOp::make(Ops::SINK, dtypes::void_, {store(out, r, load)}, std::string("shifted_copy"));
  UOpPtr unmasked = unmask_padded_loads(padded_blocks(kernel, OptOp::Unroll));
  std::vector<const UOp*> loads = nodes_of(unmasked, Ops::LOAD);
  REQUIRE(loads.size() == 1);
  REQUIRE(masked(loads[0]));
  CHECK(loads[0]->src_count() == 2);
  // None of the stores' conditions is among the load's.
  std::vector<UOpPtr> store_conditions = conjuncts(nodes_of(unmasked, Ops::STORE)[0]->src(0)->src(2));
  REQUIRE(!store_conditions.empty());
  for (const UOpPtr& condition : conjuncts(loads[0]->src(0)->src(2)))
    CHECK(std::ranges::find(store_conditions, condition) == store_conditions.end());
}

}  // namespace kiln
