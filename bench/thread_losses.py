#!/usr/bin/env python3
"""Where a multi-threaded plan run loses time, from `kiln bench --trace` files.

usage:
    python3 bench/thread_losses.py TRACE_N_THREADS.json [TRACE_1_THREAD.json] [--top K]

Make the traces with the same plan, e.g.
    build/tools/kiln bench model.plan --threads 2 --iterations 5 --trace t2.json
    build/tools/kiln bench model.plan --threads 1 --iterations 5 --trace t1.json

From the N-thread trace alone, per run (microseconds):
    wall       the kernels' launch times, summed (the caller's view)
    busy       the chunks' times, summed over all threads (the work done)
    overhead   per launch, wall minus the busiest thread's chunks: handing the launch to the
               workers, waking them and waiting for the last one
    imbalance  per launch, the busiest thread's chunks minus the threads' mean: work one thread
               had and the others did not
With a one-thread trace as well, `inflation` is N-thread busy minus one-thread busy per kernel:
the same work taking longer when split (data that the other core wrote is read from its cache,
shared memory bandwidth), which overhead and imbalance do not show. The table lists the kernels
with the largest losses.
"""
import argparse
import collections
import json
import sys


def load(path):
    """The trace's events and its run count; exits with a message naming what is wrong otherwise."""
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as error:
        sys.exit(f"{path}: cannot read it: {error.strerror}")
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        sys.exit(f"{path}: not JSON ({error}); expected a `kiln bench --trace` file")
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        sys.exit(f"{path}: no list of trace events; expected a `kiln bench --trace` file")
    runs = [e for e in events if e.get("cat") == "run"]
    if not runs:
        sys.exit(f"{path}: no 'run' events; is this a `kiln bench --trace` file?")
    for e in events:
        if e.get("cat") in ("kernel", "chunk") and not all(key in e.get("args", {}) for key in ("iteration", "kernel")):
            sys.exit(f"{path}: a '{e.get('cat')}' event without args.iteration and args.kernel; "
                     "expected a `kiln bench --trace` file")
    return events, len(runs)


def per_kernel(events, runs):
    """Per kernel name: wall, busy, overhead, imbalance (microseconds per run), and its sources."""
    chunks = collections.defaultdict(list)
    for e in events:
        if e.get("cat") == "chunk":
            chunks[(e["args"]["iteration"], e["args"]["kernel"])].append(e)
    threads = sorted({e["tid"] for e in events if e.get("cat") == "chunk"}) or [0]
    table = collections.defaultdict(collections.Counter)
    sources = {}
    for launch in (e for e in events if e.get("cat") == "kernel"):
        busy = collections.Counter({t: 0.0 for t in threads})
        for chunk in chunks[(launch["args"]["iteration"], launch["args"]["kernel"])]:
            busy[chunk["tid"]] += chunk["dur"]
        most = max(busy.values())
        row = table[launch["name"]]
        row["wall"] += launch["dur"] / runs
        row["busy"] += sum(busy.values()) / runs
        row["overhead"] += (launch["dur"] - most) / runs
        row["imbalance"] += (most - sum(busy.values()) / len(threads)) / runs
        sources[launch["name"]] = ", ".join(launch["args"].get("sources", []))
    return table, sources, len(threads)


def totals(table):
    """The per-kernel rows of per_kernel() summed: wall, busy, overhead, imbalance per run."""
    total = collections.Counter()
    for row in table.values():
        total.update(row)
    return total


def main():
    parser = argparse.ArgumentParser(description="Where a multi-threaded plan run loses time (see the module docstring).")
    parser.add_argument("traces", nargs="+", metavar="TRACE", help="the N-thread trace, then optionally a one-thread trace")
    parser.add_argument("--top", type=int, default=15, help="kernels listed (default 15)")
    options = parser.parse_args()
    args, top = options.traces, options.top
    if len(args) > 2:
        parser.error("at most two traces: the N-thread one, then a one-thread one")
    events, runs = load(args[0])
    table, sources, threads = per_kernel(events, runs)
    one = None
    if len(args) == 2:
        events1, runs1 = load(args[1])
        one, _, threads1 = per_kernel(events1, runs1)
        if threads1 != 1:
            sys.exit(f"{args[1]}: a trace of {threads1} threads; the second trace must be of one thread")
    total = totals(table)
    run_us = sum(e["dur"] for e in events if e.get("cat") == "run") / runs
    print(f"{threads} threads, {runs} runs; per run (us): run {run_us:.0f}, kernels' wall {total['wall']:.0f}, "
          f"busy {total['busy']:.0f} (ideal wall {total['busy'] / threads:.0f}), "
          f"overhead {total['overhead']:.0f}, imbalance {total['imbalance']:.0f}")
    if one is not None:
        busy1 = sum(one[name]["busy"] for name in table if name in one)
        print(f"one-thread busy over the same kernels {busy1:.0f}: inflation {total['busy'] - busy1:+.0f}")

    def loss(name):
        row = table[name]
        inflation = row["busy"] - one[name]["busy"] if one is not None and name in one else 0.0
        return row["overhead"] + row["imbalance"] + inflation / threads, inflation

    print(f"\n{'kernel':28} {'wall':>8} {'overhead':>9} {'imbalance':>9}" + (f" {'inflation':>9}" if one else "") + "  sources")
    for name in sorted(table, key=lambda n: -loss(n)[0])[:top]:
        row = table[name]
        inflation = loss(name)[1]
        extra = f" {inflation:+9.1f}" if one is not None else ""
        print(f"{name:28} {row['wall']:8.1f} {row['overhead']:9.1f} {row['imbalance']:9.1f}{extra}  {sources[name][:60]}")


if __name__ == "__main__":
    main()
