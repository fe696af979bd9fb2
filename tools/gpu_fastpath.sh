#!/usr/bin/env bash
# The fast-path run on the GPU host (carry .whl): install the wheels, run benchmarks/bench_fastpath.py,
# pack everything it wrote into $OUT/fastpath.tgz and print its table.
#   tools/gpu_fastpath.sh [bench_fastpath.py args]
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD:$PWD/client${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
work=$(mktemp -d)
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  ncu --version | tail -1
  python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__)"
  nproc
} >"$work/env.txt" 2>&1
timeout 560 python3 benchmarks/bench_fastpath.py --out "$work" "$@" >"$work/table.md" 2>"$work/bench.log"
echo "bench exit $?"
cat "$work/env.txt" "$work/table.md"
tail -40 "$work/bench.log"
tar czf "$out/fastpath.tgz" -C "$work" .
