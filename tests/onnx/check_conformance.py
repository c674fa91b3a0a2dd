#!/usr/bin/env python3
"""Runs `kiln test-onnx` over an ONNX test folder and holds the result to an expected-failures list.

The test fails when a test outside the list fails, and when a listed test passes (so the list
stays exact). The list has one line per test, `test_name: reason`; `#` starts a comment.

usage: check_conformance.py KILN DATA_DIR EXPECTED_FAILURES [--update] [--sample=N] [-- RUNNER_OPTION...]
  --update rewrites EXPECTED_FAILURES from this run, keeping the reasons already written and taking
           the runner's failure message for new entries. Exits 77 (skip) when DATA_DIR is absent.
  --sample=N runs one test folder in N (every Nth by name, so the same ones each time) and holds
           only those to the list: the sanitizer builds use it, where all of them take too long.
"""
import pathlib
import re
import subprocess
import sys
import tempfile


def sample_folder(data, every, into):
    """Links every `every`-th test folder of `data` (sorted by name) into the folder `into`."""
    tests = sorted(p for p in data.iterdir() if p.is_dir())
    for test in tests[::every]:
        (into / test.name).symlink_to(test.resolve(), target_is_directory=True)
    return {test.name for test in tests[::every]}


def read_expected(path):
    expected = {}
    if path.exists():
        for line in path.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                name, _, reason = line.partition(":")
                expected[name.strip()] = reason.strip()
    return expected


def main():
    argv = sys.argv[1:]
    runner_options = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    args = [a for a in argv if not a.startswith("--")]
    update = "--update" in argv
    sample = next((int(a.split("=", 1)[1]) for a in argv if a.startswith("--sample=")), 0)
    kiln, data, expected_path = pathlib.Path(args[0]), pathlib.Path(args[1]), pathlib.Path(args[2])
    if not data.is_dir():
        print(f"skip: {data} is not here")
        return 77
    sampled = None
    with tempfile.TemporaryDirectory() as sample_dir:
        if sample > 1:
            sampled = sample_folder(data, sample, pathlib.Path(sample_dir))
            print(f"sample: {len(sampled)} tests, one in {sample}")
            data = pathlib.Path(sample_dir)
        run = subprocess.run([str(kiln), "test-onnx", "--report-only", *runner_options, str(data)],
                             capture_output=True, text=True)
    failures = {}
    for line in run.stdout.splitlines():
        match = re.match(r"FAIL (\S+): (.*)", line)
        if match:
            failures[match.group(1)] = match.group(2)
    summary = [l for l in run.stdout.splitlines() if re.match(r"\d+ passed, \d+ failed, \d+ skipped", l)]
    if run.returncode != 0 or not summary:
        print(run.stdout[-4000:], run.stderr[-4000:])
        print("the runner did not finish with a summary line")
        return 1
    print(summary[-1])
    expected = read_expected(expected_path)
    if sampled is not None:
        if update:
            print("--update needs the whole folder, not --sample")
            return 2
        expected = {name: reason for name, reason in expected.items() if name in sampled}
    if update:
        lines = [f"{name}: {expected.get(name) or reason}" for name, reason in sorted(failures.items())]
        expected_path.write_text("# Expected failures of the ONNX node tests: test name, then why it fails.\n"
                                 "# Kept exact by tests/onnx/check_conformance.py; regenerate with --update.\n"
                                 + "\n".join(lines) + "\n")
        print(f"wrote {len(lines)} expected failures to {expected_path}")
        return 0
    unexpected = sorted(set(failures) - set(expected))
    fixed = sorted(set(expected) - set(failures))
    for name in unexpected:
        print(f"UNEXPECTED FAILURE {name}: {failures[name]}")
    for name in fixed:
        print(f"NOW PASSES (remove it from the list) {name}")
    return 1 if unexpected or fixed else 0


sys.exit(main())
