#!/usr/bin/env python3
"""scikit-learn models through skl2onnx, run by kiln and by onnxruntime on the same inputs.

Each model is trained here on synthetic data with a fixed seed, converted with skl2onnx at explicit
opsets (ai.onnx 17, ai.onnx.ml 3), compiled with `kiln compile --shape` and run with `kiln run`
(.npy in and out). Labels must equal onnxruntime's exactly; probabilities, scores and transformed
features must agree within 1e-5 (regressors: 1e-4 relative). A second part builds single ai.onnx.ml
nodes by hand for attribute values skl2onnx never writes (post_transforms, aggregate functions,
branch modes, label encoders), and a third checks that hostile tree ensembles (a cycle, a child out
of range) fail with an error naming the problem, never a crash.

usage: test_sklearn_models.py --kiln KILN_CLI [--python VENV_PYTHON]

Needs numpy, onnx, scikit-learn, skl2onnx and onnxruntime (scripts/lib/python_env.sh puts them in
.venv); re-runs itself with the .venv python when the current one lacks them, and exits 77
(skipped) when neither has them.
"""
import argparse
import os
import subprocess
import sys
import tempfile

parser = argparse.ArgumentParser()
parser.add_argument("--kiln", required=True)
parser.add_argument("--python")
parser.add_argument("-k", "--only", help="run only the cases whose name contains this")
args = parser.parse_args()

try:
    import numpy as np
    import onnx
    import onnxruntime
    import skl2onnx  # noqa: F401
    import sklearn  # noqa: F401
except ImportError as missing:
    candidate = os.environ.get("KILN_TEST_PYTHON") or args.python
    if candidate and os.access(candidate, os.X_OK) and not os.environ.get("KILN_TEST_REEXEC"):
        os.environ["KILN_TEST_REEXEC"] = "1"
        os.execv(candidate, [candidate] + sys.argv)
    print(f"skip: {missing} (scripts/lib/python_env.sh: kiln_ensure_sklearn_python_env installs it)")
    sys.exit(77)

import warnings  # noqa: E402

from onnx import TensorProto, helper  # noqa: E402
from skl2onnx import to_onnx  # noqa: E402

warnings.filterwarnings("ignore")
OPSETS = {"": 17, "ai.onnx.ml": 3}
failures = []
work = tempfile.mkdtemp(prefix="kiln_sklearn_")


def check(condition, what):
    print(("ok    " if condition else "FAIL  ") + what)
    if not condition:
        failures.append(what)


def run_kiln(name, model, inputs):
    """Compiles `model` for the given inputs' shapes and runs it; returns ({output: array}, error)."""
    folder = os.path.join(work, name)
    os.makedirs(folder, exist_ok=True)
    model_path, plan = os.path.join(folder, "model.onnx"), os.path.join(folder, "model.kiln")
    onnx.save(model, model_path)
    shapes = [f"{key}={','.join(str(d) for d in value.shape)}" for key, value in inputs.items()]
    compiled = subprocess.run([args.kiln, "compile", model_path, "-o", plan, "--shape", *shapes],
                              capture_output=True, text=True)
    if compiled.returncode != 0:
        return None, compiled.stderr.strip()
    command = [args.kiln, "run", plan, "--output-dir", os.path.join(folder, "out"), "--output-format", "npy"]
    for key, value in inputs.items():
        path = os.path.join(folder, f"input_{key}.npy")
        np.save(path, value)
        command += ["--input", f"{key}={path}"]
    ran = subprocess.run(command, capture_output=True, text=True)
    if ran.returncode != 0:
        return None, ran.stderr.strip()
    outputs = {}
    for output in model.graph.output:
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in output.name)
        outputs[output.name] = np.load(os.path.join(folder, "out", safe + ".npy"))
    return outputs, None


def run_onnxruntime(model, inputs):
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(None, inputs)))


def as_array(value):
    """onnxruntime's ZipMap output (a list of {label: probability}) as an (N, C) array in key order."""
    if isinstance(value, list) and value and isinstance(value[0], dict):
        keys = list(value[0].keys())
        return np.array([[row[k] for k in keys] for row in value], dtype=np.float32)
    return np.asarray(value)


