// Replaces nodes in a graph: every occurrence of a key of `replacements` becomes its value, and the
// nodes above are rebuilt. Nodes not on a path to a replaced node are returned unchanged.
#pragma once

#include <unordered_map>

#include "ir/uop.h"

namespace kiln {

UOpPtr substitute(const UOpPtr& root, const std::unordered_map<const UOp*, UOpPtr>& replacements);

}  // namespace kiln
