// Fuzz target: plan bytes → kiln_plan_load_buffer, then one run with fixed inputs when the plan
// loads. Mutated bytes almost always fail the content hash (or an earlier header check); this target
// covers those checks and the run of a plan that passes them. fuzz_plan_metadata.cpp re-seals the
// hash to reach the verifier behind it.
#include <cstdint>

#include "kiln/kiln.h"
#include "plan_run.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln_plan* plan = nullptr;
  if (kiln_plan_load_buffer(data, size, &plan) != KILN_OK) return 0;
  kiln::fuzz::run_with_fixed_inputs(plan);
  kiln_plan_free(plan);
  return 0;
}
