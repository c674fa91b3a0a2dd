#!/bin/sh
# The exporter-made models of ../shared/data/models-exported (issue 49), each through ONE plan: a
# model whose inputs have named symbolic dimensions compiles once, symbolic over each one's range in
# its test sets (`kiln test-onnx --via-plan`, tools/test_onnx.cpp), and every test set runs through
# that plan at the tolerance its info.json gives. Held to expected_exported.txt, exact both ways: a
# model listed `pass` must pass through one plan, a model listed `fail` must still fail (with the
# text given), so a fix or a regression shows here and the list is updated with it.
# usage: run_exported_models.sh KILN MODELS_EXPORTED_DIR EXPECTED_FILE
kiln=$1 corpus=$2 expected=$3
[ -d "$corpus" ] || { echo "skip: no $corpus"; exit 77; }
status=0
while read -r model outcome reason; do
  case $model in '' | '#'*) continue ;; esac
  folder=$corpus/$model
  [ -d "$folder" ] || { echo "FAIL $model: listed in $expected but not in $corpus"; status=1; continue; }
  # The model's tolerance, and whether an input has a symbolic dimension (a name among its dims).
  read -r atol symbolic <<INFO
$(python3 -c 'import json, sys
info = json.load(open(sys.argv[1]))
print(info["atol"], int(any(isinstance(d, str) for i in info["inputs"] for d in i["dims"])))' "$folder/info.json")
INFO
  line=$("$kiln" test-onnx -v --via-plan --atol "$atol" --timeout 600 "$folder" 2>&1 | grep -E "^(PASS|FAIL) $model")
  echo "$line"
  case $outcome in
    pass)
      # A model with symbolic inputs must say it ran through one plan; a fixed one just passes.
      case $line in
        "PASS $model: 1 plan(s) for "*) ;;
        "PASS $model"*) [ "$symbolic" = 0 ] || { echo "  expected one symbolic plan"; status=1; } ;;
        *) echo "  expected: pass"; status=1 ;;
      esac ;;
    fail)
      case $line in
        "FAIL $model"*"$reason"*) ;;
        *) echo "  expected: FAIL containing '$reason' (fixed? update $expected)"; status=1 ;;
      esac ;;
    *) echo "bad line in $expected: $model $outcome"; status=1 ;;
  esac
done < "$expected"
# Every folder of the corpus is listed.
for folder in "$corpus"/*/; do
  model=$(basename "$folder")
  [ -f "$folder/model.onnx" ] || continue
  grep -q "^$model " "$expected" || { echo "FAIL $model: not listed in $expected"; status=1; }
done
exit $status
