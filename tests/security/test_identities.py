"""Identities: each token of the server's token file is a caller of its own, and a session belongs to the caller
that named it, so one client's session id never shows another client's kernels."""

from __future__ import annotations

import pytest

from profsvc_client.client import ProfilerClient
from profsvc_contract import errors
from profsvc_contract.models import ProfileResult
from tests.conftest import FIXTURES, run_cli
from tests.security.servers import served

SEED, BIG = FIXTURES / "seed47_full.ncu-rep", FIXTURES / "big_full.ncu-rep"
TOKEN_FILE = """# the team's tokens: one a line, optionally name:token
alice:alice-token-1f2e
bob:bob-token-9c8d

unnamed-token-7a6b
"""


def _total_row(result: ProfileResult) -> float | None:
    """The delta's total GPU time row (kernel ''): its 'before' is the previous result's summed durations."""
    (row,) = [r for r in result.delta if r.kernel == "" and r.figure == "duration"]
    return row.before


def _total(result: ProfileResult) -> float:
    return sum(k.value("duration") for k in result.kernels)


def test_a_session_id_used_by_another_token_is_another_session(tmp_path):
    token_file = tmp_path / "tokens"
    token_file.write_text(TOKEN_FILE)
    with served(tmp_path, token_file=token_file, token="alice-token-1f2e") as server:
        with (
            ProfilerClient(server.target, token="alice-token-1f2e", timeout=300) as alice,
            ProfilerClient(server.target, token="bob-token-9c8d", timeout=300) as bob,
            ProfilerClient(server.target, token="unnamed-token-7a6b", timeout=300) as unnamed,
        ):
            alice_first = alice.analyze(SEED, session_id="shared")
            bob_first = bob.analyze(BIG, session_id="shared")
            alice_second = alice.analyze(BIG, session_id="shared")
            bob_second = bob.analyze(SEED, session_id="shared")
            assert unnamed.capabilities().server_version
    # Before, bob's first result carried a delta against alice's kernel.
    assert alice_first.delta == [] and bob_first.delta == []
    assert bob_first.session_id == "shared"
    assert _total_row(alice_second) == pytest.approx(_total(alice_first))
    assert _total_row(bob_second) == pytest.approx(_total(bob_first))
    assert _total(alice_first) != pytest.approx(_total(bob_first))


def test_without_tokens_every_caller_is_the_one_anonymous_identity(tmp_path):
    with served(tmp_path) as server:
        with ProfilerClient(server.target, timeout=300) as first:
            before = first.analyze(SEED, session_id="s")
        with ProfilerClient(server.target, timeout=300) as second:
            after = second.analyze(BIG, session_id="s")
    assert _total_row(after) == pytest.approx(_total(before))


def test_a_wrong_token_is_refused_even_with_several_accepted(tmp_path):
    token_file = tmp_path / "tokens"
    token_file.write_text(TOKEN_FILE)
    with served(tmp_path, token_file=token_file, token="bob-token-9c8d") as server:
        for token in ("alice", "alice-token-1f2", "alice:alice-token-1f2e", "alice-token-1f2e0"):
            with ProfilerClient(server.target, token=token, timeout=60) as client:
                with pytest.raises(errors.Unauthenticated):
                    client.capabilities()
        with ProfilerClient(server.target, token="bob-token-9c8d", timeout=60) as client:
            assert client.capabilities().server_version


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("alice:one\nalice:two\n", "line 2: the name 'alice' is there twice"),
        ("alice:same\nbob:same\n", "line 2: the same token is on an earlier line"),
        ("a b:token\n", "line 1: the name 'a b' is not allowed"),
        ("alice:\n", "line 1, is empty or holds characters other than printable ASCII"),
        ("# only a comment\n", "holds no token (one a line, optionally name:token)"),
    ],
    ids=["name twice", "token twice", "bad name", "empty token", "no token"],
)
def test_a_token_file_the_server_cannot_use_is_refused_in_one_line(tmp_path, content, message):
    token_file = tmp_path / "tokens"
    token_file.write_text(content)
    done = run_cli("serve", "--port", "0", "--state-dir", tmp_path, "--token-file", token_file)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith("profsvc: error: the token") and message in done.stderr


def test_each_callers_reports_are_read_by_readers_of_its_own(tmp_path):
    token_file = tmp_path / "tokens"
    token_file.write_text(TOKEN_FILE)
    with served(tmp_path, token_file=token_file, token="alice-token-1f2e", warm=True) as server:
        with (
            ProfilerClient(server.target, token="alice-token-1f2e", timeout=300) as alice,
            ProfilerClient(server.target, token="bob-token-9c8d", timeout=300) as bob,
        ):
            results = [alice.analyze(SEED), bob.analyze(BIG)]
            for _ in range(3):
                results += [alice.analyze(SEED), bob.analyze(BIG)]
        log = server.log_text()
    assert all(r.ok for r in results)
    assert {k.name for r in results[0::2] for k in r.kernels} == {"vga_linear_kernel"}  # seed47.py's kernel
    # One reader each (their first reports ran on warm workers while it started), none shared.
    assert log.count("a report reader for alice started") == 1
    assert log.count("a report reader for bob started") == 1
