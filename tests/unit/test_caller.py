"""Every call names its caller for the work it runs, streamed calls (Profile, Evaluate) as well as unary ones, so
the reports a caller's profiles produce are read by that caller's own readers (profsvc.scheduler.readers)."""

from __future__ import annotations

import asyncio

from pydantic import SecretStr

from profsvc.scheduler.readers import CALLER
from profsvc.server.auth import Authenticator
from profsvc.server.servicer import ProfilerServicer
from profsvc_contract.models import ProfileResult, Progress


class _Context:
    """What the servicer reads of a gRPC call: its metadata."""

    def __init__(self, token: str) -> None:
        self.token = token

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),)


def _servicer() -> ProfilerServicer:
    servicer = ProfilerServicer.__new__(ProfilerServicer)
    servicer.authenticator = Authenticator({"alice": SecretStr("alice-token"), "bob": SecretStr("bob-token")})
    return servicer


def test_a_streamed_call_runs_as_its_caller():
    async def scenario(token: str) -> str | None:
        seen: list[str | None] = []

        async def run(_progress: object) -> ProfileResult:
            seen.append(CALLER.get())
            return ProfileResult()

        stream = _servicer()._stream(_Context(token), "Profile", run, lambda p: p, lambda r: r)
        assert [m async for m in stream if not isinstance(m, Progress)] == [ProfileResult()]
        return seen[0]

    assert asyncio.run(scenario("alice-token")) == "alice"
    assert asyncio.run(scenario("bob-token")) == "bob"


def test_a_unary_call_runs_as_its_caller():
    async def scenario() -> str | None:
        async def call() -> str | None:
            return CALLER.get()

        return await _servicer()._guard(_Context("bob-token"), "Analyze", call)

    assert asyncio.run(scenario()) == "bob"
