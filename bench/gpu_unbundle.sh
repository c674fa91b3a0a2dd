#!/bin/sh
# Unpacks a bundle made by bench/gpu_bundle.sh on the lent GPU machine: kiln's programs into
# DEST/build (bench/gpu_check.sh's BUILD) and ../shared/data into DEST/shared/data. Does nothing
# where DEST already holds this bundle (a warm machine, a later call).
# usage: bench/gpu_unbundle.sh BUNDLE DEST
set -eu
bundle=$1 dest=$2
if [ ! -f "$bundle/kiln.tar.xz" ]; then
  echo "gpu_unbundle: no $bundle/kiln.tar.xz: carry the bundle bench/gpu_bundle.sh wrote (the first call's carry list)" >&2
  exit 1
fi
stamp=$(cksum < "$bundle/kiln.tar.xz")
if [ -f "$dest/.bundle" ] && [ "$(cat "$dest/.bundle")" = "$stamp" ]; then
  echo "gpu_unbundle: $dest already holds this bundle"
  exit 0
fi
rm -rf "$dest"
mkdir -p "$dest/shared"
tar -C "$dest" -xJf "$bundle/kiln.tar.xz"
[ -f "$bundle/data.tar.xz" ] && tar -C "$dest/shared" -xJf "$bundle/data.tar.xz"
echo "$stamp" > "$dest/.bundle"
echo "gpu_unbundle: kiln in $dest/build$( [ -d "$dest/shared/data" ] && echo ", shared data in $dest/shared/data")"
