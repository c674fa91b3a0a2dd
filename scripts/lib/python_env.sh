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

# Adds scikit-learn and onnxruntime to .venv (after kiln_ensure_python_env). Returns non-zero, and
# leaves .venv as it was, when they cannot be installed (no network): the demo then skips the digits
# model.
kiln_ensure_demo_python_env() {
  [ -x .venv/bin/python3 ] || return 1
  if .venv/bin/python3 -c "import sklearn, onnxruntime" 2>/dev/null; then
    return 0
  fi
  echo "== adding ${KILN_DEMO_PYTHON_PACKAGES[*]} to .venv (the demo's digits model)"
  if .venv/bin/pip install --quiet --disable-pip-version-check "${KILN_DEMO_PYTHON_PACKAGES[@]}"; then
    return 0
  fi
  echo "warning: could not install ${KILN_DEMO_PYTHON_PACKAGES[*]}; skipping the digits demo" >&2
  return 1
}

# Adds scikit-learn, skl2onnx and onnxruntime to .venv for the scikit-learn model tests. Without
# network access the install fails and .venv stays as it was: those tests are then skipped (exit 77).
kiln_ensure_sklearn_python_env() {
  [ -x .venv/bin/python3 ] || return 1
  if .venv/bin/python3 -c "import sklearn, skl2onnx, onnxruntime" 2>/dev/null; then
    return 0
  fi
  echo "== adding ${KILN_SKLEARN_TEST_PYTHON_PACKAGES[*]} to .venv (the scikit-learn model tests)"
  if .venv/bin/pip install --quiet --disable-pip-version-check "${KILN_SKLEARN_TEST_PYTHON_PACKAGES[@]}"; then
    return 0
  fi
  echo "warning: could not install ${KILN_SKLEARN_TEST_PYTHON_PACKAGES[*]}; the scikit-learn model tests will be skipped" >&2
  return 1
}
