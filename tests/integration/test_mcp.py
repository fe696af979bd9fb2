"""The MCP server for agent harnesses, driven by the MCP SDK's own client over stdio and streamable HTTP.

Each test spawns `profsvc mcp --server <served>` (stdio) or talks to one `profsvc mcp --transport
http` process, both in front of a real `profsvc serve` on loopback.
"""

from __future__ import annotations

import base64
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import pytest

from profsvc_client import cli
from profsvc_client.client import ProfilerClient
from profsvc_contract.models import SourceFile
from tests.conftest import FIXTURES, HAS_GPU, free_port, needs_nvcc

pytest.importorskip("mcp", reason="the MCP server needs the MCP SDK (pip install './client[mcp]')")

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from profsvc_client.mcp_server import ProfsvcTools

EXAMPLES = FIXTURES.parent.parent / "examples"
GAMING = FIXTURES.parent / "staticcheck_corpus" / "gaming" / "torch_fallback__matmul_operator.py"
PARTIAL = FIXTURES.parent / "staticcheck_corpus" / "honest" / "partial_replacement_maxpool.py"
STRICT = EXAMPLES / "strict_policy.toml"
TOOLS = {"compile_kernel", "run_correctness", "profile_kernel", "static_check", "submit_kernel", "analyze_report"}
BROKEN_CU = "#include <cstdio>\nint main() {\n  int x = ;\n  return 0;\n}\n"
no_gpu_only = pytest.mark.skipif(HAS_GPU, reason="checks the answer of a server without a GPU")

OpenSession = Callable[[], AbstractAsyncContextManager[ClientSession]]


@asynccontextmanager
async def _session(streams: AbstractAsyncContextManager[Any]) -> AsyncIterator[ClientSession]:
    async with streams as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@pytest.fixture(scope="module")
def mcp_http(served: str) -> Iterator[str]:
    """`profsvc mcp --transport http` in front of `served`; yields the endpoint URL."""
    port = free_port()
    command = ["mcp", "--transport", "http", "--port", str(port), "--server", served]
    process = subprocess.Popen(
        [sys.executable, "-m", "profsvc_client.cli", *command],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert process.poll() is None, "profsvc mcp --transport http exited"
            assert time.monotonic() < deadline, "profsvc mcp --transport http did not start listening"
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(params=["stdio", "http"])
def open_session(request: pytest.FixtureRequest, served: str) -> OpenSession:
    """A way to open a client session over the parametrized transport."""
    if request.param == "stdio":
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "profsvc_client.cli", "mcp", "--server", served],
        )
        return lambda: _session(stdio_client(params, errlog=sys.stderr))
    url = request.getfixturevalue("mcp_http")
    return lambda: _session(streamable_http_client(url))


def _run(open_session: OpenSession, body: Callable[[ClientSession], Awaitable[None]]) -> None:
    async def main() -> None:
        async with open_session() as session:
            await body(session)

    anyio.run(main)


def _text(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def test_lists_the_six_tools_and_static_checks(open_session):
    async def body(session: ClientSession) -> None:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) == TOOLS
        for name in TOOLS - {"analyze_report"}:
            schema = tools[name].input_schema
            assert schema["required"] == ["kernel_code"]
            assert {"kernel_code", "reference_code", "file_name"} <= set(schema["properties"])
            assert all(p.get("description") for p in schema["properties"].values()), name
            assert tools[name].output_schema and tools[name].description
        assert tools["run_correctness"].input_schema["properties"]["trials"]["type"] == "integer"
        assert {"report_path", "report_base64"} <= set(tools["analyze_report"].input_schema["properties"])

        honest = await session.call_tool("static_check", {"kernel_code": (FIXTURES / "seed47.py").read_text()})
        assert not honest.is_error
        assert _text(honest).startswith("static_check PASSED")
        assert honest.structured_content["ok"] is True

        cheat = await session.call_tool("static_check", {"kernel_code": GAMING.read_text(), "file_name": GAMING.name})
        assert not cheat.is_error and cheat.structured_content["ok"] is False
        text = _text(cheat)
        # Its extension launches nothing (an error); the @ left to PyTorch is a warning under the default policy.
        assert text.startswith("static_check FAILED: 1 error(s), 1 warning(s)")
        assert f"{GAMING.name}:26:5: error: [no_custom_kernel]" in text
        assert f"{GAMING.name}:28:16: warning: [torch_fallback]" in text
        assert [f["rule_id"] for f in cheat.structured_content["findings"]] == ["no_custom_kernel", "torch_fallback"]

    _run(open_session, body)