def compare(name, model, inputs, atol=1e-5, rtol=0.0):
    """kiln against onnxruntime on every output: integers exactly, floats within the tolerance."""
    expected = run_onnxruntime(model, inputs)
    produced, error = run_kiln(name, model, inputs)
    if produced is None:
        check(False, f"{name}: kiln failed: {error}")
        return
    for key, reference in expected.items():
        reference = as_array(reference)
        got = produced.get(key)
        if got is None:
            check(False, f"{name}: kiln has no output '{key}'")
            continue
        if got.shape != reference.shape:
            check(False, f"{name}: output '{key}' has shape {got.shape}, onnxruntime's {reference.shape}")
            continue
        if np.issubdtype(reference.dtype, np.integer):
            wrong = int(np.sum(got != reference))
            check(wrong == 0 and got.dtype == reference.dtype,
                  f"{name}: '{key}' {got.dtype} labels equal onnxruntime's ({wrong} of {reference.size} differ)")
        else:
            # NaN where onnxruntime has NaN and equal infinities (PROBIT at or outside 0 and 1) agree.
            same = (np.isnan(got) & np.isnan(reference)) | (got == reference)
            with np.errstate(invalid="ignore"):
                excess = np.abs(got.astype(np.float64) - reference) - rtol * np.abs(reference)
            excess = np.where(same, 0.0, np.nan_to_num(excess, nan=np.inf))
            error_size = float(np.max(excess)) if reference.size else 0.0
            check(got.dtype == reference.dtype and error_size <= atol,
                  f"{name}: '{key}' {got.dtype} {got.shape} within {atol:g} of onnxruntime (max excess {error_size:.3g})")


def sklearn_case(name, estimator, x_train, y_train, x_test, zipmap=False, **tolerances):
    if args.only and args.only not in name:
        return
    estimator.fit(x_train, y_train) if y_train is not None else estimator.fit(x_train)
    options = {id(estimator): {"zipmap": zipmap}} if hasattr(estimator, "predict_proba") else None
    model = to_onnx(estimator, x_train[:1], target_opset=OPSETS, options=options)
    name_of_input = model.graph.input[0].name
    compare(name, model, {name_of_input: x_test}, **tolerances)


# ---------------------------------------------------------------------------------------------
# Part 1: scikit-learn models.
from sklearn.datasets import make_classification, make_regression  # noqa: E402
from sklearn.ensemble import (GradientBoostingClassifier, GradientBoostingRegressor,  # noqa: E402
                              RandomForestClassifier, RandomForestRegressor)
from sklearn.impute import SimpleImputer  # noqa: E402
from sklearn.linear_model import LinearRegression, LogisticRegression  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import Binarizer, Normalizer, OneHotEncoder, StandardScaler  # noqa: E402
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor  # noqa: E402

rng = np.random.default_rng(20261126)
x3, y3 = make_classification(300, 8, n_informative=5, n_classes=3, random_state=1)
x2, y2 = make_classification(300, 8, n_informative=5, random_state=2)
xr, yr = make_regression(300, 8, n_informative=5, noise=0.5, random_state=3)
x3, x2, xr = x3.astype(np.float32), x2.astype(np.float32), xr.astype(np.float32)
y3_labels = np.array([3, 7, 11])[y3]  # class labels that are not 0..C-1
train, test = slice(0, 240), slice(240, 300)

sklearn_case("random_forest_classifier_3", RandomForestClassifier(20, max_depth=8, random_state=0),
             x3[train], y3_labels[train], x3[test])
# Fully grown trees have pure leaves: with an odd number of trees no two classes can tie (a tie,
# equal in exact arithmetic, may round either way depending on the order the trees are summed in).
sklearn_case("random_forest_classifier_2", RandomForestClassifier(21, random_state=0), x2[train], y2[train], x2[test])
sklearn_case("random_forest_classifier_zipmap", RandomForestClassifier(5, max_depth=5, random_state=0),
             x3[train], y3[train], x3[test], zipmap=True)
sklearn_case("random_forest_regressor", RandomForestRegressor(20, max_depth=10, random_state=0),
             xr[train], yr[train], xr[test], atol=1e-4, rtol=1e-5)
