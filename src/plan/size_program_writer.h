// Size programs, the compiler's half: an index expression over DEFINE_VARs (a symbolic size) becomes
// the postfix program libkiln evaluates per run (size_program.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/uop.h"

namespace kiln::plan {

// The program computing `expression`, whose variables are numbered by `variable_numbers` (name →
// position in the run's values array). Handles CONST, DEFINE_VAR, ADD, SUB, MUL, IDIV, MOD, MAX,
// NEG and integer CASTs (sizes are int64 throughout); anything else, an unnumbered variable or a
// program over kMaxSizeProgramLength instructions is a UserError naming it. Shared subexpressions
// are written out again at each use.
std::vector<int64_t> write_size_program(const UOpPtr& expression, const std::map<std::string, int64_t>& variable_numbers);

}  // namespace kiln::plan
