# The Python environment some tests need: .venv with the `onnx` and `numpy` packages (the
# broken-model tests write their corpus of bad ONNX models with them; tests/onnx/meson.build).
# Sourced by scripts/test.sh and scripts/demo.sh after packages.sh (python3-venv comes from there).

# Creates .venv with onnx and numpy when it is missing or incomplete. Without network access the
# install fails: the half-made .venv is removed and the tests that need it are skipped (exit 77).
kiln_ensure_python_env() {
  if [ -x .venv/bin/python3 ] && .venv/bin/python3 -c "import onnx, numpy" 2>/dev/null; then
    return 0
  fi
  echo "== creating .venv (Python packages onnx, numpy for the broken-model tests)"
  if python3 -m venv .venv && .venv/bin/pip install --quiet --disable-pip-version-check onnx numpy; then
    return 0
  fi
  echo "warning: could not set up .venv; the tests that need onnx for Python will be skipped" >&2
  rm -rf .venv
}
