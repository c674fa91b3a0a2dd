// The Rangeifier: the state and steps of rangeify and kernel split (rangeify.cpp, where the
// pipeline is described). Internal to src/schedule/: rangeify.cpp lowers values into kernels,
// fusion_policy.cpp decides which values get buffers of their own (the cost rule), and
// padded_stores.cpp stores a padded copy's or a concatenation's parts straight into its buffer.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "schedule/schedule.h"
#include "support/hash.h"
#include "tensor/tensor_data.h"

namespace kiln::rangeify {

// ALU ops from which elementwise work counts as expensive (the cost rule, fusion_policy.cpp).
constexpr int kExpensiveOps = 16;
// A cache line, and the widest vector of any target (16 float32 lanes).
constexpr int64_t kLineBytes = 64;
// The shortest symbolic row, in lines, that a padded store takes (Rangeifier::padded_store_of).
constexpr int64_t kSymbolicPaddedRowLines = 6;
// Inside a reduction loop, a broadcast value is recomputed once per iteration of the loop for every
// output it is broadcast over (a conv's input, once per filter and window tap): there even a short
// chain (a residual add and relu, a LayerNorm's normalise) costs more than a load.
constexpr int kExpensiveOpsInLoop = 3;

using Index = std::vector<UOpPtr>;

// Shapes here are Dims: a size may be an expression over size variables (docs/symbolic-shapes.md),
// and then so are the strides, loop ends and index math built from it.
std::vector<Dim> strides_of(const Dims& shape);

// An index constant.
UOpPtr index_const(int64_t value);

// The element offset of `index` (one expression per axis) in a contiguous buffer of `shape`.
UOpPtr flatten_index(const Index& index, const Dims& shape);

// `valid` and `condition`, where a null `valid` is always true.
UOpPtr and_valid(const UOpPtr& valid, const UOpPtr& condition);

// The cost of recomputing a value: ALU ops down to buffers and reductions (transcendentals count
// as the ~20 ops their approximations take). Capped, so the walk stays small. Without
// `count_selects`, WHERE and ops on bool (masks, comparisons) are free: only arithmetic counts.
// Nodes for which `stored` says yes are read from a buffer, like reductions.
int recompute_cost(const UOp* root, int limit = kExpensiveOps, int pad_cost = 2, bool count_selects = true,
                   const std::function<bool(const UOp*)>& stored = nullptr);

// The arithmetic in a value, without what selects and places values (WHERE, bool masks, PAD): a
// concatenation's chain of selects costs nothing here, a sigmoid its polynomial.
int arithmetic_cost(const UOp* root);

// Whether `root` computes from an arange (SPECIAL) with no buffer, CONTIGUOUS or reduction in
// between. The walk is capped: a value too large to tell is treated as not reading one.
bool reads_arange(const UOp* root);

// Whether an index expression uses a reduce loop variable (axis ids from kFirstReduceAxis).
bool varies_with_reduce_loop(const Index& index);

class Rangeifier {
 public:
  Rangeifier(const std::vector<UOpPtr>& outputs, const ScheduleOptions& options);
  Schedule take() { return std::move(schedule_); }

 private:
  struct NodeListHash {
    size_t operator()(const std::vector<const UOp*>& nodes) const {
      uint64_t h = nodes.size();
      for (const UOp* node : nodes) h = hash_mix(h, node ? node->hash() : 0);
      return h;
    }
  };
  struct KernelState {
    std::vector<int> slots;  // schedule buffer per DEFINE_GLOBAL slot
    int64_t next_reduce_axis = kFirstReduceAxis;
    // (node, index, valid, through_expand) → value: shared subgraphs are lowered once per index.
    std::unordered_map<std::vector<const UOp*>, UOpPtr, NodeListHash> memo;
    std::vector<UOpPtr> memo_keys_alive;  // the memo's keys are raw pointers: keep their nodes alive
    // The first (index, valid) each recomputed reduction or expensive value was lowered at.
    std::unordered_map<const UOp*, std::vector<const UOp*>> first_use;
    // The provenance tags of the values computed here, root first, and whether the value is a
    // reduction (see note_source).
    std::vector<std::pair<const std::string*, bool>> sources;
    const UOp* output = nullptr;  // the value this kernel stores
  };

