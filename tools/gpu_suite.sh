#!/usr/bin/env bash
# The GPU run on a GPU host that can download nothing: install the carried
# wheels (.whl/), run the CPU and GPU test suites from the source tree, and keep
# every log under $OUT (or ./gpu-out). Usage: tools/gpu_suite.sh [pytest args]
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD:$PWD/client${PYTHONPATH:+:$PYTHONPATH}"
export PROFSVC_STATE_DIR=/tmp/profsvc-state PROFSVC_SERVER_LOG="$out/server.log"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  ncu --version | tail -1
  python3 -c "import sys, torch, grpc, google.protobuf as p; print(sys.version.split()[0], torch.__version__, grpc.__version__, p.__version__)"
} 2>&1 | tee "$out/env.txt"
python3 -m pytest -q -p no:cacheprovider tests/unit tests/integration 2>&1 | tee "$out/cpu-suite.txt" | tail -3
python3 -m pytest -v -p no:cacheprovider -m gpu tests/gpu "$@" 2>&1 | tee "$out/gpu-suite.txt" | tail -25
