#!/usr/bin/env python3
"""The compiler's folders include only folders at or below their own layer (docs/architecture.md,
"Folders, lowest layer first"), apart from the upward includes listed in known_upward_includes.txt,
which exist today and which issue 51 is to remove.

The test fails on an upward include that is not listed (a new arrow running back up), and on a
listed one that no longer exists (so that the list only ever shrinks and stays true). It reads the
sources as text: `#include "FOLDER/…"` in src/FOLDER2/… .

usage: check_layers.py SOURCE_ROOT
"""
import glob
import os
import re
import sys

# Lowest first. codegen/target.h (TargetCaps, the target's capabilities) is vocabulary that the
# optimiser reads: it counts as the optimiser's layer.
LAYERS = ["support", "ir", "rewrite", "passes", "schedule", "opt", "codegen", "runtime", "driver", "tensor",
          "plan"]
VOCABULARY = {"codegen/target.h": "opt"}


def layer_of(include):
    if include in VOCABULARY:
        return LAYERS.index(VOCABULARY[include])
    folder = include.split("/")[0]
    return LAYERS.index(folder) if folder in LAYERS else None


def upward_includes(root):
    found = set()
    for path in sorted(glob.glob(os.path.join(root, "src", "**", "*.*"), recursive=True)):
        relative = os.path.relpath(path, root)
        if not relative.endswith((".h", ".cpp", ".c")):
            continue
        folder = relative.split(os.sep)[1]
        if folder not in LAYERS:
            continue
        for line in open(path, encoding="utf-8"):
            include = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if include is None:
                continue
            target = layer_of(include.group(1))
            if target is not None and target > LAYERS.index(folder):
                found.add(f"{relative} -> {include.group(1)}")
    return found


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    listed_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "known_upward_includes.txt")
    listed = {line.strip() for line in open(listed_path) if line.strip() and not line.startswith("#")}
    found = upward_includes(root)
    new, gone = sorted(found - listed), sorted(listed - found)
    for line in new:
        print(f"new upward include: {line} (a folder includes one above it in docs/architecture.md's order)")
    for line in gone:
        print(f"listed but no longer there: {line} (delete its line from tests/layering/known_upward_includes.txt)")
    if new or gone:
        return 1
    print(f"ok: {len(found)} known upward includes, no new one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
