#!/usr/bin/env python3
"""Times ONNX models in kiln and in onnxruntime, same inputs and thread count, and prints one table.

usage:
    python3 bench/compare_onnxruntime.py [options] MODEL...

Each MODEL is an .onnx file or a folder; a folder is searched recursively for model.onnx files (the
ONNX test-folder layout of bench/export_models.py and ../shared/data/models) and, where a folder
holds no model.onnx, for *.onnx files. When a model's folder has test_data_set_0/input_K.pb, those
are its inputs; otherwise the inputs are seeded random values (symbolic dimensions set to 1).

Per model, the two engines take turns (--rounds rounds of --iterations runs each, onnxruntime then
kiln), so that a change in machine load during the run hits both. onnxruntime runs in a child process
of its own, so that its peak RSS is that model's alone (the figure includes the Python interpreter,
numpy and the onnxruntime library, about 50 MiB; --verbose prints the figure before the session).

Columns:
    ort_ms, kiln_ms      median latency of one run (after --warmup runs), milliseconds; with
                         --statistic min, the fastest run of each engine
    ort_p90, kiln_p90    90th percentile latency
    kiln/ort             ratio of ort_ms and kiln_ms (below 1: kiln is faster)
    ort_init_ms          InferenceSession creation (graph optimisation included)
    kiln_compile_ms      `kiln compile` wall time, kernel cache off (process start included)
    kiln_load_ms         plan load time as `kiln bench` reports it
    ort_rss, kiln_rss    peak resident memory of each engine's process, MiB
    max_abs_err          max |kiln - onnxruntime| over all outputs, from `kiln run` on the same inputs

The kiln side drives the kiln CLI: `kiln compile`, then `kiln bench PLAN` once per round (it loads
the plan through libkiln, warms up and prints its statistics) and `kiln run` once for the outputs. If
the CLI is missing the script says so once and prints onnxruntime's columns, with kiln's as "-".
Timing kiln through `kiln test-onnx --timings` is not a benchmark (it includes graph building in
every run) and is deliberately not used.

options:
    --threads T        intra-op threads for both engines (default 1)
    --iterations N     timed runs per round (default 50)
    --rounds R         alternating rounds (default 3)
    --warmup W         untimed runs before timing, both engines (default 5; kiln's after its first run)
    --statistic S      median (default) or min: on a shared machine whose speed drifts between
                       phases within a run, the minimum of each engine is the steadier figure
    --kiln PATH        the kiln CLI (default build/tools/kiln next to this script's repository)
    --tuning DB        compile with `kiln compile --tuning DB` (a database from `kiln tune`, made
                       with the same --threads; docs/tuning.md); without it, the heuristics' plans
    --precision P      passed to `kiln compile --precision` (fp32 or bf16: matmuls by a weight on
                       bf16 operands where the CPU has AMX tiles); onnxruntime runs the model as
                       it is. With --openvino, `--precision bf16` against its default (bf16 on
                       such CPUs) is the like-for-like comparison
    --shape SPEC       passed to `kiln compile --shape` (repeat it): `sequence=128` fixes a dim_param,
                       `sequence=1..512` keeps it symbolic (docs/symbolic-shapes.md)
    --bench-shape SPEC passed to `kiln bench --shape`: a symbolic plan's variables for the timed runs
                       (`sequence=128`); give the sizes the model's test inputs have
    --work-dir DIR     where plans, input files and kiln's outputs go (default: a temporary folder)
    --device D         cpu (default) or cuda: onnxruntime with its CUDA execution provider against
                       kiln's CUDA plan (`kiln compile --target cuda --cuda-arch A`). Both take host
                       inputs and return host outputs each run, so each time includes the copies.
                       onnxruntime-gpu must be importable (bench/ort_gpu_pack.py carries it to a
                       lent GPU machine); the run stops if its CUDA provider does not load, rather
                       than timing its CPU provider by mistake. --threads still sets the CPU threads.
    --cuda-arch A      the GPU architecture kiln compiles for with --device cuda (default 90: H100/H200)
    --ort-cuda-option KEY=VALUE
                       an option of onnxruntime's CUDA provider (repeat it), e.g. use_tf32=0: its
                       fp32 convs and matmuls may use TF32 (10-bit mantissas) by default, kiln's never
    --openvino         also time OpenVINO's CPU plugin (PyPI `openvino`) with its default settings
                       but the thread count (INFERENCE_NUM_THREADS = --threads; on BF16-capable
                       CPUs its default inference precision is bf16), in a child process of its
                       own, in turn with the others: columns ov_ms and kiln/ov
    --csv FILE         also write the table as CSV
    -v, --verbose      print each step

Exit status: 0 when every model has a ratio, 1 when one or more lacks it (the notes under the table say
why), 2 for bad arguments.
"""
import argparse
import math
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VERBOSE = False


