"""Throughput and latency of a symbolic sentence-embedding model served by tritonserver with the kiln
backend, at 1, 4 and 16 concurrent clients, with and without dynamic batching, against the same plan
in process (`kiln bench`).

    .venv/bin/python bench/triton_serving.py --build build [--model ../shared/data/models-exported/bert_tiny_legacy/model.onnx]
        [--sequence 16] [--seconds 8] [--clients 1,4,16] [--protocol raw-http|grpc|http]

Needs nvidia-pytriton and tritonclient[grpc,http] in the Python running it (tests/serving installs
them into .venv). Each client is a thread with its own connection sending one request (batch 1,
`--sequence` tokens) after another for `--seconds`; latency is the client's, request to response.
`raw-http` (the default) sends a prepared KServe v2 request with the binary tensor extension over
a kept-alive http.client connection and checks only the status and length of the answer, so that
the Python client costs little CPU beside the server on a small machine; `grpc` and `http` go
through tritonclient (numpy in and out, protobuf or JSON), as an application would.
The server's own share of it comes from Triton's statistics: per request, the time from arrival to
response minus kiln's compute time (queueing included). Clients and server share the machine."""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "serving"))
import triton_server as ts  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--model", default=os.path.join("..", "shared", "data", "models-exported", "bert_tiny_legacy",
                                                        "model.onnx"))
    parser.add_argument("--sequence", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--clients", default="1,4,16")
    parser.add_argument("--protocol", default="raw-http", choices=["raw-http", "grpc", "http"])
    parser.add_argument("--queue-delay-us", type=int, default=1000)
    parser.add_argument("--instances", type=int, default=1, help="instance_group count of both models")
    parser.add_argument("--threads", type=int, default=0, help="the `threads` parameter (0: the default)")
    options = parser.parse_args()
    kiln = os.path.join(options.build, "tools", "kiln")
    paths = argparse.Namespace(backend=os.path.join(options.build, "serving", "triton", "libtriton_kiln.so"),
                               libkiln=os.path.join(options.build, "capi", "libkiln.so.0"),
                               compiler_library=os.path.join(options.build, "capi", "libkiln-compiler.so.0"))
    executable = ts.require_triton()
    import tritonclient.grpc as grpc
    import tritonclient.http as http

    module = {"grpc": grpc, "http": http, "raw-http": None}[options.protocol]
    with tempfile.TemporaryDirectory(prefix="kiln_triton_bench_") as work:
        plan = os.path.join(work, "model.kiln")
        subprocess.run([kiln, "compile", options.model, "--shape", "batch=1..16", "--shape", "sequence=1..64", "-o",
                        plan], check=True, capture_output=True)
        in_process = {}
        for batch in (1, 16):
            bench = subprocess.run([kiln, "bench", plan, "--shape", f"batch={batch}", "--shape",
                                    f"sequence={options.sequence}", "--iterations", "300", "--warmup", "30"],
                                   check=True, capture_output=True, text=True).stdout
            in_process[batch] = {k: float(v) for k, v in re.findall(r"^(\w+_ms) ([0-9.eE+-]+)$", bench, re.MULTILINE)}
        print(f"kiln bench, in process, sequence {options.sequence}: batch 1 median "
              f"{in_process[1]['median_ms']:.3f} ms, p90 {in_process[1]['p90_ms']:.3f}; batch 16 median "
              f"{in_process[16]['median_ms']:.3f} ms ({1000 * 16 / in_process[16]['median_ms']:.0f} sequences/s)")

        repository = os.path.join(work, "models")
        common = f'backend: "kiln"\ninstance_group {{ count: {options.instances} kind: KIND_CPU }}\n'
        if options.threads:
            common += f'parameters {{ key: "threads" value {{ string_value: "{options.threads}" }} }}\n'
        ts.write_model(repository, "plain", common, {"model.kiln": plan})
        ts.write_model(repository, "batched", common + "dynamic_batching { max_queue_delay_microseconds: "
                       f"{options.queue_delay_us} }}\n", {"model.kiln": plan})
        request = token_request(options.model, options.sequence)
        with ts.TritonServer(executable, repository, paths, work) as server:
            print(f"\n{options.protocol}, batch-1 requests of {options.sequence} tokens, {options.seconds:g} s each, "
                  f"{options.instances} instance(s), threads {options.threads or 'default'}, queue delay "
                  f"{options.queue_delay_us} us")
            print("| model config | clients | requests/s | p50 ms | p99 ms | server-side overhead per request, ms "
                  "| requests per run | kiln ms per run |")
            print("|---|---|---|---|---|---|---|---|")
            for model in ("plain", "batched"):
                server.http().load_model(model)
                for clients in (int(c) for c in options.clients.split(",")):
                    row = measure(server, module, model, request, clients, options.seconds)
                    print(f"| {'dynamic batching' if model == 'batched' else 'no batching'} | {clients} | "
                          f"{row['throughput']:.0f} | {row['p50']:.3f} | {row['p99']:.3f} | "
                          f"{row['server_overhead']:.3f} | {row['mean_batch']:.2f} | {row['run_ms']:.3f} |", flush=True)
                server.http().unload_model(model)


def token_request(model_path, sequence):
    """One batch-1 request for the model's inputs, each [1, sequence] int64: seeded random token ids,
    an all-ones attention mask, zero token types, positions 0..sequence-1 (BERT-style encoders
    exported by transformers or by bench/export_models.py name their inputs so)."""
    import onnx

    rng = np.random.default_rng(0)
    makers = {"input_ids": lambda: rng.integers(3, 8000, size=(1, sequence), dtype=np.int64),
              "attention_mask": lambda: np.ones((1, sequence), dtype=np.int64),
              "token_type_ids": lambda: np.zeros((1, sequence), dtype=np.int64),
              "position_ids": lambda: np.arange(sequence, dtype=np.int64).reshape(1, sequence)}
    graph = onnx.load(model_path, load_external_data=False).graph
    initializers = {tensor.name for tensor in graph.initializer}
    names = [value.name for value in graph.input if value.name not in initializers]
    unknown = [name for name in names if name not in makers]
    if unknown:
        sys.exit(f"triton_serving.py: do not know what to send for input(s) {unknown} of {model_path}; "
                 f"it knows {sorted(makers)}")
    return {name: makers[name]() for name in names}


def statistics(server, model):
    """Triton's cumulative counters: requests, plan runs, and the per-request sums of time in the
    server (arrival to response) and of kiln's compute time (each request counts its run's)."""
    stats = server.http().get_inference_statistics(model)["model_stats"][0]
    inference = stats["inference_stats"]
    run_ns = sum(int(b["compute_infer"]["ns"]) for b in stats["batch_stats"])  # once per plan run
    return (int(stats["inference_count"]), int(stats["execution_count"]), int(inference["success"]["ns"]),
            int(inference["compute_infer"]["ns"]), run_ns)


class RawHttpClient:
    """One kept-alive HTTP connection sending one prepared binary-tensor inference request."""

    def __init__(self, port, model, request):
        import http.client
        import json

        header = {"inputs": [{"name": name, "shape": list(array.shape), "datatype": "INT64",
                              "parameters": {"binary_data_size": array.nbytes}} for name, array in request.items()],
                  "outputs": [{"name": "pooler_output", "parameters": {"binary_data": True}}]}
        header_bytes = json.dumps(header).encode()
        self.body = header_bytes + b"".join(array.tobytes() for array in request.values())
        self.headers = {"Inference-Header-Content-Length": str(len(header_bytes)),
                        "Content-Type": "application/octet-stream"}
        self.path = f"/v2/models/{model}/infer"
        self.connection = http.client.HTTPConnection("127.0.0.1", port)

    def infer(self):
        self.connection.request("POST", self.path, body=self.body, headers=self.headers)
        response = self.connection.getresponse()
        payload = response.read()
        if response.status != 200 or len(payload) < 256 * 4:
            raise RuntimeError(f"inference failed: {response.status} {payload[:200]!r}")
        return payload

    def close(self):
        self.connection.close()


def make_sender(server, module, model, request):
    """A function sending one request on a connection of its own."""
    if module is None:
        client = RawHttpClient(server.http_port, model, request)
        server.clients.append(client)
        return client.infer
    client = server.grpc() if module.__name__.endswith("grpc") else server.http()
    return lambda: ts.infer(client, module, model, request, ["pooler_output"])


def measure(server, module, model, request, clients, seconds):
    # Warm up (first runs allocate the arenas), then time.
    warm = make_sender(server, module, model, request)
    for _ in range(20):
        warm()
    before = statistics(server, model)
    latencies = [[] for _ in range(clients)]
    deadline = time.perf_counter() + seconds
    barrier = threading.Barrier(clients)

    def client_thread(index):
        send = make_sender(server, module, model, request)
        barrier.wait()
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            send()
            latencies[index].append(time.perf_counter() - start)

    threads = [threading.Thread(target=client_thread, args=(i,)) for i in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    after = statistics(server, model)
    every = np.array([x for per_client in latencies for x in per_client]) * 1000
    requests = after[0] - before[0]
    executions = after[1] - before[1]
    # Time in the server not spent in kiln's run: queueing, batching, copies, the protocol's end.
    overhead_ns = ((after[2] - before[2]) - (after[3] - before[3])) / max(requests, 1)
    return {"throughput": len(every) / elapsed, "p50": float(np.percentile(every, 50)),
            "p99": float(np.percentile(every, 99)),
            "server_overhead": overhead_ns / 1e6,
            "mean_batch": requests / max(executions, 1),
            "run_ms": (after[4] - before[4]) / max(executions, 1) / 1e6}


if __name__ == "__main__":
    main()
