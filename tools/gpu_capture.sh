#!/usr/bin/env bash
# Capture fixtures on a GPU host (run from the repository root, $OUT set, carried wheels in .whl/):
# the archetype reports, the seed problem profiled through profsvc (its -lineinfo build gives
# source-level counters), and a check that ncu works inside a new network namespace.
# Everything comes back as $OUT/captures.tgz plus a summary.
set -u
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD:$PWD/contract:$PWD/client${PYTHONPATH:+:$PYTHONPATH}"
# Installed as they are here, for the entry points of `profsvc serve` and the embedded service.
python3 -m pip install -q --no-index --no-build-isolation --no-deps -e ./contract -e ./client -e . || exit 1
export PROFSVC_STATE_DIR=/tmp/profsvc-state
work=$(mktemp -d /tmp/captures.XXXXXX)
OUT="$work" tools/capture_archetypes.sh 2>&1 | tee "$work/archetypes.txt"
{
  nvcc -O3 -lineinfo -arch=sm_90 -o /tmp/saxpy examples/saxpy.cu -ldl &&
    unshare --net -- ncu --config-file off --clock-control none --metrics gpu__time_duration.sum /tmp/saxpy
  echo "ncu in a new network namespace: exit $?"
} >"$work/netns.txt" 2>&1
tail -3 "$work/netns.txt"
mkdir -p "$work/seed47"
python3 -m profsvc_client.cli profile tests/fixtures/seed47.py --out "$work/seed47" >"$work/seed47/stdout.txt" 2>&1
echo "seed47 profile exit $?"
tar czf "${OUT:?}/captures.tgz" -C "$work" .
cp "$work/archetypes.txt" "$work/netns.txt" "$OUT/"
