"""End to end on a GPU: `profsvc serve`, real builds, real ncu, real counters."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from profsvc.metrics.analysis import analyze_report
from profsvc.metrics.nvtx import PROFILER_WARMUP_RANGE, in_profsvc_range
from profsvc.metrics.reader import load_reader
from profsvc_client.client import ProfilerClient, load_source
from profsvc_contract.models import KernelFilter, KernelSource, ProfileResult, SourceFile, Stage
from tests.conftest import FIXTURES, free_port, run_cli, wait_healthy, wait_until

pytestmark = pytest.mark.gpu
EXAMPLES = FIXTURES.parent.parent / "examples"
# A warm ncu worker comes up 4 to 7 s after the call that took the last one (an H100, an H200) and primes 0.5 s
# after the GPU goes idle, in about 1 to 2.5 s.
PRIMED_WITHIN_S = 12.0


@pytest.fixture(scope="module")
def gpu_client(served):
    with ProfilerClient(served, timeout=900) as client:
        yield client


def _sane(result: ProfileResult) -> None:
    assert result.ok, result.report_text
    for kernel in result.kernels:
        duration = kernel.value("duration")
        assert duration is not None and duration > 0
        for name, figure in kernel.figures.items():
            if figure.unit == "%" and figure.value is not None:
                assert 0 <= figure.value <= 100, name
        if kernel.stalls:
            assert math.isclose(sum(s.share_pct for s in kernel.stalls), 100.0, rel_tol=1e-6)
    assert result.ncu.passes and all(p > 0 for p in result.ncu.passes)


def test_seed_problem_profiles_only_the_candidate_kernel(gpu_client, tmp_path):
    events = []
    result = gpu_client.profile(load_source(FIXTURES / "seed47.py"), on_progress=events.append)
    _sane(result)
    assert [k.name for k in result.kernels] == ["vga_linear_kernel"]
    kernel = result.kernels[0]
    # The harness's range, in profsvc's own domain.
    assert kernel.nvtx_range == "profsvc@profsvc"
    assert [(s.domain, s.push_pop) for s in kernel.nvtx] == [("profsvc", ["profsvc"])]
    assert (kernel.grid.x, kernel.grid.y, kernel.block.x) == (8, 12, 224)
    assert 0.5e3 < kernel.value("duration") < 100e3  # ns: a tiny kernel, about 2.6 μs in the fixtures
    assert kernel.stalls[0].share_pct <= 100
    stages = [e.stage for e in events]
    assert Stage.QUEUED in stages and Stage.PROFILING in stages and Stage.PARSING in stages
    # From the worker's status written to ncu's end (its exit, the report written): within the profile stage.
    assert 0 < result.timings["profile:exit"] < result.timings["profile"]
    # The downloaded .ncu-rep reads back to the very figures the result carries.
    report = gpu_client.download_artifact(result.artifacts[0].id, tmp_path)
    # The server adds hints and moves hotspot lines from load_inline's cuda.cu into seed47.py.
    server_side = {"hints": [], "hotspots": []}
    assert [k.model_copy(update=server_side) for k in analyze_report(report).kernels] == [
        k.model_copy(update=server_side) for k in result.kernels
    ]


def test_large_memory_bound_kernel(gpu_client):
    result = gpu_client.profile(load_source(FIXTURES / "big.py"))
    _sane(result)
    assert [k.name for k in result.kernels] == ["relu2_k"]
    kernel = result.kernels[0]
    assert kernel.value("dram_bytes_read") >= 2**30  # 1 GiB in
    assert kernel.value("dram_throughput_pct") > 50
    assert kernel.value("global_load_sectors_per_request") == pytest.approx(16.0)  # float4: 512 B per warp


def test_cuda_program_profiles_its_nvtx_range_only(gpu_client):
    result = gpu_client.profile(load_source(EXAMPLES / "saxpy.cu"))
    _sane(result)
    assert len(result.kernels) == 1  # the warm-up launch outside the range is not profiled
    assert result.kernels[0].name == "saxpy"
    assert result.kernels[0].nvtx_range == "saxpy"


def test_cuda_program_without_nvtx_filtered_by_name_and_count(gpu_client):
    source = b"""
