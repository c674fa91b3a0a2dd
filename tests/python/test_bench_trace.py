"""`kiln bench --trace FILE` writes a Chrome trace (Trace Event Format JSON, as Perfetto and
chrome://tracing read it), checked on ONNX's test_matmul_2d (Debian's libonnx-testdata) and, when
../shared/data is present, on mnist_8:

  - the file parses as JSON with a "traceEvents" list; process and thread names are metadata events
    ("ph": "M") and every track that has events is named;
  - complete events ("ph": "X") have name, cat, ts and dur (microseconds, >= 0), pid and tid;
  - one "run" event per iteration, one "kernel" event per launch and iteration (kernels x
    iterations), named by the kernel's symbol with its ONNX nodes as `kiln inspect` lists them, on
    the calling thread's track inside its run; "chunk" events lie inside their launch and cover its
    parallel axis exactly once;
  - with --profile in the same command, the kernel events' times are the table's (the same runs),
    and the runs' mean duration is the profile line's time per run: the unit is microseconds.
Needs only the system python3.

usage: test_bench_trace.py --source-root DIR --kiln KILN_CLI [--python IGNORED]
"""
import json
import os
import re
import sys
import tempfile
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_test_env  # noqa: E402

args = python_test_env.cli_arguments()
checks = python_test_env.Checks(args.kiln)
check, kiln = checks.check, checks.kiln
ITERATIONS = 12
TOLERANCE_US = 0.002  # timestamps are written with nanosecond digits

models = [("matmul_2d", "/usr/share/libonnx-testdata/data/node/test_matmul_2d/model.onnx")]
mnist = os.path.join(args.source_root, "..", "shared", "data", "models", "mnist_8", "model.onnx")
if os.path.isfile(mnist):
    models.append(("mnist_8", mnist))
else:
    print(f"note: {mnist} is absent; mnist_8 is not traced")
if not os.path.isfile(models[0][1]):
    print(f"skip: {models[0][1]} is absent (Debian package libonnx-testdata)")
    sys.exit(77)

LAUNCH = re.compile(r"^  (\S+) \(parallel extent (\d+)[^)]*\)(?: from (.*))?$", re.MULTILINE)
ROW = re.compile(r"^(\S+) +(\d+) +([0-9.]+) +([0-9.]+)% +(\S+) +(\S+)(?:  (.*))?$")


def inside(inner, outer):
    return (inner["ts"] >= outer["ts"] - TOLERANCE_US and
            inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + TOLERANCE_US)


