"""`kiln compile --precision bf16` on convolutions (src/tensor/tensor_conv_bf16.cpp): f32 Conv nodes
by a weight, compiled with the option and run with `kiln run`, against numpy.

On a CPU target with AMX bf16 tiles (as test_bf16_precision.py decides it) each conv that qualifies
(2-D, one group, at least 16 filters, tile rows at least a quarter its own: channels padded with
zeros to whole 32-step tile rows, or fewer than 32 to a power of two with the column taps padded
so that a row holds whole pixels) is an implicit matmul over the padded images on AMX tiles: its result must be the
conv of the operands rounded to bf16 (ties to even) summed in f32 -- within a few f32 roundings of
that f64 value and clearly apart from the fp32 conv -- and the compile must say its kernels ran on
AMX tiles. Covered: 3x3 with padding 1 (the rows past each row's windows computed and dropped),
stride 2 with odd image sizes (rows padded to whole strides), 1x1 at stride 1 and 2, dilation 2,
uneven pads, 48 and 16 channels (padded to 64 and 32), 8 channels (4 pixels a row), a 7x7
stride-2 stem over 3 channels (8 pixels of 4 a row; over 20×20 outputs and more, as a stride-1
conv over 2×2 blocks of pixels: 12 channels, 4x4 taps), 24 filters, two images, a bias and a Relu
after the conv; and convs that stay fp32: a 1x1 conv over 3 channels (3 of 32 steps its own), a
3x3 stride-2 stem over 3 channels (27 products an output), 8 filters, a depthwise conv. Then a chain of conv, MaxPool, depthwise conv, 1x1 conv and residual add,
where the layouts between the convs change (channels-last rows) and the values must not; a downsample block's two 1x1 convs meeting in one Add; a residual add reading a conv's computed input, which
it must see rounded to bf16 as the conv does; and 1-D
convs (one-row images; strided ones over blocks of samples), a 1-channel stride-5 one staying fp32. Without
AMX every conv is the fp32 conv.

usage: test_bf16_conv.py --source-root DIR --kiln KILN_CLI [--python VENV_PYTHON]
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_test_env  # noqa: E402

args = python_test_env.cli_arguments()
python_test_env.require_numpy_and_onnx(args.python)

import numpy as np  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

checks = python_test_env.Checks(args.kiln)
check, kiln = checks.check, checks.kiln
rng = np.random.default_rng(31)
bf16 = python_test_env.round_to_bf16


def conv(x, w, stride, pads, dilation, groups):
    """The ONNX Conv of f64 arrays (N, C, H, W) and (F, C/groups, KH, KW), pads (top, left, bottom, right)."""
    n, c, h, wd = x.shape
    f, cg, kh, kw = w.shape
    padded = np.zeros((n, c, h + pads[0] + pads[2], wd + pads[1] + pads[3]))
    padded[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + wd] = x
    oh = (padded.shape[2] - dilation * (kh - 1) - 1) // stride + 1
    ow = (padded.shape[3] - dilation * (kw - 1) - 1) // stride + 1
    y = np.zeros((n, f, oh, ow))
    fg = f // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                window = padded[:, g * cg:(g + 1) * cg, i * dilation:i * dilation + (oh - 1) * stride + 1:stride,
                                j * dilation:j * dilation + (ow - 1) * stride + 1:stride]
                y[:, g * fg:(g + 1) * fg] += np.einsum("nchw,fc->nfhw", window, w[g * fg:(g + 1) * fg, :, i, j])
    return y


amx = python_test_env.amx_bf16_target()
cases = [
    # name, x shape, filters, kernel, stride, pads (top, left, bottom, right), dilation, groups, on tiles
    ("conv3x3_pad1", (1, 64, 14, 14), 64, 3, 1, (1, 1, 1, 1), 1, 1, True),
    ("conv3x3_stride2_odd", (1, 32, 15, 13), 48, 3, 2, (1, 1, 1, 1), 1, 1, True),
    ("conv1x1", (1, 96, 7, 9), 40, 1, 1, (0, 0, 0, 0), 1, 1, True),
    ("conv1x1_stride2", (2, 64, 12, 10), 64, 1, 2, (0, 0, 0, 0), 1, 1, True),
    ("conv3x3_dilated_48ch", (1, 48, 12, 12), 32, 3, 1, (2, 2, 2, 2), 2, 1, True),
    ("conv5x5_uneven_pads_2images", (2, 32, 9, 11), 64, 5, 1, (2, 1, 0, 3), 1, 1, True),
    ("conv3x3_16ch", (1, 16, 10, 10), 64, 3, 1, (1, 1, 1, 1), 1, 1, True),
    ("conv1x1_24_filters", (1, 64, 10, 10), 24, 1, 1, (0, 0, 0, 0), 1, 1, True),
    ("conv3x3_8ch", (1, 8, 10, 10), 64, 3, 1, (1, 1, 1, 1), 1, 1, True),
    ("conv7x7_stem_3ch_stride2", (1, 3, 32, 30), 64, 7, 2, (3, 3, 3, 3), 1, 1, True),
    ("conv7x7_stem_space_to_depth", (1, 3, 41, 40), 64, 7, 2, (3, 2, 3, 3), 1, 1, True),
    ("conv3x3_stem_3ch_stride2", (1, 3, 40, 40), 32, 3, 2, (1, 1, 1, 1), 1, 1, False),
    ("conv3x3_16ch_dilated", (1, 16, 12, 12), 32, 3, 1, (2, 2, 2, 2), 2, 1, True),
    ("conv1x1_3ch", (1, 3, 16, 16), 64, 1, 1, (0, 0, 0, 0), 1, 1, False),
    ("conv3x3_8_filters", (1, 64, 10, 10), 8, 3, 1, (1, 1, 1, 1), 1, 1, False),
    ("depthwise3x3", (1, 64, 10, 10), 64, 3, 1, (1, 1, 1, 1), 1, 64, False),
]


def compile_and_run(work, name, nodes, x, y_shape, initializers):
    """Compiles the graph `nodes` (input x, output y) with --precision bf16 and runs it on x; returns
    (the compile's stderr with KILN_DEBUG=3, y as f64), or None after a failed check."""
    model = os.path.join(work, name + ".onnx")
    python_test_env.save_model(model, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                               [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y_shape))], initializers)
    plan = os.path.join(work, name + ".kiln")
    compiled = kiln("compile", model, "-o", plan, "--precision", "bf16", env_extra={"KILN_DEBUG": "3"})
    check(compiled.returncode == 0, f"kiln compile {name}: {compiled.stderr.strip()[-400:]}")
    if compiled.returncode != 0:
        return None
    np.save(os.path.join(work, "x.npy"), x)
    out_dir = os.path.join(work, name)
    ran = kiln("run", plan, "--input", f"x={os.path.join(work, 'x.npy')}", "--output-dir", out_dir,
               "--output-format", "npy")
    check(ran.returncode == 0, f"kiln run {name}: {ran.stderr.strip()[-400:]}")
    if ran.returncode != 0:
        return None
    return compiled.stderr, np.load(os.path.join(out_dir, "y.npy")).astype(np.float64)


