#!/usr/bin/env bash
# The Dask cluster's GPU run on a GPU host that can download nothing: install the carried wheels (.whl/: the
# project's and the cluster's, README "Clusters"), then run tests/gpu/test_cluster_gpu.py (20 distinct problems
# through one `profsvc serve`, then through a one-GPU local Dask cluster; with two GPUs, one against two).
# Logs and cluster-throughput.json under $OUT (or ./gpu-out), packed as cluster-run.tgz. A few minutes on an H200.
# Usage: [CLUSTER_TIMEOUT_S=580] tools/gpu_cluster.sh [pytest args]
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
work=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD:$PWD/contract:$PWD/client${PYTHONPATH:+:$PYTHONPATH}"
# Installed as they are here, for the entry points of `profsvc serve` and the embedded service.
python3 -m pip install -q --no-index --no-build-isolation --no-deps -e ./contract -e ./client -e . || exit 1
# The jail's tool, carried as Debian's package (.whl/debs/bubblewrap_*.deb): the server and each Dask worker's
# embedded service refuse to start without it.
dpkg -x .whl/debs/bubblewrap_*.deb /tmp/bwrap && export PROFSVC_BWRAP=/tmp/bwrap/usr/bin/bwrap || exit 1
export PROFSVC_CLUSTER_RESULTS="$work"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  # What the cluster wheels need from the host's own packages (torch, typer and matplotlib bring them).
  python3 -c "import sys, importlib.metadata as m; print(sys.version.split()[0], *(f'{p}=={m.version(p)}' for p in ('dask', 'distributed', 'bokeh', 'tornado', 'click', 'jinja2', 'fsspec', 'packaging', 'pillow', 'contourpy', 'numpy', 'pandas', 'pyarrow')))"
} >"$work/env.txt" 2>&1
cat "$work/env.txt"
timeout "${CLUSTER_TIMEOUT_S:-580}" python3 -m pytest -v -s -p no:cacheprovider -m gpu tests/gpu/test_cluster_gpu.py "$@" >"$work/cluster-suite.txt" 2>&1
echo "cluster suite: exit $?"
grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed|^one server|^cluster, " "$work/cluster-suite.txt"
cp "$work/cluster-throughput.json" "$out/" 2>/dev/null
tar czf "$out/cluster-run.tgz" -C "$work" .
