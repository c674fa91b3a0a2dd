#!/bin/sh
# The kernel cache works across processes: the second run of a program compiles nothing.
# Usage: second_run_compiles_nothing.sh PROGRAM (run with an empty KILN_CACHE_DIR of its own).
set -eu
program=$1
KILN_CACHE_DIR=$(mktemp -d)
export KILN_CACHE_DIR KILN_DEBUG=1
trap 'rm -rf "$KILN_CACHE_DIR"' EXIT
first=$("$program" 2>&1)
second=$("$program" 2>&1)
echo "$first" | grep 'realize:.*kernels' | sed 's/^/first run:  /'
echo "$second" | grep 'realize:.*kernels' | sed 's/^/second run: /'
# The first run must compile something, and the second must compile nothing and use the cache.
echo "$first" | grep -q 'realize: [1-9][0-9]* kernels ([1-9][0-9]* compiled' || { echo "first run compiled nothing"; exit 1; }
if echo "$second" | grep 'realize:.*kernels' | grep -v '(0 compiled' >/dev/null; then
  echo "the second run compiled kernels"; exit 1
fi
echo "$second" | grep -q 'from the disk cache' || { echo "no cache use reported"; exit 1; }
echo "second run: every kernel came from the cache"