sklearn_case("gradient_boosting_classifier_2", GradientBoostingClassifier(n_estimators=30, random_state=0),
             x2[train], y2[train], x2[test])
sklearn_case("gradient_boosting_classifier_3", GradientBoostingClassifier(n_estimators=30, random_state=0),
             x3[train], y3[train], x3[test])
sklearn_case("gradient_boosting_regressor", GradientBoostingRegressor(n_estimators=40, random_state=0),
             xr[train], yr[train], xr[test], atol=1e-4, rtol=1e-5)
sklearn_case("decision_tree_classifier", DecisionTreeClassifier(random_state=0), x3[train], y3[train], x3[test])
sklearn_case("decision_tree_regressor", DecisionTreeRegressor(max_depth=6, random_state=0),
             xr[train], yr[train], xr[test], atol=1e-4, rtol=1e-5)
sklearn_case("logistic_regression_2", LogisticRegression(), x2[train], y2[train], x2[test])
sklearn_case("logistic_regression_3", LogisticRegression(max_iter=500), x3[train], y3_labels[train], x3[test])
sklearn_case("logistic_regression_3_zipmap", LogisticRegression(max_iter=500), x3[train], y3[train], x3[test],
             zipmap=True)
sklearn_case("standard_scaler_logistic_regression", make_pipeline(StandardScaler(), LogisticRegression()),
             x3[train] * 10 + 3, y3[train], x3[test] * 10 + 3)
sklearn_case("linear_regression", LinearRegression(), xr[train], yr[train], xr[test], atol=1e-4, rtol=1e-5)
sklearn_case("normalizer_l2", Normalizer("l2"), x3[train], None, x3[test])
sklearn_case("normalizer_l1", Normalizer("l1"), x3[train], None, x3[test])
sklearn_case("normalizer_max", Normalizer("max"), x3[train], None, x3[test])
sklearn_case("binarizer", Binarizer(threshold=0.25), x3[train], None, x3[test])
categories = rng.integers(0, 5, (300, 3)).astype(np.int64)
sklearn_case("one_hot_encoder", OneHotEncoder(handle_unknown="ignore"), categories[train], None, categories[test])
with_gaps = x3.copy()
with_gaps[rng.random(with_gaps.shape) < 0.15] = np.nan
sklearn_case("simple_imputer", SimpleImputer(), with_gaps[train], None, with_gaps[test])
# Trees trained on data with NaN send missing values down a learned side (missing-value tracks).
sklearn_case("decision_tree_with_missing_values", DecisionTreeClassifier(max_depth=6, random_state=0),
             with_gaps[train], y3[train], with_gaps[test])

# ---------------------------------------------------------------------------------------------
# Part 2: single ai.onnx.ml nodes with the attribute values converters rarely write.
FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64


def node_model(op, inputs, outputs, ml_opset=3, **attributes):
    """A model of one ai.onnx.ml node; inputs/outputs are (name, element type, shape) triples."""
    node = helper.make_node(op, [name for name, _, _ in inputs], [name for name, _, _ in outputs],
                            domain="ai.onnx.ml", **attributes)
    graph = helper.make_graph([node], op.lower(), [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("ai.onnx.ml", ml_opset)])
    model.ir_version = 8 if ml_opset < 4 else 10
    return model


def node_case(name, model, inputs, **tolerances):
    if args.only and args.only not in name:
        return
    compare(name, model, inputs, **tolerances)


unit = rng.random((16, 3), dtype=np.float32)  # in (0, 1): PROBIT's domain after the small weights below
for transform in ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"):
    for targets in (1, 2):
        coefficients = [0.3, 0.2, 0.1, 0.0, 0.0, 0.0][: 3 * targets]
        node_case(f"linear_regressor_{transform.lower()}_{targets}",
                  node_model("LinearRegressor", [("X", FLOAT, [16, 3])], [("Y", FLOAT, [16, targets])],
                             coefficients=coefficients, intercepts=[0.1] * targets, targets=targets,
                             post_transform=transform), {"X": unit})
    node_case(f"linear_classifier_{transform.lower()}_3",
              node_model("LinearClassifier", [("X", FLOAT, [16, 3])], [("Y", INT64, [16]), ("Z", FLOAT, [16, 3])],
                         coefficients=[0.3, -0.2, 0.1, 0.0, 0.0, 0.0, -0.1, 0.4, 0.2],
                         intercepts=[0.05, 0.0, -0.1], classlabels_ints=[5, 6, 7], post_transform=transform),
              {"X": unit})
