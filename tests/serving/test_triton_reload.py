"""Unloading and reloading a model through a real tritonserver 100 times: each reload serves a
correct answer, and the server's resident memory stays flat (a plan, its mapped weights or its
kernels leaked per reload would add megabytes each time).

usage: test_triton_reload.py --source-root DIR --kiln KILN --backend SO --libkiln SO --compiler-library SO"""
import os
import statistics
import subprocess
import tempfile
import time

import triton_server as ts

args = ts.arguments()
executable = ts.require_triton()
bert_folder = ts.shared_folder(args.source_root, "models-exported", "bert_tiny_legacy")

import tritonclient.http as http  # noqa: E402

checks = ts.python_test_env.Checks(args.kiln)
check = checks.check
WARMUP, CYCLES = 20, 100
# Growth allowed over CYCLES reloads after the warm-up (the first reloads grow the allocator's
# arenas): allocator and server bookkeeping noise. One leaked plan of this model is ~21 MB of
# weights plus its kernels and arena, so a leaked plan per reload would add gigabytes.
ALLOWED_GROWTH_KIB = 4 * 1024

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

        def unloaded():
            """Waits until the server has finished unloading (unload_model returns before)."""
            deadline = time.time() + 30
            while time.time() < deadline:
                states = {m["name"]: m.get("state") for m in client.get_model_repository_index()}
                if states.get("bert") != "READY" and states.get("bert") != "UNLOADING":
                    return True
                time.sleep(0.005)
            return False

        finished = True
        for cycle in range(WARMUP + CYCLES):
            client.load_model("bert")
            got = ts.infer(client, http, "bert", inputs, ["pooler_output"])["pooler_output"]
            served += ts.close(got, expected["pooler_output"], 2e-5)
            client.unload_model("bert")
            finished = unloaded() and finished
            if cycle >= WARMUP:
                rss.append(server.rss_kib())
        print(f"      server RSS (KiB) after each of the last {CYCLES} reloads, every 10th: {rss[::10]}")
        check(served == WARMUP + CYCLES, f"every one of {WARMUP + CYCLES} reloads served the right answer ({served})")
        check(finished, "every unload finished")
        # Medians of the first and last 20 samples: robust to the allocator keeping a freed plan's
        # worth of pages now and then; a leak grows steadily.
        growth = statistics.median(rss[-20:]) - statistics.median(rss[:20])
        check(growth < ALLOWED_GROWTH_KIB,
              f"RSS flat over {CYCLES} reloads: the median grew {growth:.0f} KiB (allowed {ALLOWED_GROWTH_KIB})")
        check(server.alive() and "bert" not in [m["name"] for m in client.get_model_repository_index()
                                                 if m.get("state") == "READY"],
              "the server is alive with the model unloaded")
checks.finish()