def log(message):
    if VERBOSE:
        print(f"  [{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def percentile(values, q):
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if len(values) else math.nan


# ---------------------------------------------------------------------------------------------------
# Models and inputs

def find_models(paths):
    """(display name, model path) for every model under the given files and folders, sorted."""
    found = []
    for path in paths:
        if os.path.isfile(path):
            found.append(path)
            continue
        if not os.path.isdir(path):
            sys.exit(f"compare_onnxruntime: '{path}' is neither an .onnx file nor a folder")
        for root, folders, files in os.walk(path):
            folders.sort()
            if "model.onnx" in files:
                found.append(os.path.join(root, "model.onnx"))
                folders[:] = []  # a test folder's subfolders are data sets, not models
            else:
                found.extend(os.path.join(root, f) for f in sorted(files) if f.endswith(".onnx"))
    def label(model, parents):
        """The model's folder name (or file stem), with `parents` more folders when names clash."""
        parts = os.path.normpath(model).split(os.sep)
        stem = parts[-2] if parts[-1] == "model.onnx" else os.path.splitext(parts[-1])[0]
        folders = parts[:-2] if parts[-1] == "model.onnx" else parts[:-1]
        return "/".join(folders[len(folders) - parents:] + [stem]) if parents else stem

    labels = [label(model, 0) for model in found]
    for parents in range(1, 4):  # plans are named after models: make clashing names unique
        clashing = {name for name in labels if labels.count(name) > 1}
        labels = [label(m, parents) if name in clashing else name for m, name in zip(found, labels)]
    return list(zip(labels, found))


def read_tensor_file(path):
    from onnx import TensorProto, numpy_helper

    tensor = TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    return tensor.name, numpy_helper.to_array(tensor)


ORT_TYPES = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}


def model_inputs(model_path, input_infos, seed=0):
    """{name: array}: the test data set's inputs when there is one, else seeded random values."""
    data_set = os.path.join(os.path.dirname(model_path), "test_data_set_0")
    names = [name for name, _, _ in input_infos]
    if os.path.basename(model_path) == "model.onnx" and os.path.isdir(data_set):
        files = sorted((f for f in os.listdir(data_set) if re.fullmatch(r"input_\d+\.pb", f)),
                       key=lambda f: int(f[6:-3]))
        if len(files) == len(names):
            inputs = {}
            for k, f in enumerate(files):
                name, array = read_tensor_file(os.path.join(data_set, f))
                inputs[name if name in names else names[k]] = array
            return inputs, "test_data_set_0"
    rng = np.random.default_rng(seed)
    inputs = {}
    for name, type_name, shape in input_infos:
        dtype = ORT_TYPES.get(type_name)
        if dtype is None:
            raise RuntimeError(f"input '{name}' has type {type_name}, which this script cannot make up")
        dims = [d if isinstance(d, int) and d > 0 else 1 for d in shape]
        if np.issubdtype(dtype, np.floating):
            inputs[name] = rng.standard_normal(dims).astype(dtype)
        elif dtype is np.bool_:
            inputs[name] = rng.integers(0, 2, size=dims).astype(np.bool_)
        else:
            inputs[name] = rng.integers(0, 10, size=dims).astype(dtype)  # small: indices stay in range
    return inputs, f"random (seed {seed})"