for labels in ([], [4, 9]):
    outputs = [("Y", INT64, [16]), ("Z", FLOAT, [16, 2 if labels else 1])]
    node_case(f"linear_classifier_one_score_{len(labels)}_labels",
              node_model("LinearClassifier", [("X", FLOAT, [16, 3])], outputs, coefficients=[1.0, -1.0, 0.5],
                         intercepts=[-0.2], post_transform="LOGISTIC",
                         **({"classlabels_ints": labels} if labels else {})), {"X": unit})

# Two trees over three features using every branch mode, with missing-value tracks. Tree 0:
#   0: x0 <= 0.5 ? 1 : 2;  1: x1 < 0.3 ? 3 : 4;  2: x2 >= 0.7 ? 5 : 6;  3-6 leaves
# Tree 1:  0: x0 > 0.25 ? 1 : 2;  1: x1 == 0.5 ? 3 : 4;  2: x2 != 0.5 ? 5 : 6;  3-6 leaves
tree_nodes = dict(
    nodes_treeids=[0] * 7 + [1] * 7, nodes_nodeids=list(range(7)) * 2,
    nodes_featureids=[0, 1, 2, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0],
    nodes_modes=["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE"] + ["LEAF"] * 4 +
                ["BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"] + ["LEAF"] * 4,
    nodes_values=[0.5, 0.3, 0.7, 0, 0, 0, 0, 0.25, 0.5, 0.5, 0, 0, 0, 0],
    nodes_truenodeids=[1, 3, 5, 0, 0, 0, 0] * 2, nodes_falsenodeids=[2, 4, 6, 0, 0, 0, 0] * 2,
    nodes_missing_value_tracks_true=[1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0])
leaves = [(t, n) for t in (0, 1) for n in (3, 4, 5, 6)]
tree_x = rng.random((24, 3), dtype=np.float32)
tree_x[0] = [0.5, 0.3, 0.7]     # exactly on the thresholds
tree_x[1] = [0.25, 0.5, 0.5]
tree_x[2] = [np.nan, np.nan, np.nan]
tree_x[3] = [0.1, np.nan, 0.9]
for aggregate in ("SUM", "AVERAGE", "MIN", "MAX"):
    for transform in ("NONE", "SOFTMAX"):
        weights = dict(target_treeids=[t for t, _ in leaves] * 2, target_nodeids=[n for _, n in leaves] * 2,
                       target_ids=[0] * 8 + [1] * 8,
                       target_weights=[float(v) for v in np.linspace(-2, 3, 16)])
        node_case(f"tree_ensemble_regressor_{aggregate.lower()}_{transform.lower()}",
                  node_model("TreeEnsembleRegressor", [("X", FLOAT, [24, 3])], [("Y", FLOAT, [24, 2])],
                             n_targets=2, aggregate_function=aggregate, post_transform=transform,
                             base_values=[0.5, -0.25], **tree_nodes, **weights), {"X": tree_x})
node_case("tree_ensemble_regressor_one_target_probit",
          node_model("TreeEnsembleRegressor", [("X", FLOAT, [24, 3])], [("Y", FLOAT, [24, 1])],
                     n_targets=1, post_transform="PROBIT", base_values=[0.1], **tree_nodes,
                     target_treeids=[t for t, _ in leaves], target_nodeids=[n for _, n in leaves],
                     target_ids=[0] * 8, target_weights=[0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4]),
          {"X": tree_x})