__global__ void fill(float* p, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] = i; }
__global__ void twice(float* p, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] *= 2; }
int main() {
  float* p; int n = 1 << 20; cudaMalloc(&p, n * sizeof(float));
  for (int r = 0; r < 3; ++r) { fill<<<n / 256, 256>>>(p, n); twice<<<n / 256, 256>>>(p, n); }
  cudaDeviceSynchronize(); cudaFree(p); return 0;
}
"""
    result = gpu_client.profile(
        KernelSource(main=SourceFile(name="plain.cu", content=source)),
        kernel_filter=KernelFilter(name_regex="^twice$", launch_count=2),
    )
    _sane(result)
    assert [k.name for k in result.kernels] == ["twice", "twice"]


def test_runtime_error_in_candidate_is_a_result_with_its_line(gpu_client):
    text = (
        (FIXTURES / "seed47.py")
        .read_text()
        .replace(
            "return ext().vga_linear_forward", "raise ValueError('bad shape')\n        return ext().vga_linear_forward"
        )
    )
    result = gpu_client.profile(KernelSource(main=SourceFile(name="raises47.py", content=text.encode())))
    assert not result.ok and result.error.kind == "runtime_error"
    assert "ValueError: bad shape" in result.error.message and "raises47.py line" in result.error.message


def test_cli_profile_embedded_and_out_dir(tmp_path):
    done = run_cli("profile", FIXTURES / "seed47.py", "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "vga_linear_kernel" in done.stdout
    assert (tmp_path / "report.ncu-rep").is_file() and (tmp_path / "result.json").is_file()


def test_a_warm_workers_own_kernel_stays_out_of_the_result_and_adds_little_to_the_report(gpu_client, tmp_path):
    # A one-GPU server primes its warm ncu workers (scheduler.warm_pool): their reports hold that kernel too. A
    # call right after another takes its worker unprimed; the server primes the next one within seconds of the
    # GPU going idle, so the call is sent again after a pause until a report holds the worker's kernel.
    primes = len(gpu_client.capabilities().gpus) == 1
    for attempt in range(3 if primes else 1):
        if attempt:
            time.sleep(PRIMED_WITHIN_S)
        result = gpu_client.profile(load_source(FIXTURES / "seed47.py"))
        _sane(result)
        assert [k.name for k in result.kernels] == ["vga_linear_kernel"]
        assert result.ncu is not None and len(result.ncu.passes) == 1  # the worker's own kernel is not counted
        # For the GPU run's log (not a timing test): the ncu run on the worker, which priming shortens.
        print(f"ncu run {result.ncu.seconds:.2f} s, passes {result.ncu.passes}")
        report = gpu_client.download_artifact(result.artifacts[0].id, tmp_path / f"report-{attempt}.ncu-rep")
        actions = [a for r in load_reader().load_report(str(report)) for a in r]
        warmup = [in_profsvc_range(a, PROFILER_WARMUP_RANGE) for a in actions]
        assert warmup in ([True, False], [False])
        assert "vga_linear_kernel" in actions[-1].name()
        # The seed's kernel alone makes a report of about 230 KB; torch's fill kernel as the worker's own added
        # 2.3 MB.
        assert report.stat().st_size < 600_000
        if warmup[0]:
            break
    assert warmup == ([True, False] if primes else [False])


PRIMING = "priming a warm ncu-gpu0 worker"
PRIME_STOPPED = "a job came for the GPU while a warm worker primed"


def test_a_call_that_comes_while_a_worker_primes_runs_at_once_and_profiles_go_on(tmp_path):
    # The pool primes the next ncu worker 0.5 s after a profile frees the GPU (about 2 s on an H200); a call
    # sent as that prime starts stops it (scheduler.warm_pool.stop_priming), and ncu is left able to profile.
    log_path, port = tmp_path / "server.log", free_port()
    with log_path.open("ab") as log:
        serve = [sys.executable, "-m", "profsvc_client.cli", "serve", "--port", str(port)]
        process = subprocess.Popen(
            [*serve, "--state-dir", str(tmp_path / "state")],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    target = f"127.0.0.1:{port}"

    def logged(line: str) -> int:
        return Path(log_path).read_text().count(line)

    try:
        wait_healthy(target)
        with ProfilerClient(target, timeout=900) as client:
            if len(client.capabilities().gpus) != 1:
                pytest.skip("only a one-GPU server primes its ncu workers")
            source = load_source(FIXTURES / "seed47.py")
            for _ in range(3):  # the call may miss the prime's window: a few tries
                assert client.profile(source).ok
                primes = logged(PRIMING)
                wait_until(lambda: logged(PRIMING) > primes, "the next ncu worker priming", 60)  # noqa: B023
                evaluated = client.evaluate(source, skip_profile=True)
                assert evaluated.correctness.ok, evaluated.report_text
                print(f"evaluate during a prime: gpu_wait {evaluated.timings.get('gpu_wait', 0):.3f} s")
                if logged(PRIME_STOPPED):
                    break
            assert logged(PRIME_STOPPED), "no call came while a worker primed"
            # The worker killed mid-prime left ncu and the GPU able to profile, primed or not.
            _sane(client.profile(source))
            _sane(client.profile(source))
    finally:
        process.terminate()
        process.wait(timeout=60)