def write_input_files(inputs, folder):
    """Writes each input as an ONNX TensorProto file (what `kiln run --input NAME=FILE` reads)."""
    from onnx import numpy_helper

    os.makedirs(folder, exist_ok=True)
    paths = {}
    for k, (name, array) in enumerate(inputs.items()):
        paths[name] = os.path.join(folder, f"input_{k}.pb")
        with open(paths[name], "wb") as f:
            f.write(numpy_helper.from_array(array, name).SerializeToString())
    return paths


# ---------------------------------------------------------------------------------------------------
# onnxruntime side: a child process that keeps one session and runs it on request

def peak_rss_mib(pid="self"):
    """VmHWM of a live process, MiB. Not getrusage's ru_maxrss: Linux carries that figure across
    fork and exec, so a child started from this script would report at least this script's peak."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return math.nan


def preload_cuda_libraries(onnxruntime):
    """Loads the CUDA libraries onnxruntime's CUDA provider links against (cuBLAS, cuDNN, the CUDA
    runtime) from the machine's Python packages before a session needs them: onnxruntime's own
    preload_dlls() where it has one, and PyTorch's import, which loads the same libraries globally,
    where torch is installed (the lent GPU machine has PyTorch's nvidia-* packages, not CUDA's
    system libraries). What fails here shows later as the provider not loading."""
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    if hasattr(onnxruntime, "preload_dlls"):
        try:
            onnxruntime.preload_dlls()
        except Exception:
            pass


def ort_providers(device, cuda_options=None):
    if device == "cuda":
        return [("CUDAExecutionProvider", dict(cuda_options or {})), "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def timed_runs(run_once, count):
    """Milliseconds of each of `count` calls of run_once()."""
    latencies = []
    for _ in range(count):
        start = time.perf_counter()
        run_once()
        latencies.append((time.perf_counter() - start) * 1e3)
    return latencies


def serve(connection, answer):
    """A child's request loop: each request gets ("ok", answer(request)), or ("error", its message's
    first line) when answering raises; ('finish') replies with the child's peak RSS and ends the
    loop, and so does a failed ('create')."""
    while True:
        request = connection.recv()
        try:
            if request[0] == "finish":
                connection.send(("ok", {"peak_rss": peak_rss_mib()}))
                return
            connection.send(("ok", answer(request)))
        except Exception as error:  # reported to the parent, which prints it in the table or notes
            connection.send(("error", f"{type(error).__name__}: {error}".splitlines()[0]))
            if request[0] == "create":
                return


def ort_worker(connection, model_path, threads, device, cuda_options):
    """Runs in the child: answers ('create'), ('set_inputs', feed), ('run', n), ('outputs'), ('finish')."""
    import onnxruntime

    if device == "cuda":
        preload_cuda_libraries(onnxruntime)

    baseline_rss = peak_rss_mib()
    state = {}

    def answer(request):
        if request[0] == "create":
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = threads
            options.log_severity_level = 3  # errors only: some zoo models draw pages of warnings
            options.inter_op_num_threads = 1
            options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
            start = time.perf_counter()
            session = onnxruntime.InferenceSession(model_path, options, providers=ort_providers(device, cuda_options))
            create_ms = (time.perf_counter() - start) * 1e3
            if device == "cuda" and "CUDAExecutionProvider" not in session.get_providers():
                raise RuntimeError(f"CUDAExecutionProvider did not load (the session has "
                                   f"{session.get_providers()}); onnxruntime's log above says why")
            state["session"] = session
            infos = [(i.name, i.type, list(i.shape)) for i in session.get_inputs()]
            return {"create_ms": create_ms, "inputs": infos, "baseline_rss": baseline_rss,
                    "version": onnxruntime.__version__}
        session = state["session"]
        if request[0] == "set_inputs":
            state["feed"] = request[1]
            return None
        if request[0] == "run":
            return timed_runs(lambda: session.run(None, state["feed"]), request[1])
        if request[0] == "outputs":
            names = [o.name for o in session.get_outputs()]
            return dict(zip(names, session.run(names, state["feed"])))
        raise ValueError(f"unknown request {request[0]!r}")

    serve(connection, answer)


def ov_worker(connection, model_path, threads):
    """OpenVINO's side, in its own child: answers ('create'), ('set_inputs', feed), ('run', n), ('finish')."""
    import openvino

    state = {}

    def answer(request):
        if request[0] == "create":
            core = openvino.Core()
            start = time.perf_counter()
            state["compiled"] = core.compile_model(model_path, "CPU", {"INFERENCE_NUM_THREADS": threads})
            create_ms = (time.perf_counter() - start) * 1e3
            return {"create_ms": create_ms, "version": openvino.__version__}
        compiled = state["compiled"]
        if request[0] == "set_inputs":
            state["feed"] = [request[1][port.get_any_name()] for port in compiled.inputs]
            state["infer"] = compiled.create_infer_request()
            return None
        if request[0] == "run":
            return timed_runs(lambda: state["infer"].infer(state["feed"]), request[1])
        raise ValueError(f"unknown request {request[0]!r}")

    serve(connection, answer)


