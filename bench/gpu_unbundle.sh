#!/bin/sh
# Unpacks a bundle made by bench/gpu_bundle.sh on the lent GPU machine: kiln's programs into
# DEST/build (bench/gpu_check.sh's BUILD) and ../shared/data into DEST/shared/data. Each archive is
# unpacked once: where DEST already holds it (a warm machine, a later call) it is left alone, so
# that calls may carry kiln.tar.xz and data.tar.xz one at a time (each call's carry is limited).
# usage: bench/gpu_unbundle.sh BUNDLE DEST
set -eu
bundle=$1 dest=$2
if [ ! -f "$bundle/kiln.tar.xz" ] && [ ! -f "$dest/.bundle-kiln" ]; then
  echo "gpu_unbundle: no $bundle/kiln.tar.xz: carry the bundle bench/gpu_bundle.sh wrote (the first call's carry list)" >&2
  exit 1
fi
mkdir -p "$dest/shared"
# unpack ARCHIVE INTO STAMP: unpacks unless STAMP names this very archive.
unpack() {
  [ -f "$1" ] || return 0
  stamp=$(cksum < "$1")
  if [ -f "$3" ] && [ "$(cat "$3")" = "$stamp" ]; then
    echo "gpu_unbundle: $dest already holds $(basename "$1")"
    return 0
  fi
  tar -C "$2" -xJf "$1"
  echo "$stamp" > "$3"
  echo "gpu_unbundle: $(basename "$1") unpacked into $2"
}
unpack "$bundle/kiln.tar.xz" "$dest" "$dest/.bundle-kiln"
unpack "$bundle/data.tar.xz" "$dest/shared" "$dest/.bundle-data"
