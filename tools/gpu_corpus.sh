#!/usr/bin/env bash
# The build-form corpus on a GPU host (carry .whl): install the wheels and bubblewrap, then one stage, logs under $OUT.
# Stages, each within 10 minutes on an H200:
#   bench  benchmarks/bench_corpus_build.py: every corpus source built cold through a jailed `profsvc serve` (its
#          glue headers made at its start) and with torch's own load_inline, alternating (extra args go to the
#          benchmark: --jobs, --limit N, --sample N, --alone N: then every source cold on a second server, N at a
#          time), stopped after CORPUS_TIMEOUT_S seconds (570)
#   test   tests/gpu/test_corpus_gpu.py: through one jailed server, each candidate compiles on its manifest's route
#          and passes the correctness check
# Usage: tools/gpu_corpus.sh STAGE [args]
set -uo pipefail
cd "$(dirname "$0")/.."
stage="${1:?stage bench or test}"
shift
out="${OUT:-gpu-out}"
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD:$PWD/contract:$PWD/client${PYTHONPATH:+:$PYTHONPATH}"
# Installed as they are here, for the entry points of `profsvc serve` and the embedded service.
python3 -m pip install -q --no-index --no-build-isolation --no-deps -e ./contract -e ./client -e . || exit 1 PYTHONUNBUFFERED=1
# The jail's tool, carried as Debian's package (.whl/debs/bubblewrap_*.deb), unpacked beside the wheels.
dpkg -x .whl/debs/bubblewrap_*.deb /tmp/bwrap && export PROFSVC_BWRAP=/tmp/bwrap/usr/bin/bwrap || exit 1
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
  nvcc --version | tail -1
  python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)"
  nproc
} >"$out/env-corpus.txt" 2>&1
case "$stage" in
  bench)
    timeout "${CORPUS_TIMEOUT_S:-570}" python3 benchmarks/bench_corpus_build.py --out "$out/corpus-build" "$@" 2>"$out/corpus-build.log"
    echo "bench exit $?"
    tail -5 "$out/corpus-build.log"
    grep -c '"message": "built ' "$out/corpus-build/server.log" | sed 's/^/server log lines of builds: /'
    ;;
  test)
    timeout 570 python3 -m pytest -v -p no:cacheprovider -m gpu tests/gpu/test_corpus_gpu.py "$@" >"$out/corpus-gpu.txt" 2>&1
    echo "corpus gpu test exit $?"
    grep -E "PASSED|FAILED|ERROR|passed|failed" "$out/corpus-gpu.txt" | tail -45
    ;;
  *)
    echo "unknown stage $stage" >&2
    exit 2
    ;;
esac