class OrtSession:
    """The parent's handle on one onnxruntime child process (or, with `worker`, another engine's)."""

    def __init__(self, model_path, threads, device="cpu", cuda_options=None, worker=None, engine="onnxruntime"):
        context = multiprocessing.get_context("spawn")  # a fresh process: its peak RSS is this model's
        self.connection, child_end = context.Pipe()
        self.engine = engine
        arguments = (child_end, model_path, threads) if worker else (child_end, model_path, threads, device, cuda_options)
        self.process = context.Process(target=worker or ort_worker, args=arguments, daemon=True)
        self.process.start()

    def call(self, *request):
        self.connection.send(request)
        status, value = self.connection.recv()
        if status != "ok":
            raise RuntimeError(f"{self.engine}: {value}")
        return value

    def close(self):
        try:
            return self.call("finish")["peak_rss"]
        finally:
            self.process.join(timeout=30)


# ---------------------------------------------------------------------------------------------------
# KILN SIDE: the kiln CLI (tools/, issue 5 item 4).
#
#     kiln compile MODEL.onnx -o PLAN
#     kiln bench PLAN --iterations N --threads T      prints "KEY VALUE" lines: load_ms, first_run_ms,
#                                                     min_ms, median_ms, p90_ms, peak_rss_mib (and
#                                                     compile_ms when given a model)
#     kiln run PLAN --input NAME=FILE... --output-dir DIR     writes DIR/<output name>.pb
# kiln_cli_status() probes for them; when one is missing, the table's kiln columns are "-".

KILN_COMMANDS = ("compile", "bench", "run")


def kiln_cli_status(kiln):
    """None when the kiln CLI has every command this script needs, else why not (one line)."""
    if not os.access(kiln, os.X_OK):
        return f"no kiln CLI at {kiln} (build it: ninja -C build tools/kiln)"
    missing = []
    for command in KILN_COMMANDS:
        probe = subprocess.run([kiln, command, "--help"], capture_output=True, text=True)
        if probe.returncode != 0:
            missing.append(command)
    if missing:
        commands = ", ".join(f"'{command}'" for command in missing)
        return f"{kiln} has no {commands} command; printing onnxruntime's columns only"
    return None


def run_child(arguments, env=None):
    """Runs a command; returns (completed process, wall ms, its peak RSS in MiB).

    The peak is the child's VmHWM sampled every 20 ms while it runs (VmHWM only grows, so the last
    sample misses at most the final 20 ms); `kiln bench` may print its own exact figure instead."""
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        start = time.perf_counter()
        process = subprocess.Popen(arguments, stdout=stdout, stderr=stderr, text=True, env=env)
        peak = math.nan
        while process.poll() is None:
            sample = peak_rss_mib(process.pid)
            if not math.isnan(sample):
                peak = sample if math.isnan(peak) else max(peak, sample)
            time.sleep(0.02)
        wall_ms = (time.perf_counter() - start) * 1e3
        stdout.seek(0)
        stderr.seek(0)
        completed = subprocess.CompletedProcess(arguments, process.returncode, stdout.read(), stderr.read())
    return completed, wall_ms, peak


def kiln_failure(what, completed):
    text = (completed.stderr.strip() or completed.stdout.strip() or f"exit status {completed.returncode}")
    return RuntimeError(f"kiln {what}: {text.splitlines()[-1]}")


def shape_arguments(specs):
    return ["--shape", *specs] if specs else []


