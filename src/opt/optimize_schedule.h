// The Opt stage of a compile: each kernel of a schedule gets its Opt list from a tuning database
// (`kiln tune`, tuning_db.h) when the database has the kernel, and from the heuristics
// (heuristics.h) otherwise; the list is applied to the kernel's AST.
#pragma once

#include <string>
#include <vector>

#include "codegen/target.h"
#include "opt/opt.h"
#include "opt/tuning_db.h"
#include "schedule/schedule.h"

namespace kiln {

struct OptimizeOptions {
  // Kernels found here (by tuning_key(ast, target_id)) get the database's Opts. Null: heuristics only.
  const TuningDb* tuning = nullptr;
  std::string target_id;  // the key's target: cpu_target_id() for the host CPU; required with `tuning`
};

struct OptimizeReport {
  size_t kernels = 0;        // kernels of the schedule
  size_t from_tuning = 0;    // of which the tuning database chose the Opts
  size_t remainder_kernels = 0;  // kernels added to run the rows a row block leaves (row_remainders.h)
  size_t amx_kernels = 0;        // kernels whose bf16 products run on AMX tiles (amx_tiles.h)
};

// Chooses and applies every kernel's Opts (none at all when KILN_OPT=0, whether or not a database is
// given: the switch is for bisecting wrong results). KILN_DEBUG>=3 prints each choice and where it
// came from. A database entry whose Opts do not apply to its kernel is a TuningDbError naming the
// database, the entry's line and the kernel: a stale or edited database is never silently ignored.
OptimizeReport optimize_schedule(Schedule& schedule, const TargetCaps& caps, const OptimizeOptions& options = {});

// `kernel` with `opts` applied to its (unoptimised) AST: the Opt list, the new AST (renamed with the
// hash of its own AST, so it never shares a symbol with another variant) and its parallel extent.
// Throws InvalidOpt when an Opt does not fit.
void apply_kernel_opts(ScheduledKernel& kernel, const std::vector<Opt>& opts);

}  // namespace kiln