# Binary classifiers under onnxruntime's rules: weights for one class or both, with 0, 1 or 2
# base values, all positive or mixed.
for classes_used, base_values, signs in (([1], [], 1), ([0], [0.2], -1), ([0, 1], [], 1), ([0, 1], [0.1, -0.3], -1),
                                         ([1], [0.3, 0.1], 1)):
    ids = [classes_used[i % len(classes_used)] for i in range(len(leaves))]
    for transform in ("NONE", "LOGISTIC"):
        node_case(f"tree_ensemble_classifier_binary_{''.join(map(str, classes_used))}_{len(base_values)}"
                  f"_{'positive' if signs > 0 else 'mixed'}_{transform.lower()}",
                  node_model("TreeEnsembleClassifier", [("X", FLOAT, [24, 3])],
                             [("Y", INT64, [24]), ("Z", FLOAT, [24, 2])], classlabels_int64s=[10, 20],
                             post_transform=transform, **({"base_values": base_values} if base_values else {}),
                             **tree_nodes, class_treeids=[t for t, _ in leaves], class_nodeids=[n for _, n in leaves],
                             class_ids=ids,
                             class_weights=[float(signs ** i * v) for i, v in enumerate(np.linspace(0.1, 0.8, 8))]),
                  {"X": tree_x})
# TreeEnsemble (ai.onnx.ml opset 5): positions instead of ids, a set-membership branch.
member_x = np.array([[1.0, 0.2], [3.0, 0.9], [7.0, 0.1], [2.0, 0.6], [np.nan, 0.3]], np.float32)
for aggregate in (0, 1, 2, 3):
    node_case(f"tree_ensemble_v5_aggregate_{aggregate}",
              node_model("TreeEnsemble", [("X", FLOAT, [5, 2])], [("Y", FLOAT, [5, 2])], ml_opset=5,
                         n_targets=2, aggregate_function=aggregate, post_transform=0,
                         nodes_featureids=[0, 1, 1], nodes_splits=helper.make_tensor("s", FLOAT, [3], [0.0, 0.5, 0.25]),
                         nodes_modes=helper.make_tensor("m", TensorProto.UINT8, [3], [6, 0, 3]),
                         membership_values=helper.make_tensor("v", FLOAT, [4], [1.0, 3.0, 5.0, np.nan]),
                         nodes_truenodeids=[1, 0, 2], nodes_trueleafs=[0, 1, 1],
                         nodes_falsenodeids=[2, 1, 3], nodes_falseleafs=[0, 1, 1],
                         nodes_missing_value_tracks_true=[1, 0, 0],
                         leaf_targetids=[0, 1, 0, 1], leaf_weights=helper.make_tensor("w", FLOAT, [4], [1.5, -2.0, 4.0, 0.5]),
                         tree_roots=[0, 2]), {"X": member_x})
node_case("label_encoder_int_to_int",
          node_model("LabelEncoder", [("X", INT64, [7])], [("Y", INT64, [7])], ml_opset=2,
                     keys_int64s=[3, 7, 11], values_int64s=[0, 1, 2], default_int64=-5),
          {"X": np.array([3, 7, 11, 4, 7, 3, 0], np.int64)})
node_case("label_encoder_float_to_int",
          node_model("LabelEncoder", [("X", FLOAT, [5])], [("Y", INT64, [5])], ml_opset=2,
                     keys_floats=[0.5, 1.5], values_int64s=[10, 20]),
          {"X": np.array([0.5, 1.5, 2.5, 1.5, -0.5], np.float32)})
node_case("label_encoder_int_to_float",
          node_model("LabelEncoder", [("X", INT64, [2, 3])], [("Y", FLOAT, [2, 3])], ml_opset=2,
                     keys_int64s=[1, 2], values_floats=[0.25, 0.75], default_float=9.0),
          {"X": np.array([[1, 2, 3], [2, 2, 1]], np.int64)})
node_case("label_encoder_tensors_opset_4",
          node_model("LabelEncoder", [("X", INT64, [6])], [("Y", FLOAT, [6])], ml_opset=4,
                     keys_tensor=helper.make_tensor("k", INT64, [3], [5, -1, 8]),
                     values_tensor=helper.make_tensor("v", FLOAT, [3], [0.5, 1.5, 2.5]),
                     default_tensor=helper.make_tensor("d", FLOAT, [1], [-7.0])),
          {"X": np.array([8, 5, 0, -1, 8, 3], np.int64)})
node_case("array_feature_extractor_1d",
          node_model("ArrayFeatureExtractor", [("X", FLOAT, [5]), ("Y", INT64, [2])], [("Z", FLOAT, [1, 2])]),
          {"X": rng.random(5, dtype=np.float32), "Y": np.array([3, 1], np.int64)})