def kiln_compile(kiln, model_path, plan_path, tuning=None, shapes=None, target_arguments=()):
    """Compiles MODEL to PLAN (with the tuning database `tuning`, the `--shape` specs `shapes` and
    `--target ...` arguments, when given); returns the wall time in ms. KILN_CACHE=0: a cold compile,
    every kernel generated (otherwise kernels compiled by an earlier run come from the disk cache)."""
    command = [kiln, "compile", model_path, "-o", plan_path] + (["--tuning", tuning] if tuning else [])
    command += shape_arguments(shapes) + list(target_arguments)
    completed, wall_ms, _ = run_child(command, env=dict(os.environ, KILN_CACHE="0"))
    if completed.returncode != 0:
        raise kiln_failure("compile", completed)
    return wall_ms


def kiln_bench_round(kiln, plan_path, iterations, threads, warmup, shapes=None):
    """One `kiln bench` round: {"median_ms", "p90_ms", "min_ms", "load_ms", "compile_ms", "peak_rss"}.
    `shapes`: the variables of a symbolic plan (`kiln bench --shape`)."""
    completed, _, peak = run_child([kiln, "bench", plan_path, "--iterations", str(iterations),
                                    "--threads", str(threads), "--warmup", str(warmup)] + shape_arguments(shapes))
    if completed.returncode != 0:
        raise kiln_failure("bench", completed)
    figures = {}
    for line in completed.stdout.splitlines():
        match = re.fullmatch(r"\s*(compile_ms|load_ms|first_run_ms|median_ms|p90_ms|min_ms|peak_rss_mib)\s+([-+0-9.eE]+)\s*", line)
        if match:
            figures[match.group(1)] = float(match.group(2))
    for needed in ("median_ms", "p90_ms", "min_ms"):
        if needed not in figures:
            raise RuntimeError(f"kiln bench printed no '{needed}' line:\n{completed.stdout}")
    figures["peak_rss"] = figures.pop("peak_rss_mib", peak)  # kiln's own figure when it prints one
    return figures


def kiln_outputs(kiln, plan_path, input_files, output_folder):
    """Runs the plan once on the given input files; returns {output name: array}."""
    os.makedirs(output_folder, exist_ok=True)
    arguments = [kiln, "run", plan_path, "--output-dir", output_folder]
    for name, path in input_files.items():
        arguments += ["--input", f"{name}={path}"]
    completed, _, _ = run_child(arguments)
    if completed.returncode != 0:
        raise kiln_failure("run", completed)
    outputs = {}
    for f in sorted(os.listdir(output_folder)):
        path = os.path.join(output_folder, f)
        if f.endswith(".npy"):
            outputs[f[:-4]] = np.load(path)
        elif f.endswith(".pb"):
            name, array = read_tensor_file(path)
            outputs[name or f[:-3]] = array
    return outputs


# ---------------------------------------------------------------------------------------------------
# One model, both engines

def max_abs_error(kiln_outputs_by_name, ort_outputs_by_name):
    worst = 0.0
    for name, expected in ort_outputs_by_name.items():
        if name not in kiln_outputs_by_name:
            raise RuntimeError(f"kiln wrote no output '{name}'")
        actual = kiln_outputs_by_name[name]
        if actual.shape != expected.shape:
            raise RuntimeError(f"output '{name}': kiln's shape {actual.shape}, onnxruntime's {expected.shape}")
        if expected.size:
            worst = max(worst, float(np.max(np.abs(actual.astype(np.float64) - expected.astype(np.float64)))))
    return worst