def check_trace(label, trace, launches, stdout):
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    check(isinstance(events, list) and events, f"{label}: a traceEvents list")
    if not events:
        return
    metadata = [e for e in events if e.get("ph") == "M"]
    complete = [e for e in events if e.get("ph") == "X"]
    check(len(metadata) + len(complete) == len(events), f"{label}: only metadata and complete events")
    check(any(e.get("name") == "process_name" and e.get("args", {}).get("name") for e in metadata),
          f"{label}: the process is named")
    named_tracks = {e.get("tid") for e in metadata if e.get("name") == "thread_name" and e.get("args", {}).get("name")}
    fields_ok = all(isinstance(e.get("name"), str) and e.get("cat") in ("run", "kernel", "chunk") and
                    isinstance(e.get("ts"), (int, float)) and e["ts"] >= 0 and
                    isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0 and
                    isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int) for e in complete)
    check(fields_ok, f"{label}: every complete event has name, cat, ts, dur (>= 0), pid and tid")
    check({e["tid"] for e in complete} <= named_tracks, f"{label}: every track with events has a thread name")
    check(len({e.get("pid") for e in events}) == 1, f"{label}: one process")

    runs = sorted((e for e in complete if e["cat"] == "run"), key=lambda e: e["args"]["iteration"])
    kernels = [e for e in complete if e["cat"] == "kernel"]
    chunks = [e for e in complete if e["cat"] == "chunk"]
    check([e["args"]["iteration"] for e in runs] == list(range(ITERATIONS)), f"{label}: one run event per iteration")
    check(len(kernels) == len(launches) * ITERATIONS,
          f"{label}: kernel events = launches x iterations ({len(kernels)} = {len(launches)} x {ITERATIONS})")
    by_run = defaultdict(list)
    for event in kernels:
        by_run[event["args"]["iteration"]].append(event)
    order_ok = names_ok = nested_ok = True
    for run in runs:
        launched = sorted(by_run[run["args"]["iteration"]], key=lambda e: e["ts"])
        order_ok &= [e["args"]["kernel"] for e in launched] == list(range(len(launches)))
        for event in launched:
            symbol, _, sources = launches[event["args"]["kernel"]]
            names_ok &= event["name"] == symbol and event["args"]["sources"] == sources
            nested_ok &= event["tid"] == run["tid"] and inside(event, run)
    check(order_ok, f"{label}: each run has one kernel event per launch, in launch order")
    check(names_ok, f"{label}: kernel events are named by the symbol, with the ONNX nodes kiln inspect lists")
    check(nested_ok, f"{label}: kernel events lie inside their run, on the calling thread's track")
    launch_of = {(e["args"]["kernel"], e["args"]["iteration"]): e for e in kernels}
    ranges = defaultdict(list)
    chunk_ok = True
    for chunk in chunks:
        key = (chunk["args"]["kernel"], chunk["args"]["iteration"])
        chunk_ok &= key in launch_of and inside(chunk, launch_of[key]) and chunk["name"] == launch_of[key]["name"]
        ranges[key].append((chunk["args"]["begin"], chunk["args"]["end"]))
    check(chunks and chunk_ok, f"{label}: chunk events ({len(chunks)}) lie inside their launch, named like it")
    cover_ok = True
    for (kernel, iteration), launch in launch_of.items():
        extent = launches[kernel][1]
        covered = sorted(ranges[(kernel, iteration)])
        cover_ok &= (extent == 0 and not covered) or (
            covered[0][0] == 0 and covered[-1][1] == extent and all(a[1] == b[0] for a, b in zip(covered, covered[1:])))
    check(cover_ok, f"{label}: each launch's chunks cover its parallel extent exactly once")

    # The same runs feed --profile: its table's times are the kernel events' times.
    lines = stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("profile: ")), None)
    check(start is not None, f"{label}: --profile's table is printed with --trace")
    if start is None:
        return
    run_ms = float(re.search(r": ([0-9.]+) ms per run", lines[start]).group(1))
    mean_run_ms = sum(e["dur"] for e in runs) / len(runs) / 1000
    check(0.5 * run_ms - 0.01 <= mean_run_ms <= run_ms + 0.01,
          f"{label}: run events' mean {mean_run_ms:.4f} ms matches the profile's {run_ms:.4f} ms per run (microseconds)")
    table_ms = {m.group(1): float(m.group(3)) for m in map(ROW.match, lines[start + 2:]) if m and m.group(1) != "total"}
    trace_ms = defaultdict(float)
    for event in kernels:
        trace_ms[event["name"]] += event["dur"] / 1000 / ITERATIONS
    check(set(table_ms) == set(trace_ms), f"{label}: the trace's kernel names are the table's rows")
    check(all(abs(trace_ms[name] - table_ms.get(name, -1)) <= 1.5e-4 for name in trace_ms),
          f"{label}: each kernel's time per run in the trace equals the table's (to its 4 decimals)")


with tempfile.TemporaryDirectory(prefix="kiln_bench_trace_") as work:
    os.environ["KILN_CACHE_DIR"] = os.path.join(work, "kernel-cache")
    for label, model in models:
        plan = os.path.join(work, label + ".kiln")
        check(kiln("compile", model, "-o", plan).returncode == 0, f"kiln compile {label}")
        launches = [(symbol, int(extent), sources.split(", ") if sources else [])
                    for symbol, extent, sources in LAUNCH.findall(kiln("inspect", plan).stdout)]
        check(len(launches) > 0, f"{label}: kiln inspect lists the launches")
        trace_path = os.path.join(work, label + ".json")
        bench = kiln("bench", plan, "--trace", trace_path, "--profile", "--threads", "2",
                     "--iterations", str(ITERATIONS), "--warmup", "1")
        check(bench.returncode == 0, f"kiln bench {label} --trace --profile succeeds")
        check(f"written to {trace_path}" in bench.stdout, f"{label}: bench says where the trace is")
        try:
            with open(trace_path) as f:
                trace = json.load(f)
        except (OSError, ValueError) as error:
            check(False, f"{label}: the trace is a JSON file ({error})")
            continue
        check_trace(label, trace, launches, bench.stdout)

    # Without --profile the table is not printed, the trace still is; a bad path is a clear error.
    plan = os.path.join(work, "matmul_2d.kiln")
    alone = kiln("bench", plan, "--trace", os.path.join(work, "alone.json"), "--iterations", "3", "--warmup", "0")
    check(alone.returncode == 0 and "profile: " not in alone.stdout and os.path.isfile(os.path.join(work, "alone.json")),
          "--trace alone writes the trace and prints no table")
    bad = kiln("bench", plan, "--trace", os.path.join(work, "no-such-folder", "t.json"), "--iterations", "1")
    check(bad.returncode == 1 and "cannot write the trace" in bad.stderr, "an unwritable trace path is a clear error")
    missing = kiln("bench", plan, "--trace")
    check(missing.returncode == 2 and "--trace needs a file name" in missing.stderr, "--trace without a file is a usage error")
    check("--trace" in kiln("bench", "--help").stdout, "kiln bench --help documents --trace")

checks.finish()
