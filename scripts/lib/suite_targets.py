#!/usr/bin/env python3
"""Lists what `meson test --suite S...` needs built, so that a sanitizer build compiles only that.

usage: suite_targets.py [--present] BUILD_DIR SUITE...
Prints one ninja target per line (the files of the build targets the suites' tests depend on,
relative to BUILD_DIR); nothing when no test is in those suites. With --present, prints instead the
SUITEs that have at least one test in this build (a suite another branch adds may be absent).
Used by scripts/lib/sanitize.sh.
"""
import json
import os
import subprocess
import sys


def introspect(build_dir, what):
    out = subprocess.run(["meson", "introspect", build_dir, what], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    present_only = sys.argv[1] == "--present"
    args = sys.argv[2:] if present_only else sys.argv[1:]
    build_dir, suites = args[0], set(args[1:])
    needed, present = set(), set()
    for test in introspect(build_dir, "--tests"):
        # Meson names a suite "project:suite" in the introspection data.
        matched = suites & {suite.split(":", 1)[-1] for suite in test["suite"]}
        present |= matched
        if matched:
            needed.update(test["depends"])
    if present_only:
        print("\n".join(suite for suite in args[1:] if suite in present))
        return 0
    build_root = os.path.realpath(build_dir)
    for target in introspect(build_dir, "--targets"):
        if target["id"] in needed:
            for filename in target["filename"]:
                print(os.path.relpath(filename, build_root))


sys.exit(main())