  // The CONTIGUOUS that copies `node` as it is, if any (a plain copy before a channels-last one,
  // then the one with the smallest hash, so the choice does not depend on set order). Its buffer
  // holds node's value, so node's other consumers read it there: a conv that reads an activation
  // through a copy in another layout realises the activation first, and the residual add that
  // also reads it must not compute it again, from the start of the residual chain each time
  // (ResNet-50's stage 3 took six recomputing kernels).
  // A copy is CONTIGUOUS(node), or CONTIGUOUS(PERMUTE(node)) where node is computed (an ALU op),
  // the PERMUTE is the channels-last order (N, C, H, W) -> (N, H, W, C) and nothing else reads it:
  // a conv's channels-last copy of a 14×14 block output (Tensor::conv), which the next residual
  // add then reads through the permutation instead of a second, NCHW buffer. (Other orders and
  // view nodes might work the same way; only this case has been measured and tested.)
  // Or CONTIGUOUS(BITCAST(CAST(PERMUTE(node)))) marked as a rounded stand-in (kRoundedStandIn,
  // ir/ops.h): node's bf16 bits channels-last, which its other readers read widened back.
  static inline const std::vector<int64_t> kChannelsLastOrder{0, 2, 3, 1};
  const UOp* contiguous_copy_of(const UOp* node);
  // Whether the copy contiguous_copy_of finds is a rounded stand-in (kRoundedStandIn, ir/ops.h).
  bool rounded_stand_in_of(const UOp* node);
  static Index index_in_copy(const UOp* node, const UOp* copy, const Index& index);

  // Thrown while a kernel is built when a value must be materialised after all (see lower_uncached);
  // build_kernel starts that kernel again.
  struct RebuildKernel {};
  void count_consumers(const UOpPtr& root);

  // Whether `reduction` is materialised before any kernel is built: when its value flows, through
  // elementwise and movement ops only, into more than one place that would compute it (other
  // reductions, each a loop of its own kernel or loop nest, and outputs) — LayerNorm's mean,
  // variance and normalise each read the matmul before them, softmax's max, sum and normalise the
  // scores — or into expensive elementwise work (an epilogue that would run scalar in its tail).
  static constexpr int64_t kNestedContraction = 64;
  int64_t reduced_elements(const UOp* reduction);
  static bool bf16_product(const UOp* reduction);
  bool reaches_other_unstored_reduction(const UOp* node, const UOp* reduction);
  bool reduction_needs_own_kernel(const UOp* reduction);
  int add_buffer(ScheduledBuffer::Kind kind, DType dtype, const Dim& count);
  int materialize(const UOp* node);
  void build_kernel(const UOp* node, int output_buffer);

  // Runs `build` (which adds one kernel) until it completes: a value that turns out to be needed at
  // several indices is materialised, and the kernel is built again (RebuildKernel).
  template <class Build>
  void build_until_done(Build build) {
    while (true) {
      reduce_depth_ = 0;
      try {
        build();
        return;
      } catch (const RebuildKernel&) {
      }
    }
  }
  static KernelState start_kernel(const UOp* node, int output_buffer);
  static UOpPtr zero_of(DType type);
  static Index output_ranges(const Dims& shape, std::string& name);
  void build_kernel_once(const UOp* node, int output_buffer);

  // A padded store: the PAD, the value computed into its interior, and the order of the buffer's
  // axes (`order[i]` is the PAD's axis that the buffer's axis i holds; the identity without a
  // PERMUTE).
  struct PaddedStore {
    const UOp* pad;
    const UOp* value;
    std::vector<int64_t> order;
  };
  std::optional<PaddedStore> padded_store_of(const UOp* node);
  static bool true_everywhere(const UOp* node);

