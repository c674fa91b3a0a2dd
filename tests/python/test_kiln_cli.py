"""`kiln run` with .npy files and `kiln bench`, on mnist_8: .npy in and out give the reference outputs,
.npy and .pb inputs give the same bytes, and bench prints every figure compare_onnxruntime.py parses.

usage: test_kiln_cli.py --source-root DIR --kiln KILN_CLI [--python VENV_PYTHON]
"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_test_env  # noqa: E402

args = python_test_env.cli_arguments()
python_test_env.require_numpy_and_onnx(args.python)
model_folder = python_test_env.shared_model(args.source_root, "mnist_8")

import numpy as np  # noqa: E402

checks = python_test_env.Checks(args.kiln)
check, kiln = checks.check, checks.kiln



with tempfile.TemporaryDirectory(prefix="kiln_cli_test_") as work:
    model = os.path.join(model_folder, "model.onnx")
    plan = os.path.join(work, "mnist.kiln")
    check(kiln("compile", model, "-o", plan).returncode == 0, "kiln compile mnist_8")
    data_set = os.path.join(model_folder, "test_data_set_0")
    x = python_test_env.read_tensor(os.path.join(data_set, "input_0.pb"))
    expected = python_test_env.read_tensor(os.path.join(data_set, "output_0.pb"))
    np.save(os.path.join(work, "x.npy"), x)

    inspect = subprocess.run([args.kiln, "inspect", plan], capture_output=True, text=True).stdout
    input_name = re.search(r"inputs:\n  (\S+):", inspect).group(1)
    output_name = re.search(r"outputs:\n  (\S+):", inspect).group(1)
    safe_output = re.sub(r"[^A-Za-z0-9._-]", "_", output_name)

    run = kiln("run", plan, "--input", f"{input_name}={work}/x.npy", "--output-dir", f"{work}/npy",
               "--output-format", "npy")
    npy_path = os.path.join(work, "npy", safe_output + ".npy")
    check(run.returncode == 0 and os.path.exists(npy_path), "kiln run reads .npy, writes .npy")
    if os.path.exists(npy_path):
        produced = np.load(npy_path)
        check(produced.dtype == np.float32 and produced.shape == expected.shape and
              float(np.max(np.abs(produced - expected))) <= 1e-4, "the .npy output matches the reference")
    run_pb = kiln("run", plan, "--input", f"{input_name}={data_set}/input_0.pb", "--output-dir", f"{work}/pb")
    pb_path = os.path.join(work, "pb", safe_output + ".pb")
    check(run_pb.returncode == 0 and os.path.exists(npy_path) and
          np.array_equal(python_test_env.read_tensor(pb_path), np.load(npy_path)), ".pb and .npy runs agree bit for bit")

    # Every kiln dtype and shape round-trips through numpy's reader: 0-d, 1-d, 3-d, bool, int, float16.
    for dtype in (np.float32, np.float64, np.float16, np.int64, np.int32, np.int8, np.uint8, np.bool_):
        array = (np.arange(24) % 3).astype(dtype).reshape(2, 3, 4)
        np.save(os.path.join(work, "a.npy"), array)
        bad = kiln("run", plan, "--input", f"{input_name}={work}/a.npy")
        check(bad.returncode == 1 and input_name in bad.stderr, f".npy {np.dtype(dtype).name} (2, 3, 4) input is "
              "read, then rejected by libkiln naming the input")
    np.save(os.path.join(work, "f.npy"), np.asfortranarray(np.ones((2, 3), np.float32)))
    fortran = kiln("run", plan, "--input", f"{input_name}={work}/f.npy")
    check(fortran.returncode == 1 and "Fortran-order" in fortran.stderr, "a Fortran-order .npy is refused")
    np.save(os.path.join(work, "c.npy"), np.ones(3, np.complex64))
    complex_run = kiln("run", plan, "--input", f"{input_name}={work}/c.npy")
    check(complex_run.returncode == 1 and "no kiln equivalent" in complex_run.stderr, "a complex .npy is refused")
    with open(os.path.join(work, "t.npy"), "wb") as f:
        f.write(open(os.path.join(work, "x.npy"), "rb").read()[:200])
    truncated = kiln("run", plan, "--input", f"{input_name}={work}/t.npy")
    check(truncated.returncode == 1 and "truncated" in truncated.stderr, "a truncated .npy is refused")
    check(kiln("run", plan, "--output-format", "csv").returncode == 2, "an unknown --output-format is a usage error")

    # kiln bench: a plan, then the model itself (compiled first).
    figures_needed = ["load_ms", "first_run_ms", "min_ms", "median_ms", "p90_ms", "peak_rss_mib"]
    for target, extra in ((plan, []), (model, ["compile_ms"])):
        bench = kiln("bench", target, "--iterations", "20", "--warmup", "2", "--threads", "1")
        figures = dict(re.findall(r"^(\w+) ([-+0-9.eE]+)$", bench.stdout, re.MULTILINE))
        check(bench.returncode == 0 and all(k in figures for k in figures_needed + extra),
              f"kiln bench {os.path.basename(target)} prints {', '.join(figures_needed + extra)}")
        if bench.returncode == 0 and "min_ms" in figures:
            check(float(figures["min_ms"]) <= float(figures["median_ms"]) <= float(figures["p90_ms"]),
                  "min <= median <= p90")
    check(kiln("bench", "--help").returncode == 0, "kiln bench --help")
    check(kiln("bench", plan, "--iterations", "0").returncode == 2, "--iterations 0 is a usage error")
    missing = kiln("bench", os.path.join(work, "missing.kiln"))
    check(missing.returncode == 1 and "missing.kiln" in missing.stderr, "a missing plan is an error naming it")

checks.finish()
