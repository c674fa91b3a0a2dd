// KILN_DEBUG: one environment variable, read once, that sets how much the compiler prints to stderr.
// The levels follow tinygrad's DEBUG (ARCHITECTURE.md): 1 kernel counts and per-stage times, 2 one
// line per kernel run, 3 chosen optimisations, 4 generated source, 5 kernel ASTs, 6 linearised UOps,
// 7 assembly. Rewrite passes print their IR after each named step from level 5 on.
#pragma once

#include <string_view>

namespace kiln {

// The current level: KILN_DEBUG from the environment (0 when unset or not a number), unless a test
// or tool has overridden it with set_debug_level.
int debug_level();
void set_debug_level(int level);

// Prints one line to stderr, prefixed with "kiln: ". Lines from several threads do not interleave.
void debug_print(std::string_view line);

// Reads an integer environment variable; `fallback` when it is unset or malformed.
long env_integer(const char* name, long fallback);

}  // namespace kiln
