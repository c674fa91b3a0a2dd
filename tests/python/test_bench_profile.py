"""`kiln bench --profile` on mnist_8: after the benchmark's figures comes a per-kernel table whose
rows are the plan's distinct kernels (as `kiln inspect` lists them), slowest first, whose shares add
up to 100% and whose times add up to the total row, with the ONNX nodes each kernel computes.
Needs only the system python3; skipped (exit 77) when ../shared/data/models/mnist_8 is absent.

usage: test_bench_profile.py --source-root DIR --kiln KILN_CLI [--python IGNORED]
"""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_test_env  # noqa: E402

args = python_test_env.cli_arguments()
model_folder = python_test_env.shared_model(args.source_root, "mnist_8")
checks = python_test_env.Checks(args.kiln)
check, kiln = checks.check, checks.kiln



ROW = re.compile(r"^(\S+) +(\d+) +([0-9.]+) +([0-9.]+)% +(\S+) +(\S+)(?:  (.*))?$")


def profile_table(stdout):
    """The rows and the total row of the table after the 'profile:' line, or (None, None)."""
    lines = stdout.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("profile: ")]
    if not starts or starts[0] + 1 >= len(lines) or not lines[starts[0] + 1].startswith("kernel "):
        return None, None
    rows = [ROW.match(line) for line in lines[starts[0] + 2:]]
    if not rows or any(row is None for row in rows) or rows[-1].group(1) != "total":
        return None, None
    return rows[:-1], rows[-1]


with tempfile.TemporaryDirectory(prefix="kiln_bench_profile_") as work:
    model = os.path.join(model_folder, "model.onnx")
    plan = os.path.join(work, "mnist.kiln")
    check(kiln("compile", model, "-o", plan).returncode == 0, "kiln compile mnist_8")
    inspect = kiln("inspect", plan).stdout
    symbols = set(re.findall(r"^  (\S+) \(parallel extent", inspect, re.MULTILINE))
    check(len(symbols) > 0, "kiln inspect lists the kernels")
    check("from Convolution28" in inspect, "kiln inspect names the ONNX nodes of a kernel")

    for target in (plan, model):
        bench = kiln("bench", target, "--profile", "--iterations", "30", "--warmup", "2", "--threads", "1")
        name = os.path.basename(target)
        check(bench.returncode == 0, f"kiln bench {name} --profile succeeds")
        check(re.search(r"^median_ms [0-9.]+$", bench.stdout, re.MULTILINE) is not None,
              f"{name}: the benchmark's figures come first, as without --profile")
        rows, total = profile_table(bench.stdout)
        check(rows is not None, f"{name}: a table follows 'profile:': header, rows, total")
        if rows is None:
            continue
        names = [row.group(1) for row in rows]
        check(set(names) == symbols and len(names) == len(symbols),
              f"{name}: one row per distinct kernel of the plan ({len(names)} rows, {len(symbols)} kernels)")
        shares = sum(float(row.group(4)) for row in rows)
        check(abs(shares - 100.0) <= 0.1 * len(rows) + 0.05, f"{name}: the shares add up to 100% ({shares:.1f}%)")
        times = [float(row.group(3)) for row in rows]
        check(times == sorted(times, reverse=True), f"{name}: rows are sorted by time, slowest first")
        check(abs(sum(times) - float(total.group(3))) <= 1e-4 * len(rows) + 1e-9,
              f"{name}: the rows' times add up to the total row")
        check(all(float(row.group(5)) > 0 and float(row.group(6)) > 0 for row in rows),
              f"{name}: every kernel has GFLOP/s and GB/s (estimates stored in the plan)")
        check(sum(int(row.group(2)) for row in rows) == int(total.group(2)), f"{name}: launches add up")
        sources = " ".join(row.group(7) or "" for row in rows)
        check("Convolution28" in sources and "Convolution110" in sources,
              f"{name}: the rows name the ONNX nodes their kernels compute")

    check("--profile" in kiln("bench", "--help").stdout, "kiln bench --help documents --profile")

checks.finish()
