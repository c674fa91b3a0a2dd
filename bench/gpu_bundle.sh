#!/bin/sh
# Packs what a lent GPU machine needs for bench/gpu_check.sh into BUNDLE (an ignored folder of the
# repository, so that the `device` tool can carry it), and prints what each call should carry.
#
# usage: bench/gpu_bundle.sh BUILD BUNDLE [ORT_GPU_WHEEL]
#   BUILD          a kiln build made here (meson + ninja)
#   BUNDLE         the folder to write, inside the repository (for example .gpu); it is added to
#                  .git/info/exclude so that it travels only where a call names it in `carry`
#   ORT_GPU_WHEEL  onnxruntime-gpu's cp312 manylinux wheel (pip download, README below), packed by
#                  bench/ort_gpu_pack.py so that onnxruntime's CUDA provider can be timed there
#
# What it writes:
#   kiln.tar.xz   the kiln tool, libkiln, the cuda and opencl test programs (stripped), and the
#                 shared libraries they need that glibc does not provide (LLVM 19, protobuf, onnx,
#                 z3, ...: the GPU machine runs another Linux), with wrappers that set
#                 LD_LIBRARY_PATH for these programs alone (Python there keeps its own libraries)
#   data.tar.xz   ../shared/data's models and ONNX node tests, and two of models-exported
#                 (KILN_GPU_EXPORTED; the GPU machine cannot see ../shared)
#   ort/          onnxruntime-gpu in parts (MANIFEST.json, *.partNNofMM), the first sized to fill
#                 what the first call has left
# A call carries at most 64 MiB with the repository's own files. The first call carries kiln.tar.xz,
# data.tar.xz, the manifest and the first part; each later call one more part, back to back, while
# the machine is warm (it keeps the ignored files earlier calls carried). bench/README.md, "A GPU
# session", gives the commands.
set -eu
build=$1 bundle=$2 wheel=${3:-}
repo=$(cd "$(dirname "$0")/.." && pwd)
data=$repo/../shared/data
limit_mib=64
case $bundle in /*) ;; *) bundle=$repo/$bundle ;; esac
case $bundle in "$repo"/*) ;; *) echo "gpu_bundle: BUNDLE must be inside the repository ($repo)" >&2; exit 2 ;; esac
relative=${bundle#"$repo"/}
grep -qxF "/$relative/" "$repo/.git/info/exclude" 2>/dev/null || echo "/$relative/" >> "$repo/.git/info/exclude"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$bundle" "$stage/kiln/lib" "$stage/kiln/real"
programs="tools/kiln tests/cuda/cuda-probe tests/cuda/test-cuda-renderer tests/cuda/test-cuda-nvrtc
  tests/cuda/test-cuda-plan tests/cuda/test-cuda-device-tensors tests/opencl/opencl-probe tests/opencl/test-opencl"
for program in $programs; do
  [ -x "$build/$program" ] || { echo "gpu_bundle: $build/$program is missing: build it first" >&2; exit 1; }
  name=$(basename "$program")
  mkdir -p "$stage/kiln/build/$(dirname "$program")"
  strip --strip-unneeded -o "$stage/kiln/real/$name" "$build/$program"
  # The wrapper keeps the build's layout (gpu_check.sh takes BUILD); the bundle's lib/ is two or
  # three folders up from it.
  cat > "$stage/kiln/build/$program" <<EOF
#!/bin/sh
root=\$(cd "\$(dirname "\$0")/$(echo "$program" | sed 's|[^/]*/|../|g; s|/[^/]*$||')/.." && pwd)
LD_LIBRARY_PATH=\$root/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH} exec "\$root/real/$name" "\$@"
EOF
  chmod +x "$stage/kiln/build/$program"
done
for library in "$build"/capi/libkiln.so.0 "$build"/capi/libkiln-compiler.so.0; do
  strip --strip-unneeded -o "$stage/kiln/lib/$(basename "$library")" "$library"
done
# Every shared library the programs load, but glibc's and the C++ runtime's (the GPU machine's are
# newer, and an older copy would shadow them).
for program in $programs; do ldd "$build/$program"; done | awk '/=> \//{print $3}' | sort -u |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux-x86-64|libgcc_s|libstdc\+\+)\.so|/libkiln' |
  while read -r library; do cp -L "$library" "$stage/kiln/lib/"; done
echo "packing kiln ($(du -sh "$stage/kiln" | cut -f1) unpacked)"
XZ_OPT=-6T0 tar -C "$stage/kiln" -cJf "$bundle/kiln.tar.xz" .

if [ -d "$data/models" ]; then
  echo "packing ../shared/data"
  # Two exported models (all of models-exported would not fit beside onnxruntime's parts):
  # KILN_GPU_EXPORTED names others.
  exported=
  for name in ${KILN_GPU_EXPORTED:-mobilenet_v3_small_dynbatch bert_tiny_legacy}; do
    [ -d "$data/models-exported/$name" ] && exported="$exported data/models-exported/$name"
  done
  XZ_OPT=-6T0 tar -C "$data/.." -cJf "$bundle/data.tar.xz" data/models data/onnx-node-tests $exported
else
  echo "gpu_bundle: no $data/models: the shared models and node tests will not run there" >&2
  rm -f "$bundle/data.tar.xz"
fi

mib() { echo $(( ($(du -cb "$@" | tail -1 | cut -f1) + 1048575) / 1048576 )); }
bytes() { du -cb "$@" | tail -1 | cut -f1; }
limit=$(( limit_mib * 1048576 ))
# What every call carries besides the bundle: the repository's files, and 1 MiB spare for untracked
# ones.
repo_bytes=$(( $(cd "$repo" && git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1) + 1048576 ))
# kiln and the data go in calls of their own where they do not fit in one together (kiln alone is
# ~47 MiB, LLVM's library most of it); onnxruntime's parts fill what the kiln call leaves, then
# calls of their own.
first_call="$bundle/kiln.tar.xz"
data_call=
if [ -f "$bundle/data.tar.xz" ]; then
  if [ $(( repo_bytes + $(bytes "$bundle/kiln.tar.xz" "$bundle/data.tar.xz") )) -le $limit ]; then
    first_call="$first_call $bundle/data.tar.xz"
  else
    data_call="$bundle/data.tar.xz"
  fi
fi
rm -rf "$bundle/ort"
if [ -n "$wheel" ]; then
  first=$(( (limit - repo_bytes - $(bytes $first_call)) / 1048576 ))
  [ "$first" -ge 1 ] || first=1
  python3 "$repo/bench/ort_gpu_pack.py" pack "$wheel" "$bundle/ort" --first-part-mib "$first" \
    --part-mib $(( (limit - repo_bytes) / 1048576 ))
  first_call="$first_call $bundle/ort/MANIFEST.json $(ls "$bundle"/ort/*.part01of* 2>/dev/null || true)"
fi
echo
echo "first call carries ($(mib $first_call) MiB, and the repository's $(( repo_bytes / 1048576 )) MiB):"
for path in $first_call; do echo "  ${path#"$repo"/}"; done
if [ -n "$wheel" ]; then
  for part in "$bundle"/ort/*.part*of*; do
    case $part in *part01of*) continue ;; esac
    echo "then a call that carries ${part#"$repo"/} ($(mib "$part") MiB)"
  done
fi
[ -z "$data_call" ] || echo "then a call that carries ${data_call#"$repo"/} ($(mib "$data_call") MiB)"
