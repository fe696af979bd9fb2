"""Round trips over loopback: gRPC, health, reflection, errors, and the CLI against `profsvc serve`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from importlib.metadata import version

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from profsvc.metrics.analysis import analyze_report
from profsvc_client.client import ProfilerClient, load_source
from profsvc_contract import errors
from profsvc_contract.models import KernelFilter, KernelSource, RuleSeverity, Severity, SourceFile, StaticPolicy
from tests.conftest import FIXTURES, HAS_GPU, REPORTS, needs_nvcc, run_cli

EXAMPLES = FIXTURES.parent.parent / "examples"
no_gpu_only = pytest.mark.skipif(HAS_GPU, reason="checks the answer of a server without a GPU")


def test_capabilities(client):
    caps = client.capabilities()
    assert caps.server_version
    assert caps.host == socket.gethostname()
    assert {s.name for s in caps.metric_sets} >= {"default", "basic", "full"}
    assert caps.profiling_available == (not caps.unavailable_reason)


@pytest.mark.parametrize("report", REPORTS, ids=lambda p: p.name)
def test_analyze_over_grpc_equals_the_reader(client, report):
    result = client.analyze(report)
    direct = analyze_report(report)
    assert result.ok
    # The server adds the rule table's hints to what the reader gives.
    assert [k.model_copy(update={"hints": []}) for k in result.kernels] == direct.kernels
    assert all(k.hints for k in result.kernels)
    assert result.device == direct.device
    assert "=== profsvc kernel profile ===" in result.report_text
    # The ncu that wrote the report, as its session records it (the H200 host's, for every committed report).
    assert result.ncu.version == "2025.3.1.0" and result.ncu.command == ""
    assert "report written by ncu 2025.3.1.0" in result.report_text
    # The server that answered, for results kept apart from it (a batch's rows).
    assert result.server.host == socket.gethostname() and result.server.version == version("profsvc")


def test_analyze_filter_by_name(client):
    result = client.analyze(REPORTS[0], kernel_filter=KernelFilter(name_regex="^no_such_kernel$"))
    assert not result.ok
    assert result.error.kind == "no_kernels_profiled"


@pytest.mark.parametrize("warm", [False, True], ids=["fresh worker", "warm worker"])
@pytest.mark.parametrize(
    ("include", "kernels"),
    [("profsvc/", 1), ("no_such_range/", 0), ("profsvc@profsvc/", 0), ("regex:prof.*/", 1), ("[profsvc", 1)],
)
def test_analyze_filter_by_nvtx_range(client, served, warm, include, kernels):
    # The seed's report: its one kernel ran in a push/pop range "profsvc" of the default domain (the harness of the
    # time pushed it there, as a user's code would): profsvc's own domain, "profsvc@", does not select it. The
    # reader's NVTX filter once crashed the report worker (grpc, or in a warm worker matplotlib, loaded before
    # ncu_report).
    report = FIXTURES / "seed47_default.ncu-rep"
    kernel_filter = KernelFilter(nvtx_include=[include])
    if warm:
        with ProfilerClient(served, timeout=300) as served_client:
            result = served_client.analyze(report, kernel_filter=kernel_filter)
    else:
        result = client.analyze(report, kernel_filter=kernel_filter)
    assert len(result.kernels) == kernels
    assert result.ok == bool(kernels)
    assert result.ok or result.error.kind == "no_kernels_profiled"


def test_a_report_over_the_servers_limit_is_too_large_not_a_full_queue(client):
    # The server's default limit is 200 MiB; the upload's first message says how large it is.
    with pytest.raises(errors.InvalidRequest) as caught:
        client.analyze(b"NVR\x00" + bytes(200 * 2**20 - 3))
    assert caught.value.reason == errors.Reason.SOURCE_TOO_LARGE
    assert caught.value.message == "the report is 209,715,201 bytes; the limit is 209,715,200"


@pytest.mark.parametrize("keep", [4, 200_000], ids=["magic only", "first 200 kB"])
def test_a_truncated_report_is_a_bad_report(client, keep):
    truncated = (FIXTURES / "seed47_default.ncu-rep").read_bytes()[:keep]
    with pytest.raises(errors.InvalidRequest) as caught:
        client.analyze(truncated)
    assert caught.value.reason == errors.Reason.BAD_REPORT
    assert "holds no profiling results" in caught.value.message


def test_a_damaged_report_is_named_by_the_users_file_name(tmp_path):
    damaged = tmp_path / "mine.ncu-rep"
    damaged.write_bytes((FIXTURES / "seed47_default.ncu-rep").read_bytes()[:4096])
    done = run_cli("analyze", damaged)
    assert done.returncode == 2
    assert done.stderr.startswith("profsvc: error: mine.ncu-rep holds no profiling results")


@pytest.mark.parametrize(
    ("filename", "named"),
    [
        ("../../etc/mine.ncu-rep", "mine.ncu-rep"),
        ("C:\\runs\\mine.ncu-rep", "mine.ncu-rep"),
        ("..", "report.ncu-rep"),
        ("a\x00b.ncu-rep", "report.ncu-rep"),
        ("a\nb.ncu-rep", "report.ncu-rep"),
        ("a\u2028b.ncu-rep", "report.ncu-rep"),
        ("résumé.ncu-rep", "résumé.ncu-rep"),
        ("", "report.ncu-rep"),
    ],
)
def test_a_raw_clients_file_name_names_its_report_and_nothing_else(server, filename, named):
    # Only the last part of the name the wire carries is used: the server's copy stays in the job's folder.
    from profsvc_contract._proto import profiler_pb2 as pb
    from profsvc_contract._proto import profiler_pb2_grpc as pb_grpc

    damaged = (FIXTURES / "seed47_default.ncu-rep").read_bytes()[:4096]
    with grpc.insecure_channel(server) as channel:
        with pytest.raises(grpc.RpcError) as caught:
            request = pb.AnalyzeRequest(chunk=damaged, filename=filename, size=len(damaged))
            pb_grpc.ProfilerStub(channel).Analyze(iter([request]), timeout=60)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details().startswith(f"{named} holds no profiling results")


def test_an_unknown_source_kind_on_the_wire_is_invalid_argument(server):
    # A raw client (not profsvc's) may send an enum number the server does not know.
    from profsvc_contract._proto import profiler_pb2 as pb
    from profsvc_contract._proto import profiler_pb2_grpc as pb_grpc

    source = pb.KernelSource(main=pb.SourceFile(name="k.py", content=b"x = 1\n"), kind=99)
    with grpc.insecure_channel(server) as channel:
        with pytest.raises(grpc.RpcError) as caught:
            pb_grpc.ProfilerStub(channel).Compile(pb.CompileRequest(source=source), timeout=60)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "KernelSource.kind" in caught.value.details()


@pytest.mark.parametrize(
    ("skip", "count", "kernels"), [(0, 1, 1), (1, 0, 0), (0, 0, 1)], ids=["count 1", "skip 1", "neither"]
)
def test_analyze_applies_launch_skip_and_count(client, skip, count, kernels):
    # The seed's report holds one launch: skipping it leaves none.
    kernel_filter = KernelFilter(launch_skip=skip, launch_count=count)
    result = client.analyze(FIXTURES / "seed47_default.ncu-rep", kernel_filter=kernel_filter)
    assert len(result.kernels) == kernels


def test_garbage_report_is_invalid_argument(client):
    with pytest.raises(errors.InvalidRequest) as caught:
        client.analyze(b"this is not a report")
    assert caught.value.reason == errors.Reason.BAD_REPORT
    assert caught.value.request_id


def test_a_second_server_on_a_port_in_use_exits_with_one_line(served, tmp_path):
    # grpc's default SO_REUSEPORT would let it start and take half of the first server's requests.
    port = served.rsplit(":", 1)[1]
    argv = [sys.executable, "-m", "profsvc_client.cli", "serve", "--port", port, "--state-dir", str(tmp_path)]
    try:
        second = subprocess.run([*argv, "--no-warm-workers"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("a second server started on a port in use")
    assert second.returncode == 2
    lines = [line for line in second.stderr.splitlines() if line.startswith("profsvc: error:")]
    causes = "is the port in use, the host an address of this machine?"
    assert lines == [f"profsvc: error: cannot listen on 127.0.0.1:{port} ({causes}) [BAD_ARGUMENT]"]
    assert run_cli("analyze", FIXTURES / "seed47_full.ncu-rep", "--server", served).returncode == 0


def test_a_metrics_port_in_use_is_one_line_and_an_exit(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = [sys.executable, "-m", "profsvc_client.cli", "serve", "--port", "0", "--state-dir", str(tmp_path)]
        try:
            done = subprocess.run([*argv, "--metrics-port", str(port)], capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("the server neither served metrics nor exited")
    assert done.returncode == 2
    assert f"profsvc: error: cannot serve metrics on 127.0.0.1:{port}: Address already in use" in done.stderr


def test_a_missing_tls_file_is_one_line_and_an_exit(tmp_path):
    argv = [sys.executable, "-m", "profsvc_client.cli", "serve", "--port", "0", "--state-dir", str(tmp_path)]
    missing = tmp_path / "missing.pem"
    try:
        done = subprocess.run(
            [*argv, "--tls-cert", str(missing), "--tls-key", str(missing)], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the server neither started nor exited")
    assert done.returncode == 2
    assert f"profsvc: error: cannot read the TLS key or certificate {missing}: No such file or directory" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["analyze", FIXTURES / "seed47_default.ncu-rep", "--launch-count", "-1"], "launch_count = -1 is out of range"),
        (["profile", FIXTURES / "seed47.py", "--launch-count", str(2**40)], f"launch_count = {2**40} is out of range"),
        (["check", FIXTURES / "seed47.py", "--trials", "-1"], "trials = -1 is out of range"),
        (["time", FIXTURES / "seed47.py", "--trials", str(2**33)], f"trials = {2**33} is out of range"),
    ],
    ids=["negative launch count", "launch count past 32 bits", "negative trials", "trials past 32 bits"],
)
def test_a_count_the_wire_cannot_carry_is_one_line(args, message):
    done = run_cli(*args)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"profsvc: error: {message}") and "Traceback" not in done.stderr


def test_a_missing_file_is_one_line_with_a_reason(tmp_path):
    done = run_cli("profile", tmp_path / "missing.py")
    assert done.returncode == 2
    assert done.stderr == f"profsvc: error: {tmp_path / 'missing.py'}: No such file or directory [BAD_ARGUMENT]\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["capabilities", "--server", "127.0.0.1:99999"], "port 99999 is over 65535"),
        (["serve", "--port", "70000"], "70000 is not a port number"),
        (["mcp", "--transport", "http", "--port", "-1"], "-1 is not a port number"),
    ],
    ids=["client", "serve", "mcp"],
)
def test_a_port_past_65535_is_refused(args, message):
    done = run_cli(*args)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def test_lint_of_a_cuda_program_says_it_reads_python():
    done = run_cli("lint", EXAMPLES / "saxpy.cu")
    assert done.returncode == 2
    assert "saxpy.cu is a CUDA program: lint does not take one" in done.stderr and "[BAD_SOURCE_KIND]" in done.stderr


def test_ctrl_c_is_one_line_and_exit_130():
    with socket.socket() as silent:  # accepts connections, never answers: the client waits
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        target = f"127.0.0.1:{silent.getsockname()[1]}"
        argv = [sys.executable, "-m", "profsvc_client.cli", "capabilities", "--server", target]
        process = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
        silent.settimeout(120)
        connection, _ = silent.accept()  # the client is in its call: past start-up, waiting for the answer
        with connection:
            process.send_signal(signal.SIGINT)
            _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130
    assert stderr == "profsvc: interrupted\n"


@no_gpu_only
def test_profile_without_gpu_is_failed_precondition(client):
    with pytest.raises(errors.PreconditionFailed) as caught:
        client.profile(load_source(FIXTURES / "seed47.py"))
    assert caught.value.reason in (errors.Reason.NO_GPU, errors.Reason.NO_NCU)
    assert "GPU" in caught.value.message or "ncu" in caught.value.message


def test_bad_input_is_invalid_argument_with_reason(client):
    with pytest.raises(errors.InvalidRequest) as caught:
        client.compile(KernelSource(main=SourceFile(name="k.py", content=b"\xff\xfe")))
    assert caught.value.reason == errors.Reason.SOURCE_NOT_UTF8


def test_unknown_artifact_is_not_found(client):
    with pytest.raises(errors.NotFound):
        client.download_artifact("0" * 32 + ".report.ncu-rep", "/tmp")
    with pytest.raises(errors.NotFound):
        client.download_artifact("../../etc/passwd", "/tmp")


@needs_nvcc
def test_compile_cuda_program_then_cached(client):
    first = client.compile(load_source(EXAMPLES / "saxpy.cu"))
    assert first.ok, first.log
    second = client.compile(load_source(EXAMPLES / "saxpy.cu"))
    assert second.ok and second.units[0].cached
    assert second.units[0].cache_key == first.units[0].cache_key


@needs_nvcc
def test_compile_error_is_a_located_result(client):
    source = b"#include <cstdio>\nint main() {\n  int x = ;\n  return 0;\n}\n"
    result = client.compile(KernelSource(main=SourceFile(name="broken.cu", content=source)))
    assert not result.ok
    error = next(d for d in result.diagnostics if d.severity == Severity.ERROR)
    assert (error.file, error.line) == ("broken.cu", 3)
    assert "expected an expression" in error.message
    assert "broken.cu(3)" in result.log


def test_health_and_reflection(server):
    with grpc.insecure_channel(server) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        responses = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
        services = {s.name for r in responses for s in r.list_services_response.service}
    assert {"profsvc.v1.Profiler", "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"} <= services


def test_cli_analyze_against_profsvc_serve(served, tmp_path):
    text = run_cli("analyze", FIXTURES / "seed47_full.ncu-rep", "--server", served)
    assert text.returncode == 0, text.stderr
    assert "vga_linear_kernel" in text.stdout and "long_scoreboard" in text.stdout
    as_json = run_cli(
        "analyze", FIXTURES / "big_full.ncu-rep", "--server", served, "--format", "json", "--out", tmp_path
    )
    assert as_json.returncode == 0, as_json.stderr
    result = json.loads(as_json.stdout)
    duration = result["kernels"][0]["figures"]["duration"]
    assert duration == {"value": 539968.0, "unit": "ns"}
    assert json.loads((tmp_path / "result.json").read_text()) == result
    # --out asks for the HTML report too, and saves it with the rest.
    assert (tmp_path / "report.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


@no_gpu_only
def test_cli_profile_without_gpu_is_one_line_and_exit_3(served):
    done = run_cli("profile", FIXTURES / "seed47.py", "--server", served)
    assert done.returncode == 3
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "NO_GPU" in lines[0] and "Traceback" not in done.stderr


def test_cli_bad_input_and_no_server(served, tmp_path):
    empty = tmp_path / "empty.py"
    empty.write_text("")
    done = run_cli("compile", empty, "--server", served)
    assert done.returncode == 2 and "EMPTY_SOURCE" in done.stderr
    nobody = run_cli("analyze", FIXTURES / "seed47_full.ncu-rep", "--server", "127.0.0.1:1")
    assert nobody.returncode == 4 and len(nobody.stderr.strip().splitlines()) == 1


def test_static_check_over_grpc_and_cli(client, served, tmp_path):
    honest = client.static_check(load_source(FIXTURES / "seed47.py"))
    assert honest.ok and not [f for f in honest.findings if f.severity == "error"]
    cheat = tmp_path / "cheat.py"
    cheat.write_text(
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.matmul(x, x)\n"
    )
    found = client.static_check(load_source(cheat))
    assert not found.ok and any(f.rule_id == "torch_fallback" and f.line == 4 for f in found.findings)
    lint = run_cli("lint", cheat, "--server", served)
    assert lint.returncode == 1 and "cheat.py:4:" in lint.stdout and "torch_fallback" in lint.stdout


CORPUS = FIXTURES.parent / "staticcheck_corpus"
PARTIAL = CORPUS / "honest" / "partial_replacement_maxpool.py"


def test_static_check_policy_over_grpc(client):
    partial = load_source(PARTIAL)
    default = client.static_check(partial)
    assert default.ok and default.policy == StaticPolicy(name="default")
    assert {f.severity for f in default.findings} == {"warning"}
    strict_policy = StaticPolicy(name="strict", overrides=[RuleSeverity(rule_id="torch_fallback", severity="error")])
    strict = client.static_check(partial, policy=strict_policy)
    assert not strict.ok and strict.policy == strict_policy
    assert {f.severity for f in strict.findings} == {"error"}
    unknown = StaticPolicy(overrides=[RuleSeverity(rule_id="torch_fallbak", severity="error")])
    for call in (
        lambda: client.static_check(partial, policy=unknown),
        lambda: client.evaluate(partial, policy=unknown),
    ):
        # Evaluate refuses it before any job runs: no GPU needed to see the answer.
        with pytest.raises(errors.InvalidRequest) as caught:
            call()
        assert caught.value.reason == errors.Reason.BAD_POLICY
        assert "'torch_fallbak'" in caught.value.message


def test_static_check_policy_on_the_command_line(served, tmp_path):
    default = run_cli("lint", PARTIAL, "--server", served)
    assert default.returncode == 0 and default.stdout.endswith("static check: 2 warning(s)\n")
    strict = run_cli("lint", PARTIAL, "--policy", EXAMPLES / "strict_policy.toml", "--server", served)
    assert strict.returncode == 1
    assert "static check: 2 error(s) (policy strict (torch_fallback=error," in strict.stdout
    # Flags apply after the file: the last word on a rule wins.
    relaxed = run_cli(
        "lint", PARTIAL, "--policy", EXAMPLES / "strict_policy.toml", "--warn", "torch_fallback", "--server", served
    )
    assert relaxed.returncode == 0 and "torch_fallback=warning" in relaxed.stdout
    no_kernel = CORPUS / "gaming" / "no_custom_kernel__scalar_multiply.py"
    assert run_cli("lint", no_kernel, "--server", served).returncode == 1
    assert run_cli("lint", no_kernel, "--off", "no_custom_kernel", "--server", served).returncode == 0
    bad_file = tmp_path / "bad.toml"
    bad_file.write_text("[rules]\ntorch_fallback = 1\n")
    for command in (
        ("lint", PARTIAL, "--error", "torch_fallbak"),
        ("evaluate", PARTIAL, "--off", "torch_fallbak"),
        ("lint", PARTIAL, "--policy", bad_file),
    ):
        done = run_cli(*command, "--server", served)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and "BAD_POLICY" in lines[0], done.stderr


@no_gpu_only
def test_correctness_and_timing_need_a_gpu(client):
    with pytest.raises(errors.PreconditionFailed):
        client.check_correctness(load_source(FIXTURES / "seed47.py"))
    with pytest.raises(errors.PreconditionFailed):
        client.benchmark(load_source(FIXTURES / "seed47.py"))


def test_correctness_of_a_cuda_program_is_invalid(client):
    with pytest.raises(errors.InvalidRequest, match="CUDA program"):
        client.check_correctness(load_source(EXAMPLES / "saxpy.cu"))


def test_analyze_carries_hints_and_a_roofline_chart(client, tmp_path):
    result = client.analyze(FIXTURES / "big_full.ncu-rep")
    kernel = result.kernels[0]
    assert kernel.hints[0].rule_id == "dram_near_peak"
    assert kernel.roofline.bound == "dram"
    assert result.aggregate.launches == 1 and result.aggregate.kernels[0].share_pct == 100.0
    charts = {a.name: a for a in result.artifacts}
    assert set(charts) == {"roofline.png", "roofline.svg"}  # the HTML report only when asked for
    png = client.download_artifact(charts["roofline.png"].id, tmp_path)
    assert png.read_bytes().startswith(b"\x89PNG")
    svg = client.download_artifact(charts["roofline.svg"].id, tmp_path).read_text()
    assert "relu2_k" in svg
    assert "Optimization hints" in result.report_text


def test_analyze_without_charts_draws_none_and_reads_the_same_figures(client, served, tmp_path):
    charted = client.analyze(FIXTURES / "big_full.ncu-rep")
    assert {a.name for a in charted.artifacts} == {"roofline.png", "roofline.svg"}
    plain = client.analyze(FIXTURES / "big_full.ncu-rep", skip_charts=True)
    assert plain.artifacts == []
    assert plain.kernels == charted.kernels and plain.aggregate == charted.aggregate
    # The CLI draws them where it saves them (--out), and only there.
    shown = run_cli("analyze", FIXTURES / "big_full.ncu-rep", "--server", served, "--format", "json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["artifacts"] == []
    saved = run_cli("analyze", FIXTURES / "big_full.ncu-rep", "--server", served, "--out", tmp_path)
    assert saved.returncode == 0 and (tmp_path / "roofline.png").read_bytes().startswith(b"\x89PNG")


def test_session_delta_judged_by_better_direction(client, served):
    session = "iteration-test"
    first = client.analyze(FIXTURES / "seed47_full.ncu-rep", session_id=session)
    assert first.session_id == session and not first.delta
    # The same kernel name in both reports: a real before/after of one kernel is needed for per-kernel rows,
    # so compare the seed report with itself first (nothing changed), then with the relu stream.
    same = client.analyze(FIXTURES / "seed47_full.ncu-rep", session_id=session)
    assert same.delta and all(row.verdict in ("unchanged", "") for row in same.delta)
    other = client.analyze(FIXTURES / "big_full.ncu-rep", session_id=session)
    total = next(row for row in other.delta if row.kernel == "" and row.figure == "duration")
    assert total.before == 2784.0 and total.after == 539968.0
    assert total.verdict == "regressed"  # longer device time is worse, whatever the sign
    assert "Delta vs previous iteration" in other.report_text
    cli = run_cli("analyze", FIXTURES / "seed47_full.ncu-rep", "--server", served, "--session", "cli-session")
    assert cli.returncode == 0


def test_asyncio_client_same_verbs(server, tmp_path):
    import asyncio

    from profsvc_client.aio import AsyncProfilerClient

    async def run() -> None:
        async with AsyncProfilerClient(server, timeout=120) as client:
            assert (await client.capabilities()).server_version
            result = await client.analyze(FIXTURES / "seed47_full.ncu-rep")
            assert result.kernels[0].name == "vga_linear_kernel"
            assert (await client.static_check(load_source(FIXTURES / "seed47.py"))).ok
            chart = next(a for a in result.artifacts if a.name == "roofline.png")
            assert (await client.download_artifact(chart.id, tmp_path)).read_bytes().startswith(b"\x89PNG")
            assert (await client.analyze(FIXTURES / "seed47_full.ncu-rep", skip_charts=True)).artifacts == []
            with pytest.raises(errors.InvalidRequest):
                await client.analyze(b"garbage")
            if not HAS_GPU:
                with pytest.raises(errors.PreconditionFailed):
                    await client.profile(load_source(FIXTURES / "seed47.py"))

    asyncio.run(run())


def test_markdown_report_for_a_pull_request(served):
    done = run_cli("analyze", FIXTURES / "seed47_lineinfo.ncu-rep", "--server", served, "--format", "md")
    assert done.returncode == 0, done.stderr
    assert "| kernel | Duration |" in done.stdout and "| `vga_linear_kernel` |" in done.stdout
    assert "**Hints**" in done.stdout and "| long_scoreboard |" in done.stdout
    assert "```cuda" in done.stdout and "fmaf" in done.stdout


def test_example_agent_loop_runs_until_the_gpu_step(served):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "agent_loop.py"), str(FIXTURES / "seed47.py"), "--server", served],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "static check: clean" in done.stdout
    if not HAS_GPU:
        # Compile imports the problem (no GPU needed); correctness needs the GPU this machine lacks.
        assert done.returncode == 2 and "NO_GPU" in done.stderr


@pytest.mark.parametrize("report", ["seed47_full.ncu-rep", "big_full.ncu-rep"])
def test_a_reader_that_closed_the_pipe_is_a_quiet_exit_141(served, report):
    # `profsvc analyze r.ncu-rep | head -2`: the reader goes away; no error line, the shell's exit code for it.
    read_end, write_end = os.pipe()
    os.close(read_end)
    argv = [sys.executable, "-m", "profsvc_client.cli", "analyze", str(FIXTURES / report), "--server", served]
    try:
        done = subprocess.run(argv, stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert done.stderr == ""
    assert done.returncode == 141


def test_capabilities_in_each_format(served, client):
    known = client.capabilities()
    as_json = json.loads(run_cli("capabilities", "--server", served, "--format", "json").stdout)
    assert as_json["schema_version"] == 1 and as_json["server_version"] == known.server_version
    text = run_cli("capabilities", "--server", served).stdout
    markdown = run_cli("capabilities", "--server", served, "--format", "md").stdout
    assert not text.lstrip().startswith("{") and not markdown.lstrip().startswith("{")
    assert f"server:      {known.server_version}\n" in text and f"| server | {known.server_version} |" in markdown
    for metric_set in known.metric_sets:
        assert metric_set.name in text and f"- `{metric_set.name}`: {metric_set.description}" in markdown


def test_any_ncu_metric_named_is_reported_as_ncus_raw_page_shows_it(served):
    import csv

    # ncu's own raw page of the report (--print-units base): names, units, the one launch's values.
    names, units, values = list(csv.reader((FIXTURES / "seed47_full_raw.csv").open()))[:3]
    asked = [
        "dram__bytes_read.sum",
        "launch__registers_per_thread",
        "smsp__inst_executed.sum",
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
        "sm__warps_active.avg.pct_of_peak_sustained_active",
    ]
    args = [a for name in [*asked, "sm__no_such_metric.sum"] for a in ("--metric", name)]
    done = run_cli("analyze", FIXTURES / "seed47_full.ncu-rep", "--server", served, "--format", "json", *args)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    metrics = result["kernels"][0]["metrics"]
    for name in asked:
        column = names.index(name)
        assert metrics[name]["unit"] == units[column], name
        assert metrics[name]["value"] == pytest.approx(float(values[column].replace(",", "")), rel=5e-3), name
    assert metrics["sm__no_such_metric.sum"] == {"value": None, "unit": ""}
    assert any("not in the report: sm__no_such_metric.sum" in w for w in result["warnings"])
    text = run_cli("analyze", FIXTURES / "seed47_full.ncu-rep", "--server", served, "--metric", asked[0])
    assert "--- ncu metrics requested ---\ndram__bytes_read.sum: 38.4 kB" in text.stdout
    refused = run_cli("analyze", FIXTURES / "seed47_full.ncu-rep", "--server", served, "--metric", "dram bytes")
    assert refused.returncode == 2 and "is not an ncu metric name" in refused.stderr
    assert "[BAD_ARGUMENT]" in refused.stderr


def test_every_result_says_where_its_seconds_went_to_its_total(client):
    # README: "Every result's `timings` says where its seconds went: `total`; ...": the parts lie within it.
    analyzed = client.analyze(FIXTURES / "seed47_full.ncu-rep")
    compiled = client.compile(load_source(FIXTURES / "seed47.py"))
    for timings in (analyzed.timings, compiled.timings):
        assert "total" in timings, timings
        assert all(0 <= seconds <= timings["total"] for seconds in timings.values()), timings


@pytest.mark.skipif(bool(__import__("torch").version.cuda), reason="about a server whose torch has no CUDA")
def test_a_build_only_torch_can_make_is_a_warning_on_a_server_whose_torch_has_no_cuda():
    # README: "where the server's torch has no CUDA, compile gives a warning that names the CUDA builds it did
    # not make": the example's templated launch declines the split route, and torch's own build needs CUDA.
    done = run_cli("compile", EXAMPLES / "scale_gain.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning: the module needs CUDA at import, which this compile step lacks" in done.stdout + done.stderr
    assert "scale_gain_precision" in done.stdout + done.stderr


def test_a_session_without_a_server_is_refused_in_one_line():
    # An embedded run keeps no result once it exits: a delta could never come, so it is said at once.
    done = run_cli("analyze", FIXTURES / "seed47_full.ncu-rep", "--session", "e1")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "profsvc: error: --session compares with the last result a server kept: give --server HOST:PORT (a run "
        "without one keeps nothing once it exits) [BAD_ARGUMENT]"
    ]
