"""The five agent tools of the seed trace, called by the MCP SDK's own client on the seed problem (GPU host).

`profsvc mcp --server <served>` over stdio, in front of a real `profsvc serve` with a GPU and ncu.
"""

from __future__ import annotations

import os
import sys

import pytest

from tests.conftest import FIXTURES

pytest.importorskip("mcp", reason="the MCP server needs the MCP SDK (pip install './client[mcp]')")

from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.integration.test_mcp import _run, _session, _text

pytestmark = pytest.mark.gpu


def test_the_five_tools_on_the_seed(served: str) -> None:
    problem = (FIXTURES / "seed47.py").read_text()
    # The SDK starts the server with a minimal environment: pass ours (a GPU host runs from PYTHONPATH).
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "profsvc_client.cli", "mcp", "--server", served], env=dict(os.environ)
    )

    async def body(session: ClientSession) -> None:
        compiled = await session.call_tool("compile_kernel", {"kernel_code": problem, "file_name": "seed47.py"})
        assert not compiled.is_error and compiled.structured_content["ok"] is True, _text(compiled)

        checked = await session.call_tool("static_check", {"kernel_code": problem, "file_name": "seed47.py"})
        assert not checked.is_error and checked.structured_content["ok"] is True, _text(checked)

        correct = await session.call_tool("run_correctness", {"kernel_code": problem, "file_name": "seed47.py"})
        assert not correct.is_error, _text(correct)
        assert correct.structured_content["ok"] is True, _text(correct)

        profiled = await session.call_tool("profile_kernel", {"kernel_code": problem, "file_name": "seed47.py"})
        assert not profiled.is_error, _text(profiled)
        text = _text(profiled)
        assert text.startswith("profile_kernel PASSED"), text
        kernel = profiled.structured_content["kernels"][0]
        assert kernel["name"] == "vga_linear_kernel"
        assert kernel["figures"]["duration"]["unit"] == "ns" and kernel["figures"]["duration"]["value"] > 0
        assert kernel["hints"], "the seed's profile carries hints"
        # The report, and no chart: no tool downloads one.
        assert [a["name"] for a in profiled.structured_content["artifacts"]] == ["report.ncu-rep"]

        submitted = await session.call_tool("submit_kernel", {"kernel_code": problem, "file_name": "seed47.py"})
        assert not submitted.is_error, _text(submitted)
        assert submitted.structured_content["correctness"]["ok"] is True, _text(submitted)

    _run(lambda: _session(stdio_client(params, errlog=sys.stderr)), body)
