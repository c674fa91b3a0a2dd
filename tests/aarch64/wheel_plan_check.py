"""Runs inside the aarch64 Python under qemu (test_aarch64_wheel.sh): the kiln package installed from
the aarch64 runtime wheel loads a plan with kiln.Plan and runs it on the raw inputs plan-reference
wrote, and every output must match expected_K.bin at atol 1e-4 + rtol 1e-3 (the plan suite's rule).
Also: a plan for another architecture is refused with kiln.Error naming both architectures.
usage: wheel_plan_check.py PLAN DATA_DIR FOREIGN_PLAN"""
import os
import platform
import sys

import numpy as np

import kiln

plan_path, data_dir, foreign_plan = sys.argv[1:4]
failures = 0


def check(condition, what):
    global failures
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures += 1


check(platform.machine() == "aarch64", f"the interpreter runs as {platform.machine()}")
library = kiln._library.runtime_path()
check(library.startswith(os.path.join(os.path.dirname(kiln.__file__), "_lib")), f"libkiln comes from the wheel: {library}")
plan = kiln.Plan(plan_path)
inputs = {}
for info in plan.inputs:
    safe = "".join(c if c.isalnum() else "_" for c in info.name)
    inputs[info.name] = np.fromfile(os.path.join(data_dir, f"input_{safe}.bin"), dtype=info.dtype).reshape(info.shape)
outputs = plan.run(inputs)
for k, info in enumerate(plan.outputs):
    expected_path = os.path.join(data_dir, f"expected_{k}.bin")
    if not os.path.exists(expected_path):
        continue
    expected = np.fromfile(expected_path, dtype=info.dtype).reshape(info.shape)
    actual = outputs[info.name]
    bad = np.abs(actual - expected) > 1e-4 + 1e-3 * np.abs(expected)
    check(not bad.any(), f"output '{info.name}' {actual.shape} matches the test data "
                         f"(max abs error {float(np.max(np.abs(actual - expected))):.3g})")
try:
    kiln.Plan(foreign_plan)
    check(False, "an x86-64 plan is refused")
except kiln.Error as error:
    check("compiled for x86_64" in str(error) and "aarch64" in str(error), f"an x86-64 plan is refused: {error}")
sys.exit(1 if failures else 0)
