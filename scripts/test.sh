#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test suite. Extra arguments go to `meson test`
# (for example `./scripts/test.sh --suite passes`). Ends with the line "N passed, M failed, K skipped".
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/packages.sh
source scripts/lib/python_env.sh

kiln_ensure_packages
kiln_ensure_python_env
kiln_ensure_sklearn_python_env || true
kiln_build

status=0
meson test -C build --print-errorlogs "$@" || status=$?

# Meson writes one JSON object per test to testlog.json; summarise it in the plain form.
python3 - build/meson-logs/testlog.json <<'PY'
import json, sys
passed = failed = skipped = 0
with open(sys.argv[1]) as log:
    for line in log:
        result = json.loads(line).get("result")
        if result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif result == "SKIP":
            skipped += 1
        else:
            failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
exit $status