def test_static_check_takes_a_policy(open_session):
    async def body(session: ClientSession) -> None:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        for name in ("static_check", "submit_kernel"):
            described = tools[name].input_schema["properties"]["policy"]
            assert "torch_fallback" in described["description"], name
        code = PARTIAL.read_text()
        default = await session.call_tool("static_check", {"kernel_code": code})
        # Its own max-pool kernel, PyTorch's convolution and linear: a partial replacement passes, with warnings.
        assert _text(default).startswith("static_check PASSED: 0 error(s), 2 warning(s).")
        assert default.structured_content["policy"] == {"name": "default", "overrides": []}
        strict = await session.call_tool("static_check", {"kernel_code": code, "policy": {"torch_fallback": "error"}})
        assert _text(strict).startswith(
            "static_check FAILED: 2 error(s), 0 warning(s). Policy: default (torch_fallback=error)."
        )
        assert strict.structured_content["policy"]["overrides"] == [{"rule_id": "torch_fallback", "severity": "error"}]
        unknown = await session.call_tool("static_check", {"kernel_code": code, "policy": {"torch_fallbak": "error"}})
        assert unknown.is_error
        assert _text(unknown).startswith("static_check ERROR [BAD_POLICY]: unknown static rule 'torch_fallbak'")

    _run(open_session, body)


def test_the_configured_policy_applies_to_calls_that_set_none(served):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "profsvc_client.cli", "mcp", "--server", served, "--policy", str(STRICT)],
    )

    async def body(session: ClientSession) -> None:
        code = PARTIAL.read_text()
        configured = await session.call_tool("static_check", {"kernel_code": code})
        assert configured.structured_content["policy"]["name"] == "strict"
        assert not configured.structured_content["ok"]
        # A call's severities go on top of the configured policy.
        relaxed = await session.call_tool(
            "static_check", {"kernel_code": code, "policy": {"torch_fallback": "warning"}}
        )
        assert relaxed.structured_content["ok"] and relaxed.structured_content["policy"]["name"] == "strict"

    _run(lambda: _session(stdio_client(params, errlog=sys.stderr)), body)


def test_analyze_report_by_path_and_bytes(open_session):
    report = FIXTURES / "seed47_full.ncu-rep"

    async def body(session: ClientSession) -> None:
        by_path = await session.call_tool("analyze_report", {"report_path": str(report)})
        assert not by_path.is_error
        text = _text(by_path)
        assert text.startswith("analyze_report PASSED")
        assert "vga_linear_kernel" in text and "long_scoreboard" in text
        kernel = by_path.structured_content["kernels"][0]
        assert kernel["name"] == "vga_linear_kernel" and kernel["figures"]["duration"]["unit"] == "ns"
        assert by_path.structured_content.get("artifacts", []) == []  # no tool downloads a chart: none drawn

        by_bytes = await session.call_tool(
            "analyze_report", {"report_base64": base64.b64encode(report.read_bytes()).decode()}
        )
        assert by_bytes.structured_content["kernels"] == by_path.structured_content["kernels"]
        # As `base64` (the command) writes it: lines of 76 characters.
        wrapped = await session.call_tool(
            "analyze_report", {"report_base64": base64.encodebytes(report.read_bytes()).decode()}
        )
        assert wrapped.structured_content["kernels"] == by_path.structured_content["kernels"]
        folder = await session.call_tool("analyze_report", {"report_path": str(FIXTURES)})
        assert folder.is_error and f"report {FIXTURES} is a folder" in _text(folder)

        neither = await session.call_tool("analyze_report", {})
        assert neither.is_error and "[BAD_ARGUMENT]" in _text(neither)
        garbage = await session.call_tool("analyze_report", {"report_base64": base64.b64encode(b"junk").decode()})
        assert garbage.is_error and "[BAD_REPORT]" in _text(garbage)
        assert garbage.structured_content["reason"] == "BAD_REPORT" and garbage.structured_content["request_id"]
        assert "Traceback" not in _text(garbage)

    _run(open_session, body)


