#!/usr/bin/env bash
# The fast-path run on the GPU host (carry .whl): install the wheels, run benchmarks/bench_fastpath.py,
# then the MCP five-tool test and a profile from a fresh virtual environment holding only the client
# package (wheels in .whl/venv). Everything lands in $OUT/fastpath.tgz; the tables are printed.
#   tools/gpu_fastpath.sh [bench_fastpath.py args]
# BENCH_TIMEOUT, MCP_TIMEOUT, VENV_TIMEOUT: each step's limit in seconds; 0 skips the step.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD:$PWD/contract:$PWD/client${PYTHONPATH:+:$PYTHONPATH}"
# Installed as they are here, for the entry points of `profsvc serve` and the embedded service.
python3 -m pip install -q --no-index --no-build-isolation --no-deps -e ./contract -e ./client -e . || exit 1 PYTHONUNBUFFERED=1
work=$(mktemp -d)
trap 'tar czf "$out/fastpath.tgz" -C "$work" .' EXIT
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  ncu --version | tail -1
  python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__)"
  nproc
} >"$work/env.txt" 2>&1
[ "${BENCH_TIMEOUT:-420}" = 0 ] || timeout "${BENCH_TIMEOUT:-420}" python3 benchmarks/bench_fastpath.py --out "$work" "$@" >"$work/table.md" 2>"$work/bench.log"
echo "bench exit $?"
cat "$work/env.txt" "$work/table.md"
tail -25 "$work/bench.log"
# The MCP tools on the seed, against `profsvc serve` (the served fixture), reusing the precompiled header.
export PROFSVC_STATE_DIR=/tmp/profsvc-state PROFSVC_SERVER_LOG="$work/server-mcp.log"
mkdir -p "$PROFSVC_STATE_DIR/cache" && cp -r /tmp/fastpath-*/split-cache/pch "$PROFSVC_STATE_DIR/cache/" 2>/dev/null
[ "${MCP_TIMEOUT:-150}" = 0 ] || timeout "${MCP_TIMEOUT:-150}" python3 -m pytest -v -p no:cacheprovider -m gpu tests/gpu/test_mcp_gpu.py >"$work/mcp-gpu.txt" 2>&1
echo "mcp gpu test exit $?"; grep -E "passed|failed|Error|assert" "$work/mcp-gpu.txt" | tail -8
# A fresh venv with only the client package: no torch, profiles through a server on this GPU.
[ "${VENV_TIMEOUT:-120}" = 0 ] && exit 0
python3 -m venv /tmp/cv && /tmp/cv/bin/pip install -q --no-index --find-links .whl/venv profsvc-client >"$work/venv.txt" 2>&1
/tmp/cv/bin/python -c "import torch" >>"$work/venv.txt" 2>&1 && echo "torch importable in the venv!" || echo "venv: torch not importable (as intended)"
/tmp/cv/bin/pip list --format=freeze >>"$work/venv.txt" 2>&1
python3 -m profsvc_client.cli serve --port 50777 --state-dir "$PROFSVC_STATE_DIR" >"$work/server-venv.log" 2>&1 &
server=$!
for _ in $(seq 100); do /tmp/cv/bin/profsvc capabilities --server 127.0.0.1:50777 >/dev/null 2>&1 && break; sleep 0.5; done
timeout "${VENV_TIMEOUT:-120}" /tmp/cv/bin/profsvc profile tests/fixtures/seed47.py --server 127.0.0.1:50777 --out "$work/venv-profile" >"$work/venv-profile.txt" 2>&1
echo "venv client profile exit $?"; head -12 "$work/venv-profile.txt"; ls "$work/venv-profile"
kill -INT $server; wait $server
