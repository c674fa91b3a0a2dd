"""kiln served by a real tritonserver: mnist_8 and a symbolic sentence-embedding BERT from a plan and
from model.onnx, through HTTP and gRPC, against the test sets' onnxruntime outputs and `kiln run`;
auto-completed configs read back from the model-config endpoint; every backend parameter and config
field docs/serving.md names; the bad-config and bad-request catalogue, each with its message and the
server still serving afterwards; statistics and /metrics.

usage: test_triton_serving.py --source-root DIR --kiln KILN --backend SO --libkiln SO --compiler-library SO"""
import glob
import os
import re
import subprocess
import sys
import tempfile

import triton_server as ts

args = ts.arguments()
executable = ts.require_triton()
mnist_folder = ts.shared_folder(args.source_root, "models", "mnist_8")
bert_folder = ts.shared_folder(args.source_root, "models-exported", "bert_tiny_legacy")

import numpy as np  # noqa: E402
import tritonclient.grpc as grpc  # noqa: E402
import tritonclient.http as http  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

checks = ts.python_test_env.Checks(args.kiln)
check = checks.check
BERT_ATOL = 2e-5  # models-exported/README.md: bert_tiny_legacy
MNIST_ATOL = 1e-4


def kiln(*arguments):
    completed = subprocess.run([args.kiln, *arguments], capture_output=True, text=True)
    if completed.returncode != 0:
        print(completed.stdout + completed.stderr)
        raise SystemExit(f"kiln {' '.join(arguments)} failed")


def failure(call):
    """The message of the exception `call` raises, or None when it succeeds."""
    try:
        call()
    except InferenceServerException as error:
        return str(error)
    return None


def kiln_run(plan, inputs, work):
    """`kiln run`'s outputs for `inputs` (name -> array), read back as .npy."""
    os.makedirs(work, exist_ok=True)
    arguments = ["run", plan, "--output-dir", os.path.join(work, "run"), "--output-format", "npy"]
    for name, array in inputs.items():
        np.save(os.path.join(work, name + ".npy"), array)
        arguments += ["--input", f"{name}={os.path.join(work, name + '.npy')}"]
    kiln(*arguments)
    return {os.path.basename(p)[:-4]: np.load(p) for p in glob.glob(os.path.join(work, "run", "*.npy"))}