@needs_nvcc
def test_compile_kernel_cuda_program(open_session):
    async def body(session: ClientSession) -> None:
        # No file_name: a program with int main() and no Python import is read as a .cu program.
        passed = await session.call_tool("compile_kernel", {"kernel_code": (EXAMPLES / "saxpy.cu").read_text()})
        assert not passed.is_error, _text(passed)
        assert _text(passed).startswith("compile_kernel PASSED")
        assert passed.structured_content["ok"] is True

        failed = await session.call_tool("compile_kernel", {"kernel_code": BROKEN_CU, "file_name": "broken.cu"})
        assert not failed.is_error  # a compile error is a result, not a tool error
        text = _text(failed)
        assert text.startswith("compile_kernel FAILED")
        assert "broken.cu:3:" in text and "expected an expression" in text
        assert failed.structured_content["diagnostics"][0]["line"] == 3

    _run(open_session, body)


@no_gpu_only
def test_gpu_tools_answer_no_gpu(open_session):
    problem = (FIXTURES / "seed47.py").read_text()

    async def body(session: ClientSession) -> None:
        for tool in ("run_correctness", "profile_kernel", "submit_kernel"):
            result = await session.call_tool(tool, {"kernel_code": problem})
            text = _text(result)
            assert result.is_error, text
            assert text.startswith(f"{tool} ERROR [NO_") and "NO_GPU" in text, text
            assert len(text.splitlines()) == 1 and "Traceback" not in text
            assert result.structured_content["reason"] == "NO_GPU"

    _run(open_session, body)


def test_mcp_without_the_sdk_is_one_line(monkeypatch, capsys):
    # As if the SDK were not installed: a None entry makes its import raise ModuleNotFoundError.
    for name in [n for n in sys.modules if n.partition(".")[0] in ("mcp", "mcp_types")] + ["mcp"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "profsvc_client.mcp_server", raising=False)
    assert cli.main(["mcp", "--server", "127.0.0.1:1"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install './client[mcp]'" in err[0]


def test_http_on_a_public_address_needs_insecure(capsys):
    assert cli.main(["mcp", "--transport", "http", "--host", "0.0.0.0", "--server", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--insecure" in err[0]


def test_the_configured_reference_fills_in_for_python_candidates():
    reference = SourceFile(name="problem47.py", content=b"class Model: ...")
    with ProfilerClient("127.0.0.1:1") as client:
        tools = ProfsvcTools(client, reference)
        candidate = tools.source("import torch\nclass ModelNew: ...", None, None)
        assert candidate.main.name == "candidate.py" and candidate.reference == reference
        own = tools.source("class ModelNew: ...", "class Model: ...", "mine.py")
        assert (own.main.name, own.reference.name, own.reference.content) == (
            "mine.py",
            "reference.py",
            b"class Model: ...",
        )
        program = tools.source((EXAMPLES / "saxpy.cu").read_text(), None, None)
        assert program.main.name == "program.cu" and not program.reference.content


def test_http_on_a_port_in_use_is_one_line_before_anything_starts():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = [sys.executable, "-m", "profsvc_client.cli", "mcp", "--transport", "http", "--port", str(port)]
        done = subprocess.run([*argv, "--server", "127.0.0.1:1"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == f"profsvc: error: cannot listen on 127.0.0.1:{port}: Address already in use [BAD_ARGUMENT]\n"
