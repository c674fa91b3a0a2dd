// Graph substitution; see substitute.h.
#include "ir/substitute.h"

namespace kiln {

UOpPtr substitute(const UOpPtr& root, const std::unordered_map<const UOp*, UOpPtr>& replacements) {
  std::unordered_map<const UOp*, UOpPtr> rebuilt;
  for (const UOp* node : toposort(root)) {
    auto replaced = replacements.find(node);
    if (replaced != replacements.end()) {
      rebuilt[node] = replaced->second;
      continue;
    }
    std::vector<UOpPtr> sources;
    sources.reserve(node->src_count());
    for (const UOpPtr& source : node->srcs()) sources.push_back(rebuilt.at(source.get()));
    rebuilt[node] = node->with_srcs(std::move(sources));
  }
  return rebuilt.at(root.get());
}

}  // namespace kiln