def check_conv(name, compiled, got, fp32_want, bf16_want, takes_bf16):
    """y is the bf16 conv where it takes the tiles (and the compile says so), else the fp32 conv."""
    want = bf16_want if takes_bf16 else fp32_want
    gap = np.abs(fp32_want - bf16_want).max() / np.abs(bf16_want).max()
    check(got.shape == want.shape, f"{name}: output shape {got.shape}, want {want.shape}")
    if got.shape == want.shape:
        error = np.abs(got - want).max() / np.abs(want).max()
        check(error < 1e-5 and error < gap / 20,
              f"{name}: the {'bf16' if takes_bf16 else 'fp32'} conv (relative {error:.2e}; bf16 vs fp32 {gap:.2e})")
    check(("on AMX tiles" in compiled) == takes_bf16, f"{name}: AMX tiles {'used' if takes_bf16 else 'not used'}")


def check_graph(name, result, fp32_want, bf16_want, tolerance, tiles=None):
    """A whole graph's y: the bf16 reference within `tolerance` of the bf16-vs-fp32 gap where the
    target has AMX (else the fp32 one within 1e-5), and `tiles` kernels on AMX tiles there."""
    if result is None:
        return
    compiled, got = result
    want = bf16_want if amx else fp32_want
    gap = np.abs(fp32_want - bf16_want).max() / np.abs(bf16_want).max()
    error = np.abs(got - want).max() / np.abs(want).max()
    check(error < (gap * tolerance if amx else 1e-5),
          f"{name}: the {'bf16' if amx else 'fp32'} graph (relative {error:.2e}; bf16 vs fp32 {gap:.2e})")
    if tiles is not None:
        count = compiled.count("on AMX tiles (cpu")
        check(count == (tiles if amx else 0), f"{name}: {count} kernels on AMX tiles, want {tiles if amx else 0}")


