// The pipeline's kernel half: lowering passes, the kernel cache and CPU code generation.
#include "passes/pipeline.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <unordered_map>

#include "codegen/kernel_cache.h"
#include "codegen/llvm/next_tile_prefetch.h"
#include "codegen/target.h"
#include "compiler_source_hash.h"
#include "ir/printer.h"
#include "opt/dot_products.h"
#include "opt/expand.h"
#include "passes/symbolic.h"
#include "passes/transcendental.h"
#include "rewrite/graph_rewrite.h"
#include "schedule/schedule.h"
#include "support/debug.h"
#include "support/error.h"

namespace kiln {

UOpPtr lower_kernel(const UOpPtr& ast) {
  UOpPtr lowered = decompose_transcendentals(ast);
  lowered = simplify(expand_unrolls(lowered));
  return vectorize_upcast(lowered);
}

namespace {

// Kernels loaded into this process, by symbol: the JIT may define each symbol once, and a kernel
// compiled for one realize is reused by the next. Each symbol keeps the hash of the AST it was
// compiled from: kernel names carry their AST's hash, so a symbol met again with another AST is a
// caller's naming bug (a test's hand-made names), which would otherwise run the old kernel silently.
struct LoadedKernels {
  struct Entry {
    KernelFunction function;
    uint64_t ast_hash;
  };
  std::mutex mutex;
  std::unordered_map<std::string, Entry> functions;
};

LoadedKernels& loaded_kernels() {
  static LoadedKernels* kernels = new LoadedKernels();  // never destroyed: JIT code outlives statics
  return *kernels;
}

}  // namespace

std::string compile_cpu_kernel_object(const ScheduledKernel& kernel, bool* from_cache, const CpuTarget* target) {
  const TargetCaps& caps = cpu_target_caps(target);
  SimplifyMemo memo;  // lowering re-derives the same strides and steps
  const std::string& symbol = kernel.name();
  if (debug_level() >= 5) debug_print(str_cat("kernel AST ", symbol, ":\n", print_graph(kernel.ast), ""));
  UOpPtr lowered = use_dot_products(lower_kernel(kernel.ast), caps.dot_product_bytes / 4);
  // Runners pass kernel.variables' values in that order and the renderer reads the variables it
  // finds, by name: a variable that lowering simplified away would shift the others.
  KILN_ASSERT(kernel_variables(lowered) == kernel.variables,
              str_cat("kernel ", symbol, ": lowering changed the kernel's size variables"));
  CacheKey key;
  key.ast_hash = lowered->hash();
  key.ast_text = print_graph(lowered);
  key.target = str_cat(cpu_target_id(target), ";", next_tile_prefetch_setting(caps.l2_bytes));
  // The version alone would let a rebuilt compiler load objects from an older build.
  key.version = str_cat(KILN_VERSION_STRING, "+", KILN_COMPILER_SOURCE_HASH);
  KernelCache& cache = KernelCache::instance();
  std::optional<std::string> object = cache.load(key);
  if (from_cache != nullptr) *from_cache = object.has_value();
  if (!object) {
    object = cpu_compile(lowered, target);
    cache.store(key, *object);
  }
  return std::move(*object);
}

int64_t kernel_minimum_chunk(const ScheduledKernel& kernel) {
  constexpr double kWorkPerChunk = 1 << 15;  // flops + bytes
  // A symbolic extent counts at its maximum, as the estimates do (they assume the largest sizes).
  int64_t extent = kernel.parallel_extent.max();
  double per_index = (kernel.estimated_flops + kernel.estimated_bytes) / static_cast<double>(extent);
  if (per_index <= 0) return extent;
  return std::max<int64_t>(1, static_cast<int64_t>(kWorkPerChunk / per_index));
}

LoadedKernel compile_cpu_kernel(const ScheduledKernel& kernel) {
  const std::string& symbol = kernel.name();
  LoadedKernels& loaded = loaded_kernels();
  LoadedKernel result;
  const uint64_t ast_hash = kernel.ast->hash();
  auto already_loaded = [&] {
    auto found = loaded.functions.find(symbol);
    if (found == loaded.functions.end()) return false;
    if (found->second.ast_hash != ast_hash)
      throw_internal_error(str_cat("kernel ", symbol, " was loaded earlier for another AST: each kernel name must identify its AST"));
    result.function = found->second.function;
    result.reused = true;
    return true;
  };
  {
    std::lock_guard lock(loaded.mutex);
    if (already_loaded()) return result;
  }
  // Compiled without the lock, so that threads compiling different kernels run side by side; two
  // threads that compile the same symbol at once both compile it, and the first to load it wins.
  auto start = std::chrono::steady_clock::now();
  std::string object = compile_cpu_kernel_object(kernel, &result.from_cache);
  std::lock_guard lock(loaded.mutex);
  if (already_loaded()) return result;
  result.function = cpu_load(object, symbol);
  loaded.functions.emplace(symbol, LoadedKernels::Entry{result.function, ast_hash});
  result.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace kiln
