"""bench/thread_losses.py: its arithmetic on a hand-made trace whose losses are known, then a run on a
real two-thread trace from `kiln bench --trace` (ONNX's test_matmul_2d from Debian's libonnx-testdata):
the kernels' wall time is the sum of busiest-thread time and overhead, and busy time is at least
the busiest thread's. Files that are not kiln traces (not JSON, no runs, events without their args,
absent) are refused with a message naming the file, never a traceback. Needs only the system
python3.

usage: test_thread_losses.py --source-root DIR --kiln KILN_CLI [--python IGNORED]
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_test_env  # noqa: E402

args = python_test_env.cli_arguments()
checks = python_test_env.Checks(args.kiln)
check, kiln = checks.check, checks.kiln
script = os.path.join(args.source_root, "bench", "thread_losses.py")
sys.path.insert(0, os.path.dirname(script))
import thread_losses  # noqa: E402


def event(cat, name, ts, dur, tid=0, **extra):
    return {"cat": cat, "name": name, "ph": "X", "ts": ts, "dur": dur, "pid": 1, "tid": tid, "args": extra}


# Two runs of one launch each: 100 us of wall, thread 0 busy 60, thread 1 busy 40.
two = []
for iteration in range(2):
    base = 1000.0 * iteration
    two += [event("run", f"run {iteration}", base, 110, iteration=iteration),
            event("kernel", "r_k", base + 5, 100, kernel=0, iteration=iteration, sources=["node"]),
            event("chunk", "r_k", base + 10, 60, tid=0, kernel=0, iteration=iteration, begin=0, end=6),
            event("chunk", "r_k", base + 12, 40, tid=1, kernel=0, iteration=iteration, begin=6, end=10)]
table, sources, threads = thread_losses.per_kernel(two, 2)
row = table["r_k"]
check(threads == 2, f"two threads seen, got {threads}")
check(abs(row["wall"] - 100) < 1e-9 and abs(row["busy"] - 100) < 1e-9, f"wall 100 and busy 100 per run, got {dict(row)}")
check(abs(row["overhead"] - 40) < 1e-9, f"overhead = wall - busiest thread = 40, got {row['overhead']}")
check(abs(row["imbalance"] - 10) < 1e-9, f"imbalance = busiest - mean = 10, got {row['imbalance']}")
check(sources["r_k"] == "node", "the launch's sources are kept")

with tempfile.TemporaryDirectory() as work:
    hand_made = os.path.join(work, "hand.json")
    with open(hand_made, "w") as f:
        json.dump({"traceEvents": two}, f)
    one = [event("run", "run 0", 0, 95, iteration=0),
           event("kernel", "r_k", 1, 90, kernel=0, iteration=0),
           event("chunk", "r_k", 2, 88, tid=0, kernel=0, iteration=0, begin=0, end=10)]
    one_file = os.path.join(work, "one.json")
    with open(one_file, "w") as f:
        json.dump({"traceEvents": one}, f)
    shown = subprocess.run([sys.executable, script, hand_made, one_file], capture_output=True, text=True)
    check(shown.returncode == 0, f"thread_losses.py on the hand-made traces: {shown.stderr}")
    check("inflation +12" in shown.stdout, f"inflation = busy 100 - one-thread busy 88 = +12:\n{shown.stdout}")
    refused = subprocess.run([sys.executable, script, hand_made, hand_made], capture_output=True, text=True)
    check(refused.returncode != 0 and "one thread" in refused.stderr, "a second trace of two threads is refused")
    # Files that are not kiln traces: a clear message naming the file, no traceback.
    bad_inputs = {"not_json.json": "{ not json", "no_runs.json": json.dumps({"traceEvents": []}),
                  "no_args.json": json.dumps({"traceEvents": [{"cat": "run", "dur": 1, "ts": 0},
                                                              {"cat": "kernel", "name": "k", "dur": 1, "ts": 0}]}),
                  "a_number.json": "42"}
    for name, text in bad_inputs.items():
        path = os.path.join(work, name)
        with open(path, "w") as f:
            f.write(text)
        bad = subprocess.run([sys.executable, script, path], capture_output=True, text=True)
        check(bad.returncode != 0 and name in bad.stderr and "Traceback" not in bad.stderr,
              f"{name}: refused with a message naming the file: {bad.stderr.strip()}")
    missing = subprocess.run([sys.executable, script, os.path.join(work, "absent.json")], capture_output=True, text=True)
    check(missing.returncode != 0 and "cannot read" in missing.stderr and "Traceback" not in missing.stderr,
          f"an absent file: {missing.stderr.strip()}")

    model = "/usr/share/libonnx-testdata/data/node/test_matmul_2d/model.onnx"
    if not os.path.isfile(model):
        print(f"note: {model} is absent; no real trace checked")
    else:
        trace = os.path.join(work, "real.json")
        made = kiln("bench", model, "--threads", "2", "--iterations", "3", "--trace", trace)
        check(made.returncode == 0, "kiln bench --trace at two threads")
        events, runs = thread_losses.load(trace)
        table, _, threads = thread_losses.per_kernel(events, runs)
        total = thread_losses.totals(table)
        check(runs == 3 and table, f"3 runs and some kernels in the real trace, got {runs} runs")
        busiest = total["wall"] - total["overhead"]
        check(total["busy"] >= busiest - 1e-6, f"busy {total['busy']} >= busiest thread's {busiest}")
        check(total["overhead"] >= -1e-6 and total["imbalance"] >= -1e-6, f"no negative loss: {dict(total)}")
checks.finish()