with tempfile.TemporaryDirectory(prefix="kiln_serving_") as work:
    mnist_plan = os.path.join(work, "mnist.kiln")
    bert_plan = os.path.join(work, "bert.kiln")
    kiln("compile", os.path.join(mnist_folder, "model.onnx"), "-o", mnist_plan)
    kiln("compile", os.path.join(bert_folder, "model.onnx"), "--shape", "batch=1..16", "--shape", "sequence=1..64",
         "-o", bert_plan)
    mnist_onnx = os.path.join(mnist_folder, "model.onnx")
    bert_onnx = os.path.join(bert_folder, "model.onnx")

    repository = os.path.join(work, "models")
    kiln_backend = 'backend: "kiln"\n'
    bert_inputs = "".join(f'input {{ name: "{n}" data_type: TYPE_INT64 dims: [ -1, -1 ] }}\n'
                          for n in ("input_ids", "attention_mask", "token_type_ids"))
    good_models = {
        # Two-line configs, completed from the plan.
        "mnist_plan": (kiln_backend, {"model.kiln": mnist_plan}),
        "mnist_onnx": (kiln_backend, {"model.onnx": mnist_onnx}),
        "bert_plan": (kiln_backend + 'parameters { key: "threads" value { string_value: "1" } }\n'
                      "instance_group { count: 2 kind: KIND_CPU }\n", {"model.kiln": bert_plan}),
        # The compile shapes come from the `shapes` parameter: max_batch_size follows batch's range.
        "bert_onnx": (kiln_backend + 'parameters { key: "shapes" value { string_value: "batch=1..8 sequence=1..48" } }\n',
                      {"model.onnx": bert_onnx}),
        "mnist_named": (kiln_backend + 'default_model_filename: "digits.kiln"\n', {"digits.kiln": mnist_plan}),
        # A symbolic plan served without batching: requests carry the whole shape, run as they come.
        "bert_whole": (kiln_backend + "max_batch_size: 0\n" + bert_inputs +
                       'output { name: "pooler_output" data_type: TYPE_FP32 dims: [ -1, 256 ] }\n',
                       {"model.kiln": bert_plan}),
    }
    with open(mnist_plan, "rb") as f:
        mnist_bytes = f.read()
    bad_models = {  # name: (config, files, what the load error must say)
        "corrupt_plan": (kiln_backend, {"model.kiln": b"this is not a kiln plan" * 50},
                         ["cannot load plan", "KILN_ERROR_INVALID_PLAN"]),
        "truncated_plan": (kiln_backend, {"model.kiln": mnist_bytes[: len(mnist_bytes) // 2]},
                           ["cannot load plan", "truncated"]),
        "broken_onnx": (kiln_backend, {"model.onnx": b"\x08\x07garbage that is not a protobuf"},
                        ["cannot compile", "KILN_ERROR_INVALID_MODEL"]),
        "no_model_file": (kiln_backend, {"README": b"no model here"}, ["no model file: none of", "1/model.kiln, ", "1/model.onnx exists"]),
        "unknown_parameter": (kiln_backend + 'parameters { key: "thread" value { string_value: "2" } }\n',
                              {"model.kiln": mnist_plan}, ["unknown parameter 'thread'", "threads, shapes"]),
        "bad_threads": (kiln_backend + 'parameters { key: "threads" value { string_value: "many" } }\n',
                        {"model.kiln": mnist_plan}, ["parameter threads is 'many'"]),
        "batch_too_big": (kiln_backend + "max_batch_size: 64\n", {"model.kiln": bert_plan},
                          ["max_batch_size 64 exceeds the plan's range of 'batch', 1..16"]),
        "batch_on_fixed": (kiln_backend + "max_batch_size: 4\n", {"model.kiln": mnist_plan},
                           ["max_batch_size 4 needs a plan whose inputs and outputs all lead with one symbolic batch"]),
        "wrong_config_dtype": (kiln_backend + 'input { name: "Input3" data_type: TYPE_FP64 dims: [ 1, 1, 28, 28 ] }\n',
                               {"model.kiln": mnist_plan}, ["input 'Input3' has data_type TYPE_FP64; the plan's is TYPE_FP32"]),
        "wrong_config_dims": (kiln_backend + 'input { name: "Input3" data_type: TYPE_FP32 dims: [ 1, 28, 28 ] }\n',
                              {"model.kiln": mnist_plan}, ["input 'Input3' has dims [1,28,28]; the plan's are [1,1,28,28]"]),
        "gpu_instances": (kiln_backend + "instance_group { kind: KIND_GPU }\n", {"model.kiln": mnist_plan}, ["GPU"]),
    }
    for name, (config, files) in good_models.items():
        ts.write_model(repository, name, config, files)
    for name, (config, files, _) in bad_models.items():
        ts.write_model(repository, name, config, files)

    with ts.TritonServer(executable, repository, args, work) as server:
        client, grpc_client = server.http(), server.grpc()
        for name in good_models:
            message = failure(lambda: client.load_model(name))
            check(message is None, f"model {name} loads" + (f": {message}" if message else ""))

        # Auto-completed configs, read back from the model-config endpoint.
        config = client.get_model_config("mnist_plan")
        check(config["max_batch_size"] == 0 and
              [(i["name"], i["data_type"], i["dims"]) for i in config["input"]] == [("Input3", "TYPE_FP32", [1, 1, 28, 28])] and
              [(o["name"], o["data_type"], o["dims"]) for o in config["output"]] ==
              [("Plus214_Output_0", "TYPE_FP32", [1, 10])], "mnist_plan's config is completed from the fixed-shape plan")
        config = client.get_model_config("bert_plan")
        check(config["max_batch_size"] == 16 and
              [(i["name"], i["data_type"], i["dims"]) for i in config["input"]] ==
              [(n, "TYPE_INT64", [-1]) for n in ("input_ids", "attention_mask", "token_type_ids")] and
              [(o["name"], o["dims"]) for o in config["output"]] == [("last_hidden_state", [-1, 256]), ("pooler_output", [256])],
              "bert_plan's config: max_batch_size 16 from batch=1..16, -1 for sequence")
        check(client.get_model_config("bert_onnx")["max_batch_size"] == 8,
              "bert_onnx: compiled with the `shapes` parameter (batch=1..8 gives max_batch_size 8)")
        check(client.get_model_config("bert_whole")["max_batch_size"] == 0 and
              [o["name"] for o in client.get_model_config("bert_whole")["output"]] == ["pooler_output"],
              "bert_whole keeps its explicit config (max_batch_size 0, one output)")
        check(len(glob.glob(os.path.join(repository, "bert_onnx", "1", "model.onnx.*.kiln"))) == 1,
              "the compiled plan of bert_onnx is cached beside model.onnx")
        log = server.log()
        check(re.search(r"kiln: instance 'bert_plan_0_0': 1 thread\(s\)", log) and
              re.search(r"kiln: instance 'bert_plan_0_1': 1 thread\(s\)", log),
              "bert_plan: instance_group count 2 gives two instances, each with the `threads` parameter's 1 thread")
        cores = os.cpu_count() or 1
        check(re.search(rf"kiln: instance 'mnist_plan_0': {max(1, cores)} thread\(s\)", log) is not None,
              f"mnist_plan: one instance takes all {cores} cores by default")

        # Results through HTTP and gRPC against the recorded onnxruntime outputs and `kiln run`.
        for module, endpoint, label in ((http, client, "HTTP"), (grpc, grpc_client, "gRPC")):
            for model in ("mnist_plan", "mnist_onnx", "mnist_named"):
                for data_set in sorted(glob.glob(os.path.join(mnist_folder, "test_data_set_*"))):
                    inputs, expected = ts.read_test_set(data_set)
                    got = ts.infer(endpoint, module, model, inputs)
                    check(all(ts.close(got.get(n), e, MNIST_ATOL) for n, e in expected.items()),
                          f"{label} {model} {os.path.basename(data_set)} equals onnxruntime's output")
            for model in ("bert_plan", "bert_onnx"):
                for data_set in sorted(glob.glob(os.path.join(bert_folder, "test_data_set_*"))):
                    inputs, expected = ts.read_test_set(data_set)
                    got = ts.infer(endpoint, module, model, inputs)
                    check(all(ts.close(got.get(n), e, BERT_ATOL) for n, e in expected.items()),
                          f"{label} {model} {os.path.basename(data_set)} {inputs['input_ids'].shape} equals "
                          "onnxruntime's outputs")
            inputs, expected = ts.read_test_set(os.path.join(bert_folder, "test_data_set_1"))
            got = ts.infer(endpoint, module, "bert_whole", inputs)
            check(ts.close(got.get("pooler_output"), expected["pooler_output"], BERT_ATOL),
                  f"{label} bert_whole runs a [3,40] request whole (no batching) and matches onnxruntime")
            got = ts.infer(endpoint, module, "bert_plan", inputs, outputs=["pooler_output"])
            check(list(got) == ["pooler_output"] and ts.close(got["pooler_output"], expected["pooler_output"], BERT_ATOL),
                  f"{label} bert_plan answers only the requested output")
        for plan, model, data_set in ((mnist_plan, "mnist_plan", os.path.join(mnist_folder, "test_data_set_1")),
                                      (bert_plan, "bert_plan", os.path.join(bert_folder, "test_data_set_1"))):
            inputs, _ = ts.read_test_set(data_set)
            reference = kiln_run(plan, inputs, os.path.join(work, "run_" + model))
            got = ts.infer(client, http, model, inputs)
            check(reference and all(ts.close(got.get(n), r, 1e-6, 1e-6) for n, r in reference.items()),
                  f"{model} through Triton equals `kiln run` on the same plan")

        # Models that must not load, each with the message a user can act on.
        for name, (_, _, needles) in bad_models.items():
            message = failure(lambda: client.load_model(name)) or ""
            print(f"      {name}: {message.strip()}")
            check(message and all(n in message for n in needles), f"{name} is refused: {' / '.join(needles)}")

        # Bad requests: each gets its error, then a good request still succeeds.
        bert_inputs_ok, bert_expected = ts.read_test_set(os.path.join(bert_folder, "test_data_set_0"))
        mnist_inputs_ok, mnist_expected = ts.read_test_set(os.path.join(mnist_folder, "test_data_set_0"))
        ids = bert_inputs_ok["input_ids"]

        def bert_request(**change):
            inputs = dict(bert_inputs_ok)
            inputs.update(change)
            return {n: a for n, a in inputs.items() if a is not None}

        long_ids = np.ones((1, 100), np.int64)
        bad_requests = [  # (label, model, inputs, what the error must say)
            ("wrong dtype (server's check)", "bert_plan", bert_request(input_ids=ids.astype(np.int32)), ["INT32", "INT64"]),
            ("wrong shape (server's check)", "mnist_plan", {"Input3": np.zeros((1, 1, 28, 27), np.float32)},
             ["Input3", "[1,1,28,27]"]),
            ("missing input (server's check)", "bert_plan", bert_request(attention_mask=None, token_type_ids=None),
             ["expected 3 inputs but got 1"]),
            ("batch above max_batch_size (server's check)", "bert_plan",
             {n: np.repeat(a, 17, axis=0) for n, a in bert_inputs_ok.items()}, ["batch-size must be <= 16"]),
            ("sequence above the plan's range (kiln)", "bert_plan",
             bert_request(input_ids=long_ids, attention_mask=long_ids, token_type_ids=long_ids),
             ["input 'input_ids' axis 1 (sequence) is 100; the plan allows 1..64"]),
            ("inputs disagree on a variable (kiln)", "bert_plan",
             bert_request(attention_mask=np.ones((1, 10), np.int64)), ["sequence=9", "sequence=10"]),
            ("empty sequence below the range (kiln)", "bert_whole",
             {n: np.zeros((1, 0), np.int64) for n in bert_inputs_ok}, ["sequence", "1..64"]),
        ]
        for label, model, inputs, needles in bad_requests:
            for module, endpoint, protocol in ((http, client, "HTTP"), (grpc, grpc_client, "gRPC")):
                message = failure(lambda: ts.infer(endpoint, module, model, inputs)) or ""
                print(f"      {protocol} {label}: {message.strip()}")
                check(message and all(n in message for n in needles), f"{protocol} {label}: {' / '.join(needles)}")
            still = ts.infer(client, http, "bert_plan", bert_inputs_ok)
            check(server.alive() and ts.close(still["pooler_output"], bert_expected["pooler_output"], BERT_ATOL) and
                  ts.close(ts.infer(client, http, "mnist_plan", mnist_inputs_ok)["Plus214_Output_0"],
                           mnist_expected["Plus214_Output_0"], MNIST_ATOL),
                  f"after '{label}' the server still serves bert_plan and mnist_plan")
        check(all(client.is_model_ready(name) for name in good_models), "every good model is still ready")

        # Statistics and metrics carry kiln's time.
        stats = client.get_inference_statistics("bert_plan")["model_stats"][0]
        compute = stats["inference_stats"]["compute_infer"]
        check(stats["inference_count"] > 0 and stats["execution_count"] > 0 and compute["ns"] > 0 and
              stats["inference_stats"]["fail"]["count"] >= 2,
              "bert_plan's statistics count executions, compute time and the failed requests")
        metrics = server.metrics()
        found = re.search(r'nv_inference_compute_infer_duration_us\{model="bert_plan",version="1"\} (\d+)', metrics)
        check(found is not None and int(found.group(1)) > 0, "/metrics shows bert_plan's compute time")

        # Unloading one model leaves the others serving.
        client.unload_model("mnist_onnx")
        check(not client.is_model_ready("mnist_onnx") and client.is_model_ready("mnist_plan") and
              ts.close(ts.infer(client, http, "mnist_plan", mnist_inputs_ok)["Plus214_Output_0"],
                       mnist_expected["Plus214_Output_0"], MNIST_ATOL), "unloading mnist_onnx leaves mnist_plan serving")
        message = failure(lambda: client.load_model("mnist_onnx"))
        check(message is None and "compiled plan cached in" in server.log(),
              "reloading mnist_onnx takes the cached plan")
        client.unload_model("mnist_onnx")
        cached = glob.glob(os.path.join(repository, "mnist_onnx", "1", "model.onnx.*.kiln"))[0]
        with open(cached, "r+b") as f:
            f.write(b"XXXXXXXX")  # its magic
        message = failure(lambda: client.load_model("mnist_onnx"))
        check(message is None and "recompiling: cannot load plan" in server.log() and
              ts.close(ts.infer(client, http, "mnist_onnx", mnist_inputs_ok)["Plus214_Output_0"],
                       mnist_expected["Plus214_Output_0"], MNIST_ATOL),
              "a damaged cached plan is recompiled, not served")
    if checks.failures:
        print(server.log()[-20000:])

    # libtriton_kiln needs only libkiln: without libkiln-compiler a plan serves and a model.onnx
    # gets an error saying what to do; KILN_COMPILER_LIBRARY names a compiler elsewhere.
    mnist_inputs, mnist_expected = ts.read_test_set(os.path.join(mnist_folder, "test_data_set_2"))
    environment = {"LD_LIBRARY_PATH": "", "KILN_COMPILER_LIBRARY": ""}
    with ts.TritonServer(executable, repository, args, work, env=environment, with_compiler=False,
                         name="backends-without-compiler") as server:
        client = server.http()
        check(failure(lambda: client.load_model("mnist_onnx")) is None and "compiled plan cached in" in server.log(),
              "without libkiln-compiler, model.onnx loads from its cached compiled plan")
        client.unload_model("mnist_onnx")
        os.remove(glob.glob(os.path.join(repository, "mnist_onnx", "1", "model.onnx.*.kiln"))[0])
        message = failure(lambda: client.load_model("mnist_onnx")) or ""
        print(f"      without libkiln-compiler, no cached plan: {message.strip()}")
        check("needs libkiln-compiler to compile it, which could not be opened" in message and
              "KILN_COMPILER_LIBRARY" in message, "without libkiln-compiler, model.onnx is refused naming the fix")
        check(failure(lambda: client.load_model("mnist_plan")) is None and
              ts.close(ts.infer(client, http, "mnist_plan", mnist_inputs)["Plus214_Output_0"],
                       mnist_expected["Plus214_Output_0"], MNIST_ATOL), "without libkiln-compiler, plans serve")
    environment = {"KILN_COMPILER_LIBRARY": os.path.realpath(args.compiler_library)}
    with ts.TritonServer(executable, repository, args, work, env=environment, with_compiler=False,
                         name="backends-compiler-elsewhere") as server:
        client = server.http()
        check(failure(lambda: client.load_model("mnist_onnx")) is None and
              ts.close(ts.infer(client, http, "mnist_onnx", mnist_inputs)["Plus214_Output_0"],
                       mnist_expected["Plus214_Output_0"], MNIST_ATOL),
              "KILN_COMPILER_LIBRARY names the compiler; model.onnx compiles and serves")
checks.finish()