def measure(name, model_path, args, kiln_ready, work_dir):
    row = {"model": name, "notes": []}
    log(f"{name}: onnxruntime session ({model_path})")
    ort = OrtSession(model_path, args.threads, args.device, args.ort_cuda_option)
    try:
        info = ort.call("create")
        row["ort_init_ms"] = info["create_ms"]
        inputs, source = model_inputs(model_path, info["inputs"])
        log(f"{name}: inputs from {source}; onnxruntime process's peak RSS before the session: "
            f"{info['baseline_rss']:.0f} MiB")
        ort.call("set_inputs", inputs)
        ort.call("run", args.warmup)

        stem = os.path.join(work_dir, name.replace("/", "__"))
        plan = f"{stem}.kiln"
        kiln_ok = kiln_ready
        if kiln_ok:
            try:
                log(f"{name}: kiln compile")
                target = ["--target", "cuda", "--cuda-arch", str(args.cuda_arch)] if args.device == "cuda" else []
                if args.precision:
                    target += ["--precision", args.precision]
                row["kiln_compile_ms"] = kiln_compile(args.kiln, model_path, plan, args.tuning, args.shape, target)
            except Exception as error:
                row["notes"].append(str(error))
                kiln_ok = False

        ov = None
        if args.openvino:
            try:
                ov = OrtSession(model_path, args.threads, worker=ov_worker, engine="openvino")
                ov.call("create")
                ov.call("set_inputs", inputs)
                ov.call("run", args.warmup)
            except Exception as error:
                row["notes"].append(str(error))
                ov = None

        ort_latencies, kiln_rounds, ov_latencies = [], [], []
        for round_index in range(args.rounds):
            log(f"{name}: round {round_index + 1}/{args.rounds}: onnxruntime")
            ort_latencies += ort.call("run", args.iterations)
            if ov is not None:
                log(f"{name}: round {round_index + 1}/{args.rounds}: openvino")
                ov_latencies += ov.call("run", args.iterations)
            if kiln_ok:
                log(f"{name}: round {round_index + 1}/{args.rounds}: kiln")
                try:
                    kiln_rounds.append(kiln_bench_round(args.kiln, plan, args.iterations, args.threads, args.warmup,
                                                         args.bench_shape))
                except Exception as error:
                    row["notes"].append(str(error))
                    kiln_ok = False
        row["ort_ms"] = min(ort_latencies) if args.statistic == "min" else percentile(ort_latencies, 50)
        row["ort_p90"] = percentile(ort_latencies, 90)
        if ov_latencies:
            row["ov_ms"] = min(ov_latencies) if args.statistic == "min" else percentile(ov_latencies, 50)
        if ov is not None:
            try:
                ov.close()
            except Exception:
                pass
        if kiln_rounds:
            # `kiln bench` reports per-round statistics only: the median of the round medians (and of
            # the round p90s) is the figure least moved by one disturbed round.
            row["kiln_ms"] = float(np.median([r["median_ms"] for r in kiln_rounds]))
            if args.statistic == "min":
                row["kiln_ms"] = min(r["min_ms"] for r in kiln_rounds)
            row["kiln_p90"] = float(np.median([r["p90_ms"] for r in kiln_rounds]))
            row["kiln_load_ms"] = float(np.median([r.get("load_ms", math.nan) for r in kiln_rounds]))
            row["kiln_rss"] = max(r["peak_rss"] for r in kiln_rounds)
            if "kiln_compile_ms" not in row and "compile_ms" in kiln_rounds[0]:
                row["kiln_compile_ms"] = kiln_rounds[0]["compile_ms"]
            row["kiln/ort"] = row["kiln_ms"] / row["ort_ms"] if row["ort_ms"] > 0 else math.nan
            if row.get("ov_ms", 0) > 0:
                row["kiln/ov"] = row["kiln_ms"] / row["ov_ms"]
        if kiln_ok:
            try:
                input_files = write_input_files(inputs, f"{stem}.inputs")
                produced = kiln_outputs(args.kiln, plan, input_files, f"{stem}.outputs")
                row["max_abs_err"] = max_abs_error(produced, ort.call("outputs"))
            except Exception as error:
                row["notes"].append(str(error))
    except Exception as error:
        row["notes"].append(str(error))
    finally:
        try:
            row["ort_rss"] = ort.close()
        except Exception:
            pass
    return row


# ---------------------------------------------------------------------------------------------------
# The table

COLUMNS = [
    ("model", "{}"), ("ort_ms", "{:.3f}"), ("kiln_ms", "{:.3f}"), ("kiln/ort", "{:.2f}"),
    ("ort_p90", "{:.3f}"), ("kiln_p90", "{:.3f}"), ("ort_init_ms", "{:.0f}"), ("kiln_compile_ms", "{:.0f}"),
    ("kiln_load_ms", "{:.1f}"), ("ort_rss", "{:.0f}"), ("kiln_rss", "{:.0f}"), ("max_abs_err", "{:.2e}"),
]


