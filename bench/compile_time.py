#!/usr/bin/env python3
"""Cold compile time of `kiln compile`: one or more kiln builds, one or more compile thread counts.

For each model (a folder with model.onnx, or an .onnx file) and each configuration (a kiln CLI
from --kiln, repeatable, times each KILN_COMPILE_THREADS value of --threads), `kiln compile MODEL
-o PLAN` runs with the kernel cache off (KILN_CACHE=0), --repeats times, configurations taking
turns so that a change in machine load hits all of them; the minimum wall time is printed, with
each configuration's ratio to the first one. Every configuration's plan is compared byte for byte
with the first one's: a column says whether they are identical (a build whose plans differ is a
change in generated code, not only in compile time). Extra `kiln compile` options (--target cuda,
--shape ...) go after `--`.

    python bench/compile_time.py [--baseline K] [--kiln K]... [--threads 1,2] [--repeats R] MODEL... [-- OPTIONS]

--baseline names an older kiln CLI that is run once per repeat with its own defaults (an older
build may not read KILN_COMPILE_THREADS), as the first column that the others are compared with.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def model_file(path):
    return os.path.join(path, "model.onnx") if os.path.isdir(path) else path


def compile_once(kiln, model, plan, threads, extra):
    env = dict(os.environ, KILN_CACHE="0")
    if threads is not None:
        env["KILN_COMPILE_THREADS"] = str(threads)
    start = time.perf_counter()
    result = subprocess.run([kiln, "compile", model, "-o", plan, *extra], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"{kiln} compile {model} failed:\n{result.stderr}")
    return elapsed


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+")
    parser.add_argument("--kiln", action="append", help="a kiln CLI (repeatable; default build/tools/kiln)")
    parser.add_argument("--threads", default="1,2", help="KILN_COMPILE_THREADS values, comma-separated")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--baseline", help="an older kiln CLI, run with its defaults, as the first column")
    args = parser.parse_args(argv)
    kilns = args.kiln or [os.path.join(REPO_ROOT, "build", "tools", "kiln")]
    threads = [int(t) for t in args.threads.split(",")]
    configurations = [(k, t) for k in kilns for t in threads]
    labels = [f"{'k' + str(kilns.index(k)) + ' ' if len(kilns) > 1 else ''}{t}t" for k, t in configurations]
    if args.baseline:
        configurations.insert(0, (args.baseline, None))
        labels.insert(0, "base")
        print(f"base = {args.baseline}")
    for index, kiln in enumerate(kilns):
        if len(kilns) > 1 or args.baseline:
            print(f"k{index} = {kiln}")
    header = f"{'model':<20}" + "".join(f"{label + ' s':>10}" for label in labels)
    header += "".join(f"{label + '/' + labels[0]:>12}" for label in labels[1:]) + "  plans"
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as work:
        for model in args.models:
            path = model_file(model)
            name = os.path.basename(os.path.dirname(path)) if os.path.isdir(model) else os.path.basename(path)
            best = [float("inf")] * len(configurations)
            plans = [os.path.join(work, f"plan{c}.kiln") for c in range(len(configurations))]
            for _ in range(args.repeats):
                for c, (kiln, count) in enumerate(configurations):
                    best[c] = min(best[c], compile_once(kiln, path, plans[c], count, extra))
            contents = [open(plan, "rb").read() for plan in plans]
            same = all(content == contents[0] for content in contents)
            row = f"{name:<20}" + "".join(f"{b:>10.2f}" for b in best)
            row += "".join(f"{b / best[0]:>12.2f}" for b in best[1:])
            print(row + ("  identical" if same else "  DIFFER"), flush=True)


if __name__ == "__main__":
    main()
