// A plan loaded from bytes for the length of a test (the OpenCL plan tests): the load must succeed
// (the test stops with libkiln's message otherwise), and the plan is freed with the object.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "kiln/kiln.h"

namespace kiln::testing {

struct LoadedPlan {
  kiln_plan* plan = nullptr;
  explicit LoadedPlan(const std::string& bytes) {
    REQUIRE_MESSAGE(kiln_plan_load_buffer(bytes.data(), bytes.size(), &plan) == KILN_OK, std::string(kiln_error_message()));
  }
  ~LoadedPlan() { kiln_plan_free(plan); }
  LoadedPlan(const LoadedPlan&) = delete;
  LoadedPlan& operator=(const LoadedPlan&) = delete;
};

}  // namespace kiln::testing