with tempfile.TemporaryDirectory(prefix="kiln_bf16_conv_") as work:
    for name, x_shape, filters, k, stride, pads, dilation, groups, on_tiles in cases:
        channels = x_shape[1]
        w = (rng.standard_normal((filters, channels // groups, k, k)) * 0.2).astype(np.float32)
        bias = rng.standard_normal(filters).astype(np.float32)
        x = rng.standard_normal(x_shape).astype(np.float32)
        nodes = [helper.make_node("Conv", ["x", "w", "bias"], ["c"], strides=[stride, stride], pads=list(pads),
                                  dilations=[dilation, dilation], group=groups, kernel_shape=[k, k]),
                 helper.make_node("Relu", ["c"], ["y"])]
        fp32_want = np.maximum(conv(x.astype(np.float64), w.astype(np.float64), stride, pads, dilation, groups)
                               + bias[None, :, None, None], 0)
        bf16_want = np.maximum(conv(bf16(x), bf16(w), stride, pads, dilation, groups) + bias[None, :, None, None], 0)
        result = compile_and_run(work, name, nodes, x, fp32_want.shape, [("w", w), ("bias", bias)])
        if result is None:
            continue
        if amx is None:  # (no /proc/cpuinfo: the compile's own word decides)
            amx = "so its matmuls stay fp32" not in result[0]
        check_conv(name, *result, fp32_want, bf16_want, bool(amx) and on_tiles)

    # 1-D convs (an audio front end's): one-row images; strided, blocks of s samples (channels (j, c)).
    for name, x_shape, filters, k, stride, pads, on_tiles in [
        ("conv1d_k3_pad1", (1, 64, 50), 64, 3, 1, (1, 1), True),
        ("conv1d_k3_stride2", (2, 32, 41), 48, 3, 2, (0, 0), True),
        ("conv1d_k10_stride5_1ch", (1, 1, 400), 32, 10, 5, (0, 0), False),
    ]:
        w = (rng.standard_normal((filters, x_shape[1], k)) * 0.2).astype(np.float32)
        bias = rng.standard_normal(filters).astype(np.float32)
        x = rng.standard_normal(x_shape).astype(np.float32)
        # (the input computed, as a feature extractor's is: a Relu before the conv)
        nodes = [helper.make_node("Relu", ["x"], ["r"]),
                 helper.make_node("Conv", ["r", "w", "bias"], ["y"], strides=[stride], pads=list(pads), kernel_shape=[k])]
        relu = np.maximum(x, 0)
        as_2d = (0, pads[0], 0, pads[1])

        def conv1d(x_, w_):
            return conv(x_[:, :, None, :], w_[:, :, None, :], stride, as_2d, 1, 1)[:, :, 0, :] + bias[None, :, None]

        fp32_want = conv1d(relu.astype(np.float64), w.astype(np.float64))
        bf16_want = conv1d(bf16(relu), bf16(w))
        result = compile_and_run(work, name, nodes, x, fp32_want.shape, [("w", w), ("bias", bias)])
        if result is not None:
            check_conv(name, *result, fp32_want, bf16_want, bool(amx) and on_tiles)

    # A chain as CNNs have it: conv -> Relu -> MaxPool -> depthwise conv -> Relu -> 1x1 conv -> residual
    # Add -> Relu. The convs by weights and the pointwise conv take bf16 operands (the depthwise conv
    # stays f32), and the layouts between them (channels-last rows, the pool and the depthwise conv
    # channels-last) must give the graph's values. Against an f64 reference that rounds the same
    # operands, within a fifth of the bf16-vs-fp32 difference (an f32 sum that lands on the other
    # side of a bf16 rounding boundary moves a later operand by one bf16 step).
    w1 = (rng.standard_normal((64, 32, 3, 3)) * 0.1).astype(np.float32)
    wd = (rng.standard_normal((64, 1, 3, 3)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((64, 64, 1, 1)) * 0.1).astype(np.float32)
    b1, bd, b2 = (rng.standard_normal(64).astype(np.float32) * 0.1 for _ in range(3))
    x = rng.standard_normal((1, 32, 20, 20)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["p", "wd", "bd"], ["cd"], pads=[1, 1, 1, 1], kernel_shape=[3, 3], group=64),
             helper.make_node("Relu", ["cd"], ["rd"]),
             helper.make_node("Conv", ["rd", "w2", "b2"], ["c2"], kernel_shape=[1, 1]),
             helper.make_node("Add", ["c2", "p"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]

    def chain(round_operands):
        r = bf16 if round_operands else (lambda v: v.astype(np.float64))
        r1 = np.maximum(conv(r(x), r(w1), 1, (1, 1, 1, 1), 1, 1) + b1[None, :, None, None], 0)
        padded = np.full((1, 64, 22, 22), -np.inf)
        padded[:, :, 1:21, 1:21] = r1
        p = np.max([padded[:, :, i:i + 19:2, j:j + 19:2] for i in range(3) for j in range(3)], axis=0)
        rd = np.maximum(conv(p, wd.astype(np.float64), 1, (1, 1, 1, 1), 1, 64) + bd[None, :, None, None], 0)
        c2 = conv(r(rd.astype(np.float32)), r(w2), 1, (0, 0, 0, 0), 1, 1) + b2[None, :, None, None]
        return np.maximum(c2 + p, 0)

    fp32_want, bf16_want = chain(False), chain(True)
    result = compile_and_run(work, "chain", nodes, x, fp32_want.shape,
                             [("w1", w1), ("b1", b1), ("wd", wd), ("bd", bd), ("w2", w2), ("b2", b2)])
    check_graph("chain", result, fp32_want, bf16_want, 1 / 5, tiles=2)

    # A downsample block's tail: two 1x1 convs (the last conv of the branch, the shortcut over the
    # block's input) meet in one Add and Relu. One product is stored and the other's tile kernel
    # adds it (schedule/fusion_policy.cpp, bf16_product): the sum must be the graph's.
    wa, wb, ws = ((rng.standard_normal(shape) * 0.1).astype(np.float32)
                  for shape in ((64, 32, 1, 1), (64, 64, 1, 1), (64, 32, 1, 1)))
    ba, bb, bs = (rng.standard_normal(64).astype(np.float32) * 0.1 for _ in range(3))
    x = rng.standard_normal((1, 32, 12, 12)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "wa", "ba"], ["ca"], kernel_shape=[1, 1]),
             helper.make_node("Relu", ["ca"], ["ra"]),
             helper.make_node("Conv", ["ra", "wb", "bb"], ["cb"], kernel_shape=[1, 1]),
             helper.make_node("Conv", ["x", "ws", "bs"], ["cs"], kernel_shape=[1, 1]),
             helper.make_node("Add", ["cb", "cs"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]

    def downsample(round_operands):
        r = bf16 if round_operands else (lambda v: v.astype(np.float64))
        ra = np.maximum(conv(r(x), r(wa), 1, (0, 0, 0, 0), 1, 1) + ba[None, :, None, None], 0)
        cb = conv(r(ra.astype(np.float32)), r(wb), 1, (0, 0, 0, 0), 1, 1) + bb[None, :, None, None]
        cs = conv(r(x), r(ws), 1, (0, 0, 0, 0), 1, 1) + bs[None, :, None, None]
        return np.maximum(cb + cs, 0)

    fp32_want, bf16_want = downsample(False), downsample(True)
    result = compile_and_run(work, "downsample", nodes, x, fp32_want.shape,
                             [("wa", wa), ("ba", ba), ("wb", wb), ("bb", bb), ("ws", ws), ("bs", bs)])
    check_graph("downsample", result, fp32_want, bf16_want, 1 / 5, tiles=3)

    # A computed value that a conv takes in bf16 and a residual add also reads (a ResNet block's
    # input): stored once as its bf16 bits, channels-last, which stand in for it for the add too
    # (ir/ops.h, kRoundedStandIn) -- so the add must see the rounded value. Unrounded there, the
    # result would be off by about 2^-9 of the residual, more than the tolerance below.
    wa, wb = ((rng.standard_normal(shape) * 0.1).astype(np.float32) for shape in ((64, 64, 1, 1), (64, 64, 1, 1)))
    ba, bb = (rng.standard_normal(64).astype(np.float32) * 0.1 for _ in range(2))
    x = (rng.standard_normal((1, 64, 10, 10)) * 4).astype(np.float32)
    nodes = [helper.make_node("Relu", ["x"], ["r0"]),
             helper.make_node("Conv", ["r0", "wa", "ba"], ["ca"], kernel_shape=[1, 1]),
             helper.make_node("Relu", ["ca"], ["ra"]),
             helper.make_node("Conv", ["ra", "wb", "bb"], ["cb"], kernel_shape=[1, 1]),
             helper.make_node("Add", ["cb", "r0"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]

    def residual(round_operands):
        r = bf16 if round_operands else (lambda v: v.astype(np.float64))
        r0 = r(np.maximum(x, 0))
        ra = np.maximum(conv(r0, r(wa), 1, (0, 0, 0, 0), 1, 1) + ba[None, :, None, None], 0)
        cb = conv(r(ra.astype(np.float32)), r(wb), 1, (0, 0, 0, 0), 1, 1) + bb[None, :, None, None]
        return np.maximum(cb + r0, 0)

    fp32_want, bf16_want = residual(False), residual(True)
    result = compile_and_run(work, "residual", nodes, x, fp32_want.shape,
                             [("wa", wa), ("ba", ba), ("wb", wb), ("bb", bb)])
    check_graph("residual (the add reads the rounded input)", result, fp32_want, bf16_want, 1 / 20)
    print(f"AMX bf16 tiles on this CPU target: {amx}")

sys.exit(checks.finish())