node_case("array_feature_extractor",
          node_model("ArrayFeatureExtractor", [("X", FLOAT, [4, 5]), ("Y", INT64, [3])], [("Z", FLOAT, [4, 3])]),
          {"X": rng.random((4, 5), dtype=np.float32), "Y": np.array([4, 0, 2], np.int64)})
node_case("imputer_int64",
          node_model("Imputer", [("X", INT64, [3, 2])], [("Y", INT64, [3, 2])], imputed_value_int64s=[7, 8],
                     replaced_value_int64=-1), {"X": np.array([[-1, 2], [3, -1], [-1, -1]], np.int64)})
node_case("scaler_per_column",
          node_model("Scaler", [("X", FLOAT, [16, 3])], [("Y", FLOAT, [16, 3])], offset=[0.5, 0.1, -0.2],
                     scale=[2.0, -1.0, 0.5]), {"X": unit})


# ---------------------------------------------------------------------------------------------
# Part 3: hostile tree ensembles fail with an error that names the problem.
def hostile_case(name, expected_text, **changes):
    if args.only and args.only not in name:
        return
    attributes = dict(tree_nodes, target_treeids=[0], target_nodeids=[3], target_ids=[0], target_weights=[1.0])
    attributes.update(changes)
    attributes = {key: value for key, value in attributes.items() if value is not None}
    model = node_model("TreeEnsembleRegressor", [("X", FLOAT, [4, 3])], [("Y", FLOAT, [4, 1])], n_targets=1,
                       **attributes)
    produced, error = run_kiln(name, model, {"X": unit[:4]})
    check(produced is None and expected_text in (error or "") and "TreeEnsembleRegressor" in (error or ""),
          f"{name}: kiln refuses it with '{expected_text}' (got: {error})")


hostile_case("hostile_tree_cycle", "cycle", nodes_truenodeids=[1, 0, 5, 0, 0, 0, 0] * 2)
hostile_case("hostile_tree_missing_child", "is not in tree", nodes_falsenodeids=[2, 40, 6, 0, 0, 0, 0] * 2)
hostile_case("hostile_tree_weight_on_branch", "not a leaf", target_nodeids=[1])
hostile_case("hostile_tree_feature_out_of_range", "features", nodes_featureids=[0, 9, 2, 0, 0, 0, 0] * 2)
hostile_case("hostile_tree_short_list", "entries", nodes_values=[0.5])
# A chain of 5,000 branches (no cycle) is refused by depth instead of building 5,000 levels.
chain = 5000
hostile_case("hostile_tree_too_deep", "levels deep", nodes_treeids=[0] * (chain + 1), nodes_nodeids=list(range(chain + 1)),
             nodes_featureids=[0] * (chain + 1), nodes_modes=["BRANCH_LEQ"] * chain + ["LEAF"],
             nodes_values=[0.5] * (chain + 1), nodes_truenodeids=list(range(1, chain + 1)) + [0],
             nodes_falsenodeids=list(range(1, chain + 1)) + [0], nodes_missing_value_tracks_true=None,
             target_nodeids=[chain])


# ZipMap with string keys has no tensor form: the error names the node and the skl2onnx option.
if not args.only or "zipmap_strings" in args.only:
    zipmap = helper.make_node("ZipMap", ["X"], ["Z"], domain="ai.onnx.ml", classlabels_strings=["a", "b"])
    zipmap_output = helper.make_value_info("Z", helper.make_sequence_type_proto(
        helper.make_map_type_proto(TensorProto.STRING, helper.make_tensor_type_proto(FLOAT, []))))
    zipmap_model = helper.make_model(
        helper.make_graph([zipmap], "zipmap", [helper.make_tensor_value_info("X", FLOAT, [2, 2])], [zipmap_output]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)])
    produced, error = run_kiln("unsupported_zipmap_strings", zipmap_model, {"X": unit[:2, :2].copy()})
    check(produced is None and "unsupported: ZipMap with string keys" in (error or "") and "'zipmap': False" in error,
          f"zipmap_strings: kiln refuses it naming the skl2onnx option (got: {error})")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
