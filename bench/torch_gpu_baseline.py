#!/usr/bin/env python3
"""The GPU baseline beside kiln's CUDA plans: the same architectures in PyTorch, random weights.

usage (on a machine with an NVIDIA GPU, torch, torchvision and transformers):
    python3 bench/torch_gpu_baseline.py [--iterations N]

Times one inference per call the way `kiln bench PLAN` does for a CUDA plan: the input from host
memory to the GPU, the model, the output back to the host, synchronised; min and median of N
after 10 warm-ups. fp32 runs with TF32 off (kiln computes plain fp32), and fp16 for comparison.
The models match bench/export_models.py's in architecture and shape (torchvision's ResNet-50 and
MobileNetV2, a BERT-base encoder at sequence 128), not in weights: timings do not depend on them.

A second baseline beside onnxruntime's CUDA execution provider (bench/compare_onnxruntime.py
--device cuda; bench/README.md, "A GPU session", carries onnxruntime-gpu to a lent machine in parts).
PyTorch calls the same cuDNN and cuBLAS kernels, eagerly, one op at a time.
"""
import argparse
import time

import torch


def bench(name, model, make_inputs, iterations):
    device = torch.device("cuda")
    with torch.inference_mode():
        inputs = make_inputs()
        for _ in range(10):
            model(*[x.to(device) for x in inputs])
        torch.cuda.synchronize()
        times = []
        for _ in range(iterations):
            start = time.perf_counter()
            out = model(*[x.to(device) for x in inputs])
            first = out.last_hidden_state if hasattr(out, "last_hidden_state") else out
            first.cpu()
            times.append((time.perf_counter() - start) * 1e3)
        times.sort()
        print(f"TORCH {name} min_ms {times[0]:.3f} median_ms {times[len(times) // 2]:.3f}", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=50)
    args = parser.parse_args()
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    device = torch.device("cuda")
    print("torch", torch.__version__, torch.cuda.get_device_name(0), flush=True)

    import torchvision
    image = lambda: [torch.randn(1, 3, 224, 224)]
    resnet50 = torchvision.models.resnet50(weights=None).eval().to(device)
    bench("resnet50_fp32", resnet50, image, args.iterations)
    bench("resnet50_fp16", resnet50.half(), lambda: [torch.randn(1, 3, 224, 224).half()], args.iterations)
    mobilenetv2 = torchvision.models.mobilenet_v2(weights=None).eval().to(device)
    bench("mobilenetv2_fp32", mobilenetv2, image, args.iterations)

    from transformers import BertConfig, BertModel
    bert = BertModel(BertConfig()).eval().to(device)
    tokens = lambda: [torch.randint(0, 30522, (1, 128)), torch.ones(1, 128, dtype=torch.long),
                      torch.zeros(1, 128, dtype=torch.long)]
    encoder = lambda ids, mask, types: bert(input_ids=ids, attention_mask=mask, token_type_ids=types)
    bench("bert_base_fp32", encoder, tokens, args.iterations)
    bert.half()
    bench("bert_base_fp16", encoder, tokens, args.iterations)


if __name__ == "__main__":
    main()