# With --openvino (rows that have ov_ms), after kiln/ort.
OPENVINO_COLUMNS = [("ov_ms", "{:.3f}"), ("kiln/ov", "{:.2f}")]


def columns_for(rows):
    if not any("ov_ms" in r for r in rows):
        return COLUMNS
    at = [key for key, _ in COLUMNS].index("kiln/ort") + 1
    return COLUMNS[:at] + OPENVINO_COLUMNS + COLUMNS[at:]


def cell(row, key, form):
    value = row.get(key)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return form.format(value)


def print_table(rows, out=sys.stdout):
    columns = columns_for(rows)
    table = [[key for key, _ in columns]] + [[cell(r, k, f) for k, f in columns] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
    for index, line in enumerate(table):
        print("  ".join(text.ljust(w) if i == 0 else text.rjust(w) for i, (text, w) in enumerate(zip(line, widths))),
              file=out)
        if index == 0:
            print("  ".join("-" * w for w in widths), file=out)
    for r in rows:
        for note in r["notes"]:
            print(f"note: {r['model']}: {note}", file=out)


def write_csv(rows, path):
    import csv

    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        columns = columns_for(rows)
        writer.writerow([key for key, _ in columns] + ["notes"])
        for r in rows:
            writer.writerow([cell(r, k, f) for k, f in columns] + ["; ".join(r["notes"])])


def main():
    global VERBOSE
    parser = argparse.ArgumentParser(usage=argparse.SUPPRESS, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", metavar="MODEL", help=".onnx files or folders holding them")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--kiln", default=os.path.join(REPO_ROOT, "build", "tools", "kiln"))
    parser.add_argument("--tuning")
    parser.add_argument("--precision", choices=("fp32", "bf16"))
    parser.add_argument("--shape", action="append", metavar="SPEC")
    parser.add_argument("--bench-shape", action="append", metavar="SPEC")
    parser.add_argument("--statistic", choices=("median", "min"), default="median")
    parser.add_argument("--work-dir")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--cuda-arch", type=int, default=90)
    parser.add_argument("--ort-cuda-option", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--openvino", action="store_true")
    parser.add_argument("--csv")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    VERBOSE = args.verbose
    if any("=" not in option for option in args.ort_cuda_option):
        parser.error("--ort-cuda-option takes KEY=VALUE")
    if args.ort_cuda_option and args.device != "cuda":
        parser.error("--ort-cuda-option needs --device cuda")
    args.ort_cuda_option = [tuple(option.split("=", 1)) for option in args.ort_cuda_option]
    if args.threads < 1 or args.iterations < 1 or args.rounds < 1 or args.warmup < 0:
        parser.error("--threads, --iterations and --rounds must be at least 1, --warmup at least 0")

    models = find_models(args.models)
    if not models:
        sys.exit("compare_onnxruntime: no .onnx model found under the given paths")
    missing = kiln_cli_status(args.kiln)
    if missing:
        print(f"kiln: {missing}", file=sys.stderr)
    import onnxruntime

    where = ""
    if args.device == "cuda":
        options = ", ".join(f"{k}={v}" for k, v in args.ort_cuda_option)
        where = f"CUDA (kiln sm_{args.cuda_arch}; onnxruntime's CUDA provider{' with ' + options if options else ''}), "
    print(f"onnxruntime {onnxruntime.__version__}, {where}{args.threads} thread(s), {args.rounds} round(s) of "
          f"{args.iterations} runs after {args.warmup} warm-up runs; times in ms, memory in MiB")
    with tempfile.TemporaryDirectory(prefix="kiln_bench_") as temporary:
        work_dir = args.work_dir or temporary
        os.makedirs(work_dir, exist_ok=True)
        rows = [measure(name, path, args, missing is None, work_dir) for name, path in models]
    print_table(rows)
    if args.csv:
        write_csv(rows, args.csv)
    return 0 if all("kiln/ort" in row for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
