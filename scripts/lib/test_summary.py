#!/usr/bin/env python3
"""Prints "N passed, M failed, K skipped" over one or more Meson testlog.json files.

usage: test_summary.py TESTLOG.json...   (Meson writes one JSON object per test to each file)
"""
import json
import sys

passed = failed = skipped = 0
for path in sys.argv[1:]:
    with open(path) as log:
        for line in log:
            result = json.loads(line).get("result")
            if result in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif result == "SKIP":
                skipped += 1
            else:
                failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
