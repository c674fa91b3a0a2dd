"""Unloading and reloading a model through a real tritonserver 100 times: each reload serves a
correct answer, and the server's resident memory stays flat (a plan, its mapped weights or its
kernels leaked per reload would add megabytes each time).

usage: test_triton_reload.py --source-root DIR --kiln KILN --backend SO --libkiln SO --compiler-library SO"""
import os
import subprocess
import tempfile

import triton_server as ts

args = ts.arguments()
executable = ts.require_triton()
bert_folder = ts.shared_folder(args.source_root, "models-exported", "bert_tiny_legacy")

import tritonclient.http as http  # noqa: E402

checks = ts.python_test_env.Checks(args.kiln)
check = checks.check
WARMUP, CYCLES = 20, 100
# Growth allowed over CYCLES reloads after the warm-up (the first ~20 reloads grow the allocator's
# arenas once, by about one plan's worth, then it stays flat): allocator and server bookkeeping
# noise. One leaked plan of this model is ~21 MB of weights plus its kernels and arena, so a leak
# would add gigabytes.
ALLOWED_GROWTH_KIB = 16 * 1024

with tempfile.TemporaryDirectory(prefix="kiln_reload_") as work:
    plan = os.path.join(work, "bert.kiln")
    subprocess.run([args.kiln, "compile", os.path.join(bert_folder, "model.onnx"), "--shape", "batch=1..4",
                    "--shape", "sequence=1..64", "-o", plan], check=True, capture_output=True)
    repository = os.path.join(work, "models")
    ts.write_model(repository, "bert", 'backend: "kiln"\n', {"model.kiln": plan})
    inputs, expected = ts.read_test_set(os.path.join(bert_folder, "test_data_set_1"))
    with ts.TritonServer(executable, repository, args, work) as server:
        client = server.http()
        served = 0
        rss = []
        for cycle in range(WARMUP + CYCLES):
            client.load_model("bert")
            got = ts.infer(client, http, "bert", inputs, ["pooler_output"])["pooler_output"]
            served += ts.close(got, expected["pooler_output"], 2e-5)
            client.unload_model("bert")
            if cycle + 1 >= WARMUP and (cycle + 1 - WARMUP) % 10 == 0:
                rss.append(server.rss_kib())
        print(f"      server RSS (KiB) after {WARMUP} reloads, then every 10: {rss}")
        check(served == WARMUP + CYCLES, f"every one of {WARMUP + CYCLES} reloads served the right answer ({served})")
        growth = rss[-1] - rss[0]
        check(growth < ALLOWED_GROWTH_KIB,
              f"RSS flat over {CYCLES} reloads: grew {growth} KiB (allowed {ALLOWED_GROWTH_KIB})")
        check(server.alive() and "bert" not in [m["name"] for m in client.get_model_repository_index()
                                                 if m.get("state") == "READY"],
              "the server is alive with the model unloaded")
checks.finish()
