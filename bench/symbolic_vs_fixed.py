#!/usr/bin/env python3
"""Times one symbolic plan against plans compiled for exactly the shapes it runs at (issue 49's
"as fast as a fixed one"): the model compiled once with `--shape NAME=MIN..MAX` for each range, and
once per shape set with `--shape NAME=N`; `kiln bench` of each pair in alternating rounds, at the
same thread count, and the ratio of their fastest runs. Prints one line per shape set, with both
plans' peak RSS.

usage: symbolic_vs_fixed.py KILN MODEL.onnx --range NAME=MIN..MAX... --at NAME=N,NAME=N... [--at ...]
                            [--threads T] [--rounds R] [--iterations N]
  --at   one shape set: every symbol's size, comma-separated (batch=1,sequence=9)
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


def run(command):
    completed = subprocess.run(command, capture_output=True, text=True)
    if completed.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{completed.stderr.strip()}")
    return completed.stdout


def shape_arguments(specs):
    return [argument for spec in specs for argument in ("--shape", spec)]


def bench(kiln, plan, shapes, threads, iterations):
    output = run([kiln, "bench", plan, "--threads", str(threads), "--iterations", str(iterations),
                  *shape_arguments(shapes)])
    figures = dict(re.findall(r"^(\w+) ([-+0-9.eE]+)$", output, re.MULTILINE))
    return float(figures["min_ms"]), float(figures["peak_rss_mib"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kiln")
    parser.add_argument("model")
    parser.add_argument("--range", action="append", required=True)
    parser.add_argument("--at", action="append", required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=30)
    args = parser.parse_args()
    name = os.path.basename(os.path.dirname(os.path.abspath(args.model)))
    with tempfile.TemporaryDirectory(prefix="kiln_symbolic_vs_fixed_") as work:
        symbolic = os.path.join(work, "symbolic.kiln")
        run([args.kiln, "compile", args.model, "-o", symbolic, *shape_arguments(args.range)])
        for at in args.at:
            shapes = at.split(",")
            fixed = os.path.join(work, "fixed.kiln")
            run([args.kiln, "compile", args.model, "-o", fixed, *shape_arguments(shapes)])
            times = {"symbolic": [], "fixed": []}
            rss = {}
            for _ in range(args.rounds):
                for kind, plan, bench_shapes in (("fixed", fixed, []), ("symbolic", symbolic, shapes)):
                    ms, peak = bench(args.kiln, plan, bench_shapes, args.threads, args.iterations)
                    times[kind].append(ms)
                    rss[kind] = max(rss.get(kind, 0.0), peak)
            s, f = min(times["symbolic"]), min(times["fixed"])
            print(f"{name} at {at}, {args.threads} thread(s): symbolic {s:.3f} ms, fixed {f:.3f} ms, "
                  f"ratio {s / f:.2f}; peak RSS symbolic {rss['symbolic']:.0f} MiB, fixed {rss['fixed']:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
