// Taking loop-invariant factors out of a sum (reduce_factors.h).
#include "schedule/reduce_factors.h"

#include <algorithm>

#include "ir/build.h"

namespace kiln {
namespace {

// The leaves of the product tree at `node` (MULs of `dtype`), in order.
void collect_factors(const UOpPtr& node, DType dtype, std::vector<UOpPtr>& factors) {
  if (node->op() == Ops::MUL && node->dtype() == dtype) {
    collect_factors(node->src(0), dtype, factors);
    collect_factors(node->src(1), dtype, factors);
    return;
  }
  factors.push_back(node);
}

UOpPtr product(const std::vector<UOpPtr>& factors) {
  UOpPtr result = factors.front();
  for (size_t i = 1; i < factors.size(); ++i) result = alu(Ops::MUL, result, factors[i]);
  return result;
}

}  // namespace

UOpPtr sum_with_invariant_factors_out(DType dtype, const UOpPtr& body, const std::vector<UOpPtr>& ranges) {
  if (dtype.is_bool() || body->op() != Ops::MUL || body->dtype() != dtype) return nullptr;
  std::vector<UOpPtr> factors;
  collect_factors(body, dtype, factors);
  std::vector<UOpPtr> varying, invariant;
  for (const UOpPtr& factor : factors) {
    std::vector<const UOp*> nodes = toposort(factor);
    bool varies = std::ranges::any_of(ranges, [&](const UOpPtr& range) {
      return std::find(nodes.begin(), nodes.end(), range.get()) != nodes.end();
    });
    (varies ? varying : invariant).push_back(factor);
  }
  if (varying.empty() || invariant.empty()) return nullptr;
  std::vector<UOpPtr> sources{product(varying)};
  sources.insert(sources.end(), ranges.begin(), ranges.end());
  UOpPtr sum = UOp::make(Ops::REDUCE, dtype, std::move(sources), Ops::ADD);
  return alu(Ops::MUL, sum, product(invariant));
}

}  // namespace kiln
