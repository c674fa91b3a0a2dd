"""Dynamic batching of a symbolic plan through a real tritonserver: 16 concurrent clients (half
HTTP, half gRPC) send 50 requests each of bert_tiny_legacy (batch=1..16, sequence=1..64) at two
sequence lengths; every response must equal its own request's reference (onnxruntime, or `kiln run`
without it) and no other, and the server's statistics must show batches larger than one.

Twice: once as Triton batches by default (only requests of equal shapes together), on two
instances of one thread sharing the plan, and once (one instance) with
allow_ragged_batch on the inputs, where Triton hands the backend batches of mixed sequence lengths
and the backend runs each shape as its own group (its verbose log says so).

usage: test_triton_batching.py --source-root DIR --kiln KILN --backend SO --libkiln SO --compiler-library SO"""
import os
import re
import subprocess
import sys
import tempfile
import threading

import triton_server as ts

args = ts.arguments()
executable = ts.require_triton()
bert_folder = ts.shared_folder(args.source_root, "models-exported", "bert_tiny_legacy")

import numpy as np  # noqa: E402
import tritonclient.grpc as grpc  # noqa: E402
import tritonclient.http as http  # noqa: E402

checks = ts.python_test_env.Checks(args.kiln)
check = checks.check
CLIENTS, REQUESTS, DISTINCT = 16, 50, 64
ATOL = 2e-5


def distinct_inputs():
    """DISTINCT requests: sequence 8 or 16, seeded random tokens, some right padding."""
    inputs = []
    for k in range(DISTINCT):
        rng = np.random.default_rng(1000 + k)
        length = 8 if k % 2 == 0 else 16
        ids = rng.integers(3, 8000, size=(1, length), dtype=np.int64)
        ids[0, 0], ids[0, -1] = 1, 2
        mask = np.ones((1, length), np.int64)
        mask[0, length - k % 4:] = 0
        types = np.zeros((1, length), np.int64)
        types[0, length // 2:] = 1
        inputs.append({"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
    return inputs


def references(inputs, plan, work):
    try:
        import onnxruntime

        session = onnxruntime.InferenceSession(os.path.join(bert_folder, "model.onnx"),
                                               providers=["CPUExecutionProvider"])
        return [session.run(["pooler_output"], request)[0] for request in inputs], "onnxruntime"
    except ImportError:
        pass
    outputs = []
    for k, request in enumerate(inputs):
        arguments = [args.kiln, "run", plan, "--output-dir", os.path.join(work, f"ref{k}"), "--output-format", "npy"]
        for name, array in request.items():
            np.save(os.path.join(work, f"{name}{k}.npy"), array)
            arguments += ["--input", f"{name}={os.path.join(work, f'{name}{k}.npy')}"]
        subprocess.run(arguments, check=True, capture_output=True)
        outputs.append(np.load(os.path.join(work, f"ref{k}", "pooler_output.npy")))
    return outputs, "kiln run"


with tempfile.TemporaryDirectory(prefix="kiln_batching_") as work:
    plan = os.path.join(work, "bert.kiln")
    subprocess.run([args.kiln, "compile", os.path.join(bert_folder, "model.onnx"), "--shape", "batch=1..16",
                    "--shape", "sequence=1..64", "-o", plan], check=True, capture_output=True)
    inputs = distinct_inputs()
    expected, source = references(inputs, plan, work)
    nearest_other = min(float(np.max(np.abs(expected[a] - expected[b])))
                        for a in range(DISTINCT) for b in range(a + 1, DISTINCT))
    check(nearest_other > 100 * ATOL, f"the {DISTINCT} requests' references ({source}) differ from each other "
          f"(closest pair {nearest_other:.3g}), so a response given to the wrong request is caught")

    repository = os.path.join(work, "models")
    batching = 'backend: "kiln"\ndynamic_batching { max_queue_delay_microseconds: 20000 }\n'
    # Two instances of one thread sharing the plan run batches at the same time.
    ts.write_model(repository, "bert", batching + "instance_group { count: 2 kind: KIND_CPU }\n"
                   'parameters { key: "threads" value { string_value: "1" } }\n', {"model.kiln": plan})
    ragged = "".join(f'input {{ name: "{n}" data_type: TYPE_INT64 dims: [ -1 ] allow_ragged_batch: true }}\n'
                     for n in ("input_ids", "attention_mask", "token_type_ids"))
    ts.write_model(repository, "bert_ragged", batching + "instance_group { count: 1 kind: KIND_CPU }\n"
                   "max_batch_size: 16\n" + ragged, {"model.kiln": plan})
    with ts.TritonServer(executable, repository, args, work, extra=["--log-verbose=1"]) as server:
        for model in ("bert", "bert_ragged"):
            server.http().load_model(model)
            results = {}  # (client, request) -> (k, pooler_output or the error)

            def client_thread(index):
                module = http if index % 2 == 0 else grpc
                client = server.http() if module is http else server.grpc()
                for r in range(REQUESTS):
                    # Neighbouring clients alternate sequence lengths, so the queue mixes them.
                    k = (index * 51 + r * 7) % DISTINCT
                    try:
                        results[index, r] = (k, ts.infer(client, module, model, inputs[k],
                                                         ["pooler_output"])["pooler_output"])
                    except Exception as error:  # recorded and reported as a failed check below
                        results[index, r] = (k, error)

            threads = [threading.Thread(target=client_thread, args=(i,)) for i in range(CLIENTS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()

            wrong = [(key, k, value) for key, (k, value) in results.items()
                     if not isinstance(value, np.ndarray) or not ts.close(value, expected[k], ATOL)]
            for key, k, value in wrong[:5]:
                print(f"      client {key[0]} request {key[1]} (input {k}): "
                      f"{value if not isinstance(value, np.ndarray) else 'wrong values'}")
            check(len(results) == CLIENTS * REQUESTS and not wrong,
                  f"{model}: all {CLIENTS} x {REQUESTS} responses arrived and each equals its own request's "
                  f"reference ({len(wrong)} wrong)")

            stats = server.http().get_inference_statistics(model)["model_stats"][0]
            batches = {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in stats["batch_stats"]}
            print(f"      {model}: plan runs by batch size (size: runs): {dict(sorted(batches.items()))}")
            print(f"      {model}: inference_count {stats['inference_count']}, execution_count {stats['execution_count']}")
            check(any(size > 1 for size in batches), f"{model}: the statistics show batches larger than one request")
            check(int(stats["inference_count"]) == CLIENTS * REQUESTS and
                  sum(size * count for size, count in batches.items()) == CLIENTS * REQUESTS,
                  f"{model}: every request is counted once, in the inference count and in the batch statistics")
            check(int(stats["execution_count"]) < int(stats["inference_count"]),
                  f"{model}: fewer executions than requests: requests shared runs")
        instances = set(re.findall(r"kiln: instance '(bert_0_\d)' executes", server.log()))
        check(instances == {"bert_0_0", "bert_0_1"}, f"bert: both instances ran batches ({sorted(instances)})")
        split = len(re.findall(r"requests of 'bert_ragged' in \d+ runs \(their shapes differ past the batch\)",
                               server.log()))
        print(f"      bert_ragged: {split} executions held several shapes and were run as one group per shape")
        check(split > 0, "bert_ragged: Triton's ragged batches of mixed sequence lengths are split by shape")
checks.finish()