  // A concatenation stored by one kernel per input: Tensor::concat builds
  // WHERE(PAD(true, p0), PAD(S0, p0), WHERE(PAD(true, p1), PAD(S1, p1), … PAD(Sn, pn))), and its
  // kernel evaluated every arm at every element (both loads masked, then a select: YOLOX's
  // concatenations ran at 15-18 GB/s where its plain copies run at 35-60). Instead each Si is
  // computed over its own shape and stored at its offset (build_padded_interior, no border: the
  // inputs tile the result), so an input that is computed and read by nothing else (YOLOX's SiLU
  // after each branch's conv) is stored straight into the concatenation and never gets a buffer of
  // its own. The parts, or none: when `node` (or the value it copies, for a CONTIGUOUS) is not such
  // a chain, when the concatenated axis or an axis after it is symbolic (a batch before it may be),
  // when the inputs do not tile the concatenated axis, or
  // when a part's rows (the elements after that axis) are shorter than kConcatRow: a concatenation
  // along the innermost axis would become narrow strided stores.
  static constexpr int64_t kConcatRow = 16;

  // The WHERE nodes of the concatenations stored one input at a time, and the node each one's
  // buffer belongs to (its CONTIGUOUS, or the output).
  std::unordered_map<const UOp*, const UOp*> concat_root_of_;
  std::optional<std::vector<PaddedStore>> concat_stores_of(const UOp* node);
  void build_padded_border(const UOp* node, const PaddedStore& padded, int output_buffer);
  void build_padded_interior(const UOp* node, const PaddedStore& padded, int output_buffer);
  void add_kernel(KernelState& kernel, const UOp* node, const UOpPtr& store, const std::string& name);
  UOpPtr store_into(const KernelState& kernel, int buffer, const UOpPtr& at, const UOpPtr& value);
  UOpPtr wide_load_below(const UOpPtr& value, const KernelState& kernel) const;
  UOpPtr define_global(int buffer, int slot);
  UOpPtr load(const UOp* node, const Index& index, const UOpPtr& valid, KernelState& kernel);
  bool epilogue_of_stored_reduction(const UOp* node);
  static bool computes_nothing(const UOp* node);
  bool feeds_whole_reduction_and_more(const UOp* node);
  bool passes_through(const UOp* consumer) const;
  bool reduces_to_one(const UOp* reduce);
  std::unordered_set<const UOp*> kernels_reached(const UOp* node, bool& whole);
  int full_size_reads(const UOp* node);
  bool has_converted_copy(const UOp* node);
  bool must_materialize(const UOp* node, bool through_expand, const Index& index);
  UOpPtr lower(const UOp* node, const Index& index, const UOpPtr& valid, bool through_expand, KernelState& kernel);
  UOpPtr lower_uncached(const UOp* node, const Index& index, const UOpPtr& valid, bool through_expand,
                        KernelState& kernel);
  void force_store(const UOp* node);
  bool stores_narrowed(const UOp* node, bool through_expand, const Index& index);
  static bool recomputing_would_repeat_work(const UOp* node);
  UOpPtr compute(const UOp* node, const Index& index, const UOpPtr& valid, bool through_expand, KernelState& kernel);
  static void note_source(const UOp* node, KernelState& kernel);
  static std::vector<std::string> kernel_sources(const KernelState& kernel, const UOp* root);
  static void estimate_cost(ScheduledKernel& kernel);
  ScheduleOptions options_;
  ShapeMap shapes_;
  Schedule schedule_;
  std::unordered_map<const UOp*, std::unordered_set<const UOp*>> consumers_;
  std::unordered_map<const UOp*, int> buffer_of_;
  std::unordered_set<int> wide_buffers_;  // intermediate buffers holding narrow floats as f32
  std::unordered_set<const UOp*> pending_;  // outputs whose kernel is not built yet
  std::unordered_map<int64_t, int> input_buffers_;
  std::vector<UOpPtr> keep_alive_;

  // Values materialised because one kernel needed them at two indices, or several kernels need them.
  std::unordered_set<const UOp*> forced_;
  std::unordered_set<const UOp*> output_nodes_;
  std::unordered_map<const UOp*, bool> feeds_whole_reduction_;  // memo of feeds_whole_reduction_and_more
  int reduce_depth_ = 0;  // REDUCE_AXIS sources being lowered around the current node
};

}  // namespace kiln::rangeify
