#!/usr/bin/env bash
# The GPU run on a GPU host that can download nothing: install the carried wheels (.whl/, from
# tools/gpu_wheels.sh), then run
# one stage, keeping every log under $OUT (or ./gpu-out). Stages, each a few minutes on an H200:
#   a    GPU tests: profiling end to end, archetypes and hints, GPU faults; the jail's attack suite
#   b    GPU tests: the agent's tools, verdicts; the seed's -lineinfo report; the soak (SOAK_REQUESTS, 200); the batch
#   static  GPU tests: static-check policies in evaluate, the corpus's honest look-alikes, the corpus's runtime-only
#           gaming (tests/staticcheck_corpus/runtime) failing evaluate by its guard
#   runtime  evaluate over the runtime-only gaming through one served server, one JSON result per file
#   inputs  GPU tests: published problems in a batch, Python programs (Triton, torch, the ones that profile
#           nothing), NVTX domains; the report of examples/programs/nvtx_domains.py (a fixture to commit)
#   cpu  the CPU suite on the GPU host's Python
#   exec  any command (the args) in the run's environment: the wheels, the jail's tool, the build cache
#   tests  the tests named in the pytest args, GPU or not, each stopped after PROFSVC_TEST_TIMEOUT s (300)
# Usage: tools/gpu_suite.sh STAGE [pytest args]
set -uo pipefail
cd "$(dirname "$0")/.."
stage="${1:?stage a, b, static, runtime, inputs, tests, exec or cpu}"
shift
out="${OUT:-gpu-out}"
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD:$PWD/contract:$PWD/client${PYTHONPATH:+:$PYTHONPATH}"
# Installed as they are here, for the entry points of `profsvc serve` and the embedded service.
python3 -m pip install -q --no-index --no-build-isolation --no-deps -e ./contract -e ./client -e . || exit 1
# The jail's tool, carried as Debian's package (.whl/debs/bubblewrap_*.deb), unpacked beside the wheels.
dpkg -x .whl/debs/bubblewrap_*.deb /tmp/bwrap && export PROFSVC_BWRAP=/tmp/bwrap/usr/bin/bwrap || exit 1
# One build cache for the whole run (both stages), so each extension is built once.
export PROFSVC_STATE_DIR=/tmp/profsvc-state PROFSVC_SERVER_LOG="$out/server-$stage.log"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  ncu --version | tail -1
  python3 -c "import sys, torch, grpc, google.protobuf as p; print(sys.version.split()[0], torch.__version__, grpc.__version__, p.__version__)"
} >"$out/env.txt" 2>&1
run_tests() {
  python3 -m pytest -v -p no:cacheprovider "$@" 2>&1 | tee -a "$out/gpu-suite-$stage.txt" | grep -E "PASSED|FAILED|ERROR|passed|failed"
}
gpu_tests() {
  run_tests -m gpu "$@"
}
# Evaluate over the runtime-only gaming, through one served server (a server's start is paid once, not per file).
runtime_corpus() {
  local port=50771 server name
  python3 -m profsvc_client.cli serve --port "$port" >"$out/server-runtime.txt" 2>&1 &
  server=$!
  for _ in $(seq 180); do
    python3 -m profsvc_client.cli capabilities --server "127.0.0.1:$port" >/dev/null 2>&1 && break
    sleep 1
  done
  for problem in tests/staticcheck_corpus/runtime/*.py; do
    name="$(basename "$problem" .py)"
    python3 -m profsvc_client.cli evaluate "$problem" --skip-profile --format json --server "127.0.0.1:$port" \
      >"$out/runtime-$name.json" 2>"$out/runtime-$name.err"
    echo "runtime/$name: evaluate exit $?"
  done
  kill -TERM "$server"
  wait "$server"
}
case "$stage" in
  a)
    gpu_tests tests/gpu/test_profile_gpu.py tests/gpu/test_counters_gpu.py tests/gpu/test_faults_gpu.py "$@"
    run_tests -m slow tests/security/test_jail.py
    ;;
  b)
    gpu_tests tests/gpu/test_agent_tools_gpu.py tests/gpu/test_verdict_gpu.py "$@"
    python3 -m profsvc_client.cli profile tests/fixtures/seed47.py --out "$out/seed47" >"$out/seed47-profile.txt" 2>&1
    echo "seed47 -lineinfo profile: exit $?"
    timeout 240 python3 benchmarks/soak.py --requests "${SOAK_REQUESTS:-200}" --clients 8 --out "$out/soak.json" >"$out/soak.txt" 2>&1
    echo "soak: exit $?"
    gpu_tests tests/gpu/test_batch_gpu.py
    ;;
  static)
    gpu_tests tests/gpu/test_static_policy_gpu.py "$@"
    ;;
  runtime)
    runtime_corpus
    ;;
  inputs)
    gpu_tests tests/gpu/test_programs_gpu.py tests/gpu/test_published_gpu.py "$@"
    python3 -m profsvc_client.cli profile examples/programs/nvtx_domains.py --out "$out/nvtx_domains" \
      >"$out/nvtx_domains.txt" 2>&1
    echo "nvtx_domains profile: exit $?"
    ;;
  tests)
    run_tests --tb=short -rfE --timeout "${PROFSVC_TEST_TIMEOUT:-300}" "$@"
    ;;
  exec)
    "$@" 2>&1 | tee -a "$out/exec.txt"
    ;;
  cpu)
    python3 -m pytest -q -p no:cacheprovider -m "not gpu" tests/unit tests/integration "$@" 2>&1 | tee "$out/cpu-suite.txt" | tail -3
    ;;
esac
