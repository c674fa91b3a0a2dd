// The bad-input catalogue's harness (docs/bad-input.md): a table of cases per area, each one a
// hostile input or a misuse with the exact status and the message fragments it must produce.
// After every case the area's "still works" check runs (a good model compiles, a good plan loads
// and runs with correct outputs) so that a case that corrupts the process fails too.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace bad_input {

// What one call returned: its status and kiln_error_message() right after it.
struct Outcome {
  kiln_status status;
  std::string message;
};
Outcome outcome_of(kiln_status status);  // reads kiln_error_message() now

struct Case {
  std::string name;               // as listed in docs/bad-input.md
  kiln_status status;             // exactly this status
  std::vector<std::string> fragments;  // each must appear in the message
  std::function<Outcome()> run;
};

// The fixtures an area shares: where to write files, and the check that the process still works
// (returns "" when it does, else what is wrong).
struct Area {
  std::string name;
  std::vector<Case> cases;
  std::function<std::string()> still_works;
};

// Every area builds its table in a folder of its own (`work`, which exists).
Area onnx_area(const std::string& work);
Area plan_area(const std::string& work);
Area capi_area(const std::string& work);

// Throws std::runtime_error with `what` when `condition` is false: a broken fixture, not a case.
void require(bool condition, const std::string& what);
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);

}  // namespace bad_input
