"""Warm workers with real processes: StartedProcess, the FIFO protocol, the lifeline and the StandbyPool.

The pool is driven with `profsvc.worker.analyze_report` (the cheapest real worker kind) and with a tiny
echo module written into tmp_path that goes through the same `wait_for_job`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

import profsvc.scheduler.warm_pool as scheduler_standby
import profsvc.worker.warm as worker_standby
from profsvc import proc
from profsvc.config import ServerConfig
from profsvc.host import HostInfo
from profsvc.proc import ProcessResult, StartedProcess, run_process
from profsvc.scheduler.scheduler import Job, Scheduler
from profsvc.scheduler.warm_pool import MAX_FAILED_STARTS, PRIME_IDLE_S, Standby, StandbyGone, StandbyPool, StandbySpec
from profsvc.telemetry import Telemetry, collect_timings
from profsvc.worker.warm import CHANNEL, LOADED, PRIME, READY, WARM_PROFILER, split_standby_args, wait_for_job
from profsvc_contract.models import GpuInfo
from tests.conftest import FIXTURES

REPO = Path(__file__).resolve().parents[2]
REPORT = FIXTURES / "seed47_full.ncu-rep"
ANALYZE = "profsvc.worker.analyze_report"

ECHO = '''"""A warm worker that prints its job back: argv, working directory, stdin, pid."""
import json
import os
import sys
import time

from profsvc.worker.warm import job_argv, split_standby_args


def warm():
    time.sleep(float(os.environ.get("ECHO_WARM_S", "0")))


def prime():
    # Stands for the kernel a worker under ncu profiles: when it ran, and whether the GPU lock was held then.
    (standby[0] / "primed").write_text(str(time.time()))
    time.sleep(float(os.environ.get("ECHO_PRIME_S", "0")))
    if os.environ.get("ECHO_PRIME_EXIT"):
        print("==ERROR== priming failed", flush=True)
        sys.exit(int(os.environ["ECHO_PRIME_EXIT"]))


standby = split_standby_args(sys.argv[1:])
if standby is not None:
    (standby[0] / "started").write_text(str(os.getpid()))
argv = job_argv(sys.argv[1:], warm=warm, prime=prime)
if argv[:1] == ["sleep"]:
    time.sleep(float(argv[1]))
print(json.dumps({"argv": argv, "cwd": os.getcwd(), "stdin": sys.stdin.read(), "pid": os.getpid()}))
'''


# --------------------------------------------------------------------------- helpers


def _gone(pid: int) -> bool:
    """True when no process has this pid (a zombie nobody reaps counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


async def _until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(0.02)


def _pids(root: Path, name: str) -> dict[Path, int]:
    """Worker directory -> pid, from each directory's `name` file (ready or started) once written."""
    found = {}
    for path in root.glob(f"*/{name}"):
        with contextlib.suppress(OSError, ValueError):
            found[path.parent] = int(path.read_text())
    return found


@contextlib.asynccontextmanager
async def _pool(root: Path) -> AsyncIterator[tuple[StandbyPool, list[Standby | None]]]:
    """A pool and the workers a test takes from it: left-over ones are killed and the pool closed after."""
    pool = StandbyPool(root)
    taken: list[Standby | None] = []
    try:
        yield pool, taken
    finally:
        await _drop(taken)
        await pool.close()


@contextlib.asynccontextmanager
async def _taken(root: Path, kind: str, spec: StandbySpec) -> AsyncIterator[Standby]:
    """A pool keeping one kind and a worker taken from it: the worker is discarded and the pool closed after."""
    async with _pool(root) as (pool, _):
        pool.keep(kind, spec)
        standby = await pool.take(kind)
        assert standby is not None
        try:
            yield standby
        finally:
            await _drop([standby])


async def _drop(standbys: list[Standby | None]) -> None:
    """Kill and finish the taken workers (a passing test has finished them; a failed one may not have)."""
    for standby in standbys:
        if standby is not None:
            standby.discard()
            await standby.process.finish(5)


def _environment(*extra_paths: Path, **variables: str) -> dict[str, str]:
    path = os.pathsep.join([*map(str, extra_paths), str(REPO), str(REPO / "client")])
    return {**os.environ, "PYTHONPATH": path, **variables}


def _worker_spec(
    module: str, *paths: Path, server_pid: int | None = None, prime_lock: asyncio.Lock | None = None, **variables: str
) -> StandbySpec:
    """How the scheduler starts a warm worker: `python -m module --standby DIR --server-pid PID`."""
    server = str(server_pid if server_pid is not None else os.getpid())
    if prime_lock is not None:
        variables = {WARM_PROFILER: "1", **variables}
    return StandbySpec(
        command=lambda directory: [sys.executable, "-m", module, "--standby", str(directory), "--server-pid", server],
        environment=lambda directory: _environment(*paths, **variables),
        prime_lock=prime_lock,
    )


@pytest.fixture
def echo(tmp_path: Path) -> Path:
    """The folder holding the echo worker module `standby_echo`."""
    folder = tmp_path / "modules"
    folder.mkdir()
    (folder / "standby_echo.py").write_text(ECHO)
    return folder


@pytest.fixture(scope="module")
def analyze_reader() -> None:
    """The analyze worker needs ncu_report for a job (the dev extra installs it): without it the test fails."""
    from profsvc.metrics.reader import load_reader

    load_reader()


# --------------------------------------------------------------------------- StartedProcess


def test_started_process_collects_output_and_forwards_stdout():
    async def body():
        process = await StartedProcess.start(
            ["sh", "-c", "echo one; sleep 0.3; echo two; echo oops >&2; exit 5"], cwd=Path("/"), env=os.environ
        )
        chunks: list[str] = []
        process.on_stdout = chunks.append
        assert process.running
        result = await process.finish(30)
        assert not process.running
        return result, chunks

    result, chunks = asyncio.run(body())
    assert result.returncode == 5 and not result.timed_out and not result.ok
    assert result.stdout == "one\ntwo\n"
    assert result.stderr == "oops\n"
    assert "".join(chunks) == result.stdout
    assert result.argv[0] == "sh"


def test_started_process_keeps_output_written_before_anyone_listened():
    async def body():
        process = await StartedProcess.start(["sh", "-c", "echo early; cat"], cwd=Path("/"), env=os.environ)
        await asyncio.sleep(0.5)  # `cat` gets EOF from the closed stdin: the shell exits
        chunks: list[str] = []
        process.on_stdout = chunks.append
        return await process.finish(30), chunks

    result, chunks = asyncio.run(body())
    assert result.ok
    assert result.stdout == "early\n"
    assert chunks == []  # nothing forwarded twice; what came before the listener is in the result only


def test_started_process_runs_in_its_cwd_with_its_environment(tmp_path):
    async def body():
        process = await StartedProcess.start(
            ["sh", "-c", 'pwd; echo "$PROFSVC_TEST_VALUE"'], cwd=tmp_path, env={"PROFSVC_TEST_VALUE": "v42"}
        )
        return await process.finish(30)

    result = asyncio.run(body())
    assert result.stdout.split() == [str(tmp_path), "v42"]


def _finished(argv: list[str], timeout: float) -> tuple[ProcessResult, float]:
    """Start argv, finish it with `timeout`: its result and how long finishing took."""

    async def body() -> tuple[ProcessResult, float]:
        process = await StartedProcess.start(argv, cwd=Path("/"), env=os.environ)
        start = time.monotonic()
        result = await process.finish(timeout)
        return result, time.monotonic() - start

    return asyncio.run(body())


def _gone_within(pid: int, seconds: float) -> bool:
    """True once no process has this pid, polled for at most `seconds`."""
    deadline = time.monotonic() + seconds
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _gone(pid)


def test_started_process_timeout_kills_the_whole_process_group():
    # The background sleep keeps stdout open: only the group kill ends it.
    result, seconds = _finished(["sh", "-c", "sleep 30 & echo $!; wait"], 1.0)
    assert result.timed_out and not result.ok
    assert result.returncode == -signal.SIGKILL
    assert seconds < 10
    assert _gone_within(int(result.stdout.split()[0]), 5)


def test_started_process_ends_with_its_exit_though_a_child_left_behind_holds_stdout():
    # The shell exits at once; its background sleep keeps stdout open for 30 s.
    result, seconds = _finished(["sh", "-c", "sleep 30 & echo $!"], 60)
    assert result.ok and not result.timed_out
    assert seconds < 10, f"waited {seconds:.1f} s for the child left behind"
    assert _gone_within(int(result.stdout.split()[0]), 5), "the child left behind in the group still runs"


def test_started_process_kills_a_child_that_moved_to_a_process_group_of_its_own():
    code = "import os, sys, time; os.setpgid(0, 0); print(os.getpid(), flush=True); time.sleep(30)"
    result, seconds = _finished(["sh", "-c", f'{sys.executable} -c "{code}" & sleep 0.5; echo done'], 60)
    assert result.ok and seconds < 10
    assert _gone_within(int(result.stdout.split()[0]), 5), "the child in a group of its own outlived the job"


def test_started_process_kill_ends_it_and_running_says_so():
    async def body():
        process = await StartedProcess.start(["sleep", "30"], cwd=Path("/"), env=os.environ)
        assert process.running
        process.kill()
        result = await process.finish(10)
        assert not process.running
        return result

    result = asyncio.run(body())
    assert result.returncode == -signal.SIGKILL
    assert not result.timed_out


class _SlowTree:
    """Stands for a jail's cgroup whose killed processes take a few looks to end."""

    def __init__(self, looks: int) -> None:
        self.looks, self.removed = looks, False

    def kill(self) -> None:
        pass

    def remove(self) -> None:
        self.removed = True

    def pids(self) -> list[int]:
        self.looks -= 1
        return [12345] if self.looks > 0 else []

    def why_killed(self) -> str:
        return ""


@pytest.mark.parametrize(("looks", "within", "emptied"), [(5, 10.0, True), (10**9, 0.05, False)])
def test_emptied_waits_for_every_process_of_the_tree_to_end(looks, within, emptied):
    tree = _SlowTree(looks)

    async def body() -> bool:
        launch = proc.Launch(argv=("true",), tree=tree)
        process = await StartedProcess.start(["true"], cwd=Path("/"), env=os.environ, launch=launch)
        await process.finish(10)
        tree.removed = False  # finish tries once; emptied removes it once empty
        return await process.emptied(within)

    assert asyncio.run(body()) is emptied
    assert tree.removed is emptied and (tree.looks <= 0) is emptied


def test_started_process_finish_cancelled_kills_the_group():
    async def body():
        process = await StartedProcess.start(["sh", "-c", "sleep 30 & wait"], cwd=Path("/"), env=os.environ)
        task = asyncio.create_task(process.finish(None))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return process

    process = asyncio.run(body())
    assert process.process.returncode == -signal.SIGKILL


# --------------------------------------------------------------------------- worker side: the protocol


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--standby", "/tmp/w", "--server-pid", "123"], (Path("/tmp/w"), 123)),
        (["report.ncu-rep", "--filter", "{}"], None),
        (["--standby", "/tmp/w"], None),
        (["--standby", "/tmp/w", "--pid", "123"], None),
        (["--standby", "/tmp/w", "--server-pid", "123", "extra"], None),
        ([], None),
    ],
)
def test_split_standby_args(argv, expected):
    assert split_standby_args(argv) == expected


def _fifo_directory(tmp_path: Path) -> Path:
    directory = tmp_path / "worker"
    directory.mkdir()
    os.mkfifo(directory / CHANNEL, 0o600)
    return directory


def _waiting_worker(
    directory: Path, server_pid: int, prime: Callable[[], None] | None = None, until: str = ""
) -> tuple[threading.Thread, list[object]]:
    """wait_for_job in a thread (its argv, or what it raised, lands in the list), once `until` is in `directory`.

    In a thread: a worker that never returned would wait forever (a failure, not a hung run)."""
    outcome: list[object] = []

    def worker() -> None:
        try:
            outcome.append(wait_for_job(directory, server_pid, lambda: None, prime=prime))
        except BaseException as error:  # reported by the callers' assertions
            outcome.append(error)

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while until and not (directory / until).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return thread, outcome


def _send(directory: Path, *messages: object) -> None:
    """The lines to a waiting worker, in one write."""
    writer = os.open(directory / CHANNEL, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(writer, "".join(json.dumps(m) + "\n" for m in messages).encode())
    finally:
        os.close(writer)


def test_wait_for_job_warms_says_ready_then_takes_a_job_written_in_pieces(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdin", sys.stdin)  # wait_for_job replaces it: restored after the test
    directory = _fifo_directory(tmp_path)
    job_cwd = tmp_path / "job"
    job_cwd.mkdir()
    ready_during_warm: list[bool] = []
    outcome: dict[str, object] = {}

    def warm() -> None:
        ready_during_warm.append((directory / READY).exists())

    def worker() -> None:
        try:
            outcome["argv"] = wait_for_job(directory, os.getpid(), warm)
            outcome["cwd"] = os.getcwd()
            outcome["stdin"] = sys.stdin.read()
        except BaseException as error:  # reported by the assertions below
            outcome["error"] = error

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not (directory / READY).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ready_during_warm == [False]  # warm-up first, then `ready`
    assert (directory / READY).read_text() == str(os.getpid())
    line = json.dumps({"argv": ["report", 7, "--x"], "cwd": str(job_cwd), "stdin": "seed=47\nmore"}) + "\n"
    channel = os.open(directory / CHANNEL, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(channel, line[:10].encode())
        time.sleep(0.2)
        assert thread.is_alive()  # half a line is not a job
        os.write(channel, line[10:].encode())
    finally:
        os.close(channel)
    thread.join(10)
    assert not thread.is_alive()
    assert "error" not in outcome, outcome.get("error")
    assert outcome == {"argv": ["report", "7", "--x"], "cwd": str(job_cwd), "stdin": "seed=47\nmore"}


@pytest.mark.parametrize("planted", ["link", "file"])
def test_a_line_to_a_worker_goes_only_to_its_fifo(tmp_path, planted):
    # The worker's folder is its job's: a link or a file in place of the FIFO must not be written.
    victim = tmp_path / "victim"
    victim.write_text("the server's own file")
    worker = tmp_path / "worker"
    worker.mkdir()
    if planted == "link":
        (worker / CHANNEL).symlink_to(victim)
    else:
        (worker / CHANNEL).write_text("the server's own file")
    with pytest.raises(OSError):
        asyncio.run(scheduler_standby.write_line(worker, {"argv": ["x"]}))
    assert victim.read_text() == "the server's own file"
    assert planted == "link" or (worker / CHANNEL).read_text() == "the server's own file"


def test_wait_for_job_without_stdin_gives_an_empty_stdin(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdin", sys.stdin)
    directory = _fifo_directory(tmp_path)
    writer = os.open(directory / CHANNEL, os.O_RDWR)  # a job already waiting in the FIFO
    try:
        os.write(writer, (json.dumps({"argv": ["a"], "cwd": str(tmp_path)}) + "\n").encode())
        assert wait_for_job(directory, os.getpid(), lambda: None) == ["a"]
    finally:
        os.close(writer)
    assert sys.stdin.read() == ""


def test_wait_for_job_exits_when_the_server_is_gone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(worker_standby, "LIFELINE_S", 0.05)
    directory = _fifo_directory(tmp_path)
    dead = subprocess.Popen(["true"])
    dead.wait()
    thread, outcome = _waiting_worker(directory, dead.pid)
    thread.join(5)
    assert not thread.is_alive(), "still waiting for a job after the server exited"
    assert len(outcome) == 1 and isinstance(outcome[0], SystemExit)
    assert outcome[0].code == 0
    assert (directory / READY).exists()


def test_wait_for_job_exits_when_its_directory_is_removed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(worker_standby, "LIFELINE_S", 0.05)
    directory = _fifo_directory(tmp_path)
    thread, outcome = _waiting_worker(directory, os.getpid(), until=READY)
    shutil.rmtree(directory)  # what discard() does, beside the kill
    thread.join(5)
    assert not thread.is_alive(), "still waiting for a job in a removed directory"
    assert len(outcome) == 1 and isinstance(outcome[0], SystemExit)


# --------------------------------------------------------------------------- the pool, real workers


@pytest.mark.parametrize("depth", [1, 2])
def test_take_returns_a_ready_worker_and_a_replacement_starts(tmp_path, analyze_reader, depth):
    async def body():
        async with _pool(tmp_path / "standby") as (pool, taken):
            pool.keep("analyze", _worker_spec(ANALYZE), depth=depth)
            assert pool.kinds() == ["analyze"]
            # Taken at once, while still warming: take() waits until the worker says it is ready.
            for _ in range(depth):
                taken.append(await pool.take("analyze"))
            for standby in taken:
                assert standby is not None
                assert standby.ready and standby.process.running
                # `ready` exists once the FIFO is open; its pid may still be on its way in.
                await _until(lambda s=standby: _pids(pool.root, READY).get(s.directory), 5, "pid in ready")
                assert _pids(pool.root, READY)[standby.directory] == standby.process.process.pid
            assert len({s.process.process.pid for s in taken}) == depth
            # The oldest first: the workers started by keep(), in order.
            assert [s.directory.name.rsplit("-", 1)[1] for s in taken] == [str(n) for n in range(1, depth + 1)]
            # One replacement per worker taken, warming now; the pool is back to `depth` waiting workers.
            await _until(lambda: len(_pids(pool.root, READY)) == 2 * depth, 60, "replacements ready")
            replacements = {d: p for d, p in _pids(pool.root, READY).items() if d not in {s.directory for s in taken}}
            assert len(replacements) == depth
            await asyncio.sleep(worker_standby.LIFELINE_S * 1.5)  # the server (this test) is alive: they wait
            assert all(s.process.running for s in taken)
            assert all(not _gone(pid) for pid in replacements.values())
            # A taken worker is the caller's: discarding it kills it and removes its directory.
            for standby in taken:
                standby.discard()
                result = await standby.process.finish(10)
                assert result.returncode == -signal.SIGKILL
                assert not standby.directory.exists()
            again = await pool.take("analyze")
            taken.append(again)
            assert again is not None and again.directory in replacements
            again.discard()
            await again.process.finish(10)

    asyncio.run(body())


def test_job_on_a_warm_analyze_worker_gives_what_a_fresh_process_gives(tmp_path, analyze_reader):
    fresh_charts, warm_charts, job_cwd = tmp_path / "fresh", tmp_path / "warm", tmp_path / "cwd"
    for folder in (fresh_charts, warm_charts, job_cwd):
        folder.mkdir()

    def job(charts: Path) -> list[str]:
        return [str(REPORT), "--filter", "{}", "--charts", str(charts), "--source-map", "{}"]

    async def body():
        async with _taken(tmp_path / "standby", "analyze", _worker_spec(ANALYZE)) as standby:
            fresh = await run_process(
                [sys.executable, "-m", ANALYZE, *job(fresh_charts)], cwd=job_cwd, env=_environment(), timeout=120
            )
            chunks: list[str] = []
            warm = await standby.run(job(warm_charts), cwd=job_cwd, stdin="", timeout=120, on_stdout=chunks.append)
            return fresh, warm, chunks

    fresh, warm, chunks = asyncio.run(body())
    assert fresh.ok, fresh.stderr
    assert warm.ok, warm.stderr
    assert "".join(chunks) == warm.stdout
    fresh_result, warm_result = json.loads(fresh.stdout), json.loads(warm.stdout)
    names = [k["name"] for k in fresh_result["kernels"]]
    assert names and "vga_linear_kernel" in names
    assert [k["name"] for k in warm_result["kernels"]] == names
    for fresh_kernel, warm_kernel in zip(fresh_result["kernels"], warm_result["kernels"], strict=True):
        assert fresh_kernel["figures"] and warm_kernel["figures"] == fresh_kernel["figures"]
        assert warm_kernel["hints"] == fresh_kernel["hints"]
    assert warm_result["device"] == fresh_result["device"]
    for kind in ("png", "svg"):
        assert (fresh_charts / f"roofline.{kind}").stat().st_size > 0
        assert (warm_charts / f"roofline.{kind}").stat().st_size > 0


def test_job_stdin_cwd_and_argv_reach_the_worker(tmp_path, echo):
    job_cwd = tmp_path / "job"
    job_cwd.mkdir()

    async def body():
        async with _taken(tmp_path / "standby", "echo", _worker_spec("standby_echo", echo)) as standby:
            chunks: list[str] = []
            result = await standby.run(
                ["one", "two words", '{"json": 1}'],
                cwd=job_cwd,
                stdin="secret seed 47\nsecond line",
                timeout=30,
                on_stdout=chunks.append,
            )
            return standby, result, chunks

    standby, result, chunks = asyncio.run(body())
    assert result.ok, result.stderr
    echoed = json.loads(result.stdout)
    assert echoed == {
        "argv": ["one", "two words", '{"json": 1}'],
        "cwd": str(job_cwd),
        "stdin": "secret seed 47\nsecond line",
        "pid": standby.process.process.pid,  # the warm process itself ran the job
    }
    assert "".join(chunks) == result.stdout


def test_a_job_past_its_time_limit_on_a_warm_worker_is_killed(tmp_path, echo):
    async def body():
        async with _taken(tmp_path / "standby", "echo", _worker_spec("standby_echo", echo)) as standby:
            start = time.monotonic()
            result = await standby.run(["sleep", "60"], cwd=tmp_path, stdin="", timeout=1, on_stdout=None)
            return standby, result, time.monotonic() - start

    standby, result, seconds = asyncio.run(body())
    assert result.timed_out and not result.ok
    assert result.returncode == -signal.SIGKILL
    assert seconds < 10
    assert _gone(standby.process.process.pid)


def test_a_worker_that_died_before_its_job_raises_standby_gone(tmp_path, echo):
    async def body():
        async with _taken(tmp_path / "standby", "echo", _worker_spec("standby_echo", echo)) as standby:
            standby.process.kill()
            await standby.process.finish(10)
            with pytest.raises(StandbyGone):
                await standby.run(["x"], cwd=tmp_path, stdin="", timeout=10, on_stdout=None)

    asyncio.run(body())


@pytest.mark.parametrize(
    "command",
    [[sys.executable, "-c", "raise SystemExit(3)"], ["/nonexistent/profsvc-worker"]],
    ids=["exits during warm-up", "cannot start"],
)
def test_take_returns_none_when_the_worker_does_not_come_up(tmp_path, command):
    async def body():
        pool = StandbyPool(tmp_path / "standby")
        pool.keep("broken", StandbySpec(command=lambda directory: command, environment=lambda d: _environment()))
        try:
            # Bounded: a take() that missed the worker's exit would wait READY_TIMEOUT_S (minutes).
            assert await asyncio.wait_for(pool.take("broken"), 20) is None
            assert await asyncio.wait_for(pool.take("broken"), 20) is None  # the replacement fails the same way
            # Nothing left behind but the one replacement now starting.
            assert len(list(pool.root.iterdir())) <= 1
        finally:
            await pool.close()
        assert list(pool.root.iterdir()) == []

    asyncio.run(body())


def test_a_worker_that_does_not_come_up_is_logged_with_its_exit_and_output(tmp_path, caplog):
    # ncu prints its errors on stdout: the warning must carry them, not only stderr.
    code = "import sys; print('==ERROR== profiling failed'); sys.stderr.write('on stderr'); raise SystemExit(3)"
    command = [sys.executable, "-c", code]

    async def body():
        pool = StandbyPool(tmp_path / "standby")
        pool.keep("broken", StandbySpec(command=lambda directory: command, environment=lambda d: _environment()))
        try:
            assert await asyncio.wait_for(pool.take("broken"), 20) is None
        finally:
            await pool.close()

    with caplog.at_level(logging.WARNING, logger="profsvc.standby"):
        asyncio.run(body())
    message = next(r.getMessage() for r in caplog.records if "did not come up" in r.getMessage())
    assert "(exit 3)" in message and "==ERROR== profiling failed" in message and "on stderr" in message


def test_a_kind_whose_workers_keep_failing_is_no_longer_kept(tmp_path):
    command = [sys.executable, "-c", "raise SystemExit(3)"]

    async def body():
        pool = StandbyPool(tmp_path / "standby")
        pool.keep("broken", StandbySpec(command=lambda directory: command, environment=lambda d: _environment()))
        pool.keep("other", StandbySpec(command=lambda directory: command, environment=lambda d: _environment()))
        try:
            for _ in range(MAX_FAILED_STARTS):
                assert "broken" in pool.kinds()
                assert await asyncio.wait_for(pool.take("broken"), 20) is None
            assert pool.kinds() == ["other"]
            assert await asyncio.wait_for(pool.take("broken"), 1) is None  # at once: nothing to wait for
            await _until(lambda: not any(pool.root.glob("broken-*")), 10, "the broken kind's folders removed")
        finally:
            await pool.close()

    asyncio.run(body())


def test_take_of_a_kind_not_kept_returns_none(tmp_path):
    async def body():
        pool = StandbyPool(tmp_path / "standby")
        assert await pool.take("analyze") is None
        await pool.close()

    asyncio.run(body())


def test_close_kills_every_worker_ready_or_warming(tmp_path, echo):
    async def body():
        pool = StandbyPool(tmp_path / "standby")
        pool.keep("echo", _worker_spec("standby_echo", echo), depth=2)
        pool.keep("slow", _worker_spec("standby_echo", echo, ECHO_WARM_S="60"))
        assert sorted(pool.kinds()) == ["echo", "slow"]
        await _until(lambda: len(_pids(pool.root, READY)) == 2, 30, "two echo workers ready")
        await _until(lambda: len(_pids(pool.root, "started")) == 3, 30, "the slow worker started")
        pids = set(_pids(pool.root, "started").values())
        assert len(pids) == 3
        await pool.close()
        try:
            await _until(lambda: all(_gone(pid) for pid in pids), 5, "every worker gone")
        finally:
            for pid in pids:  # whatever close() missed goes now, so the failure is reported cleanly
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        assert list(pool.root.iterdir()) == []
        # A closed pool hands out nothing and starts nothing.
        assert await pool.take("echo") is None
        assert list(pool.root.iterdir()) == []

    asyncio.run(body())


def test_a_waiting_worker_exits_once_its_server_is_gone(tmp_path, echo):
    server = subprocess.Popen(["sleep", "30"])

    async def body():
        async with _pool(tmp_path / "standby") as (pool, taken):
            pool.keep("echo", _worker_spec("standby_echo", echo, server_pid=server.pid))
            taken.append(standby := await pool.take("echo"))
            assert standby is not None
            await asyncio.sleep(worker_standby.LIFELINE_S * 1.5)
            assert standby.process.running  # the server is alive: it waits
            server.kill()
            server.wait()
            start = time.monotonic()
            await asyncio.wait_for(standby.process.process.wait(), 5)
            seconds = time.monotonic() - start
            result = await standby.process.finish(5)
            standby.discard()
            return result, seconds

    try:
        result, seconds = asyncio.run(body())
    finally:
        server.kill()
        server.wait()
    assert result.returncode == 0  # a quiet exit, no job run
    assert result.stdout == ""
    assert seconds < 3


# --------------------------------------------------------------------------- two-step warm-up (workers under ncu)


def _loaded_worker(tmp_path: Path, monkeypatch) -> tuple[Path, list[bool], threading.Thread, list[object]]:
    """A worker under ncu in a thread, once it said loaded: its directory, its primes, the thread, its outcome."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdin", sys.stdin)  # wait_for_job replaces it: restored after the test
    directory = _fifo_directory(tmp_path)
    primed: list[bool] = []
    thread, outcome = _waiting_worker(directory, os.getpid(), prime=lambda: primed.append(True), until=LOADED)
    return directory, primed, thread, outcome


def test_wait_for_job_with_prime_says_loaded_and_primes_only_when_told(tmp_path, monkeypatch):
    directory, primed, thread, outcome = _loaded_worker(tmp_path, monkeypatch)
    time.sleep(0.3)
    assert (directory / LOADED).exists()
    assert primed == [] and not (directory / READY).exists()  # loaded, waiting for the word
    # Both lines in one write: the second is kept for after the priming.
    _send(directory, PRIME, {"argv": ["a"], "cwd": str(tmp_path)})
    thread.join(10)
    assert outcome == [["a"]]
    assert primed == [True]
    assert (directory / READY).exists()


def test_wait_for_job_runs_a_job_that_comes_before_the_prime_unprimed(tmp_path, monkeypatch):
    directory, primed, thread, outcome = _loaded_worker(tmp_path, monkeypatch)
    _send(directory, {"argv": ["b"], "cwd": str(tmp_path), "stdin": "s"})
    thread.join(10)
    assert outcome == [["b"]]
    assert primed == [] and not (directory / READY).exists()
    assert sys.stdin.read() == "s"


def _gpu_lock_spec(echo: Path, lock: asyncio.Lock, **variables: str) -> StandbySpec:
    return _worker_spec("standby_echo", echo, prime_lock=lock, **variables)


def _primed(standby: Standby) -> bool:
    return (standby.directory / "primed").exists()


def test_the_pool_primes_only_the_oldest_worker_and_only_while_the_gpu_is_free(tmp_path, echo):
    async def body():
        lock = asyncio.Lock()
        await lock.acquire()  # a job holds the GPU
        async with _pool(tmp_path / "standby") as (pool, taken):
            pool.keep("ncu", _gpu_lock_spec(echo, lock), depth=2)
            await _until(lambda: len(list(pool.root.glob(f"*/{LOADED}"))) == 2, 60, "both loaded")
            await asyncio.sleep(0.5)
            assert not list(pool.root.glob("*/primed")), "primed while the GPU was held"
            assert not list(pool.root.glob(f"*/{READY}"))
            lock.release()  # the job is done
            await _until(lambda: len(list(pool.root.glob(f"*/{READY}"))) == 1, 30, "the oldest ready")
            await asyncio.sleep(0.5)
            # One primed worker per GPU: the other stays loaded until it is the oldest.
            assert [p.parent.name.rsplit("-", 1)[1] for p in pool.root.glob("*/primed")] == ["1"]
            assert not lock.locked()
            # A job takes the primed one: ready at once.
            async with lock:
                first = await pool.take("ncu")
                taken.append(first)
                assert first is not None and first.ready and first.directory.name.endswith("-1")
                await asyncio.sleep(0.5)
                # The next oldest waits for the GPU the job holds.
                assert len(list(pool.root.glob("*/primed"))) == 1
            await _until(lambda: len(list(pool.root.glob("*/primed"))) == 2, 30, "the next oldest primed")
            assert sorted(p.parent.name.rsplit("-", 1)[1] for p in pool.root.glob("*/primed")) == ["1", "2"]

    asyncio.run(body())


def test_a_job_that_comes_for_the_gpu_while_a_worker_primes_does_not_wait_for_the_prime(tmp_path, echo):
    async def body():
        lock = asyncio.Lock()
        async with _pool(tmp_path / "standby") as (pool, _):
            pool.keep("ncu", _gpu_lock_spec(echo, lock, ECHO_PRIME_S="60"), depth=2)
            await _until(lambda: bool(list(pool.root.glob("*-1/primed"))), 60, "the oldest priming")
            first = _pids(pool.root, "started")[next(pool.root.glob("*-1"))]
            start = time.monotonic()
            pool.stop_priming(lock)
            await lock.acquire()
            waited = time.monotonic() - start
            try:
                assert waited < 10, f"the job waited {waited:.1f} s for a prime of 60 s"
                await _until(lambda: _gone(first), 10, "the priming worker killed")
                assert not list(pool.root.glob("*-1")), "the stopped worker's directory is left"
                await _until(lambda: bool(list(pool.root.glob("*-3"))), 30, "a replacement started")
                await asyncio.sleep(PRIME_IDLE_S * 2)
                assert not list(pool.root.glob("*-2/primed")), "primed while the job held the GPU"
            finally:
                lock.release()
            # Once the job is done, the next oldest primes.
            await _until(lambda: bool(list(pool.root.glob("*-2/primed"))), 30, "the next oldest priming")

    asyncio.run(body())


def test_a_job_leasing_the_gpu_does_not_wait_for_a_prime_on_it(tmp_path, echo):
    host = HostInfo(gpus=[GpuInfo(index=0, name="NVIDIA H200", compute_capability="9.0", memory_bytes=1 << 30)])
    scheduler = Scheduler(ServerConfig(state_dir=tmp_path / "state"), host, None, Telemetry())

    async def body() -> float:
        pool = scheduler.standby
        try:
            pool.keep("ncu-gpu0", _gpu_lock_spec(echo, scheduler._gpu_locks[0], ECHO_PRIME_S="60"))
            await _until(lambda: bool(list(pool.root.glob("*-1/primed"))), 60, "the worker priming")
            start = time.monotonic()
            async with scheduler.gpu_lease(Job("job", tmp_path, None, {})) as gpu:
                assert gpu == 0
                return time.monotonic() - start
        finally:
            await pool.close()

    assert asyncio.run(body()) < 10


class _Clock:
    """The pool's monotonic clock, moved only by the test: its idle timer sees exactly the gaps the test makes."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.reads = 0

    def monotonic(self) -> float:
        self.reads += 1
        return self.now

    async def polled(self, primed: Callable[[], bool]) -> None:
        """Return once the pool has read the clock twice more (it has looked at the GPU lock as it is now), or has
        primed (a priming pool stops polling)."""
        target = self.reads + 2
        await _until(lambda: self.reads >= target or primed(), 30, "the pool polled the GPU lock")


def test_a_job_that_follows_another_at_once_goes_before_the_priming(tmp_path, echo, monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(scheduler_standby, "time", clock)  # the pool's module reads only time.monotonic

    async def body():
        lock = asyncio.Lock()
        await lock.acquire()
        async with _pool(tmp_path / "standby") as (pool, _):
            pool.keep("ncu", _gpu_lock_spec(echo, lock))
            await _until(lambda: bool(list(pool.root.glob(f"*/{LOADED}"))), 60, "loaded")

            def primed() -> bool:
                return bool(list(pool.root.glob("*/primed")))

            for _ in range(3):  # jobs one after another, each within the idle time of the one before
                lock.release()
                await clock.polled(primed)  # the pool saw the GPU free
                clock.now += PRIME_IDLE_S * 0.9
                await clock.polled(primed)
                await lock.acquire()  # the next job
                await clock.polled(primed)  # the pool saw it held: the idle timer starts over
                clock.now += PRIME_IDLE_S * 10
                await clock.polled(primed)
                assert not primed(), "primed between two jobs"
            lock.release()
            await clock.polled(primed)
            clock.now += PRIME_IDLE_S * 0.9
            await clock.polled(primed)
            assert not primed(), "primed before the GPU was free for PRIME_IDLE_S"
            clock.now += PRIME_IDLE_S * 0.2
            await _until(primed, 30, "primed once the GPU stayed free")

    asyncio.run(body())


def test_a_job_that_takes_an_unprimed_worker_runs_on_it_at_once_unprimed(tmp_path, echo):
    job_cwd = tmp_path / "job"
    job_cwd.mkdir()

    async def body():
        lock = asyncio.Lock()
        async with _pool(tmp_path / "standby") as (pool, taken):
            async with lock:  # the job holds the GPU from before the worker started
                pool.keep("ncu", _gpu_lock_spec(echo, lock, ECHO_WARM_S="0.5"))
                with collect_timings() as timings:
                    standby = await pool.take("ncu")
                taken.append(standby)
                # Taken once loaded: the job's own line replaces the prime, which never runs.
                assert standby is not None and standby.loaded and not standby.ready
                result = await standby.run(["job"], cwd=job_cwd, stdin="", timeout=30, on_stdout=None)
                assert not _primed(standby)
            return result, timings

    result, timings = asyncio.run(body())
    assert result.ok and json.loads(result.stdout)["argv"] == ["job"]
    assert "ncu:wait" in timings and "ncu:prime" not in timings


def test_a_wait_for_a_warm_worker_is_logged_with_how_long_it_took_to_come_up(tmp_path, echo, caplog):
    async def body():
        async with _pool(tmp_path / "standby") as (pool, taken):
            pool.keep("echo", _worker_spec("standby_echo", echo, ECHO_WARM_S="1.5"))
            await asyncio.sleep(0.5)
            with collect_timings() as timings:
                taken.append(await pool.take("echo"))
            # A worker taken ready at once is not logged.
            await _until(lambda: len(_pids(pool.root, READY)) == 2, 30, "the replacement ready")
            taken.append(await pool.take("echo"))
            return timings

    with caplog.at_level(logging.INFO, logger="profsvc.standby"):
        timings = asyncio.run(body())
    waits = [r.getMessage() for r in caplog.records if "waited" in r.getMessage()]
    assert len(waits) == 1, waits
    # Its warm-up (1.5 s of sleep, after Python's start) began about 0.5 s before the job came.
    waited, came_up = (float(n) for n in re.findall(r"(\d+\.\d) s", waits[0]))
    assert waited == pytest.approx(timings["echo:wait"], abs=0.05)
    assert 1.0 <= waited and 1.5 <= came_up and came_up - waited == pytest.approx(0.5, abs=0.3)
    assert "echo worker" in waits[0]


def test_a_worker_that_fails_to_prime_is_logged_and_the_job_runs_fresh(tmp_path, echo, caplog):
    async def body():
        lock = asyncio.Lock()
        async with _pool(tmp_path / "standby") as (pool, taken):
            pool.keep("ncu", _gpu_lock_spec(echo, lock, ECHO_PRIME_EXIT="3"))
            await _until(lambda: bool(list(pool.root.glob("*/primed"))), 30, "priming tried")
            async with lock:
                taken.append(await pool.take("ncu"))

    with caplog.at_level(logging.WARNING, logger="profsvc.standby"):
        asyncio.run(body())
    assert any(
        "did not come up (exit 3)" in r.getMessage() and "priming failed" in r.getMessage() for r in caplog.records
    )


@pytest.mark.parametrize("prime", [False, True])
def test_a_take_cancelled_while_the_worker_warms_leaves_no_worker_behind(tmp_path, echo, prime):
    async def body():
        lock = asyncio.Lock() if prime else None
        async with _pool(tmp_path / "standby") as (pool, _):
            spec = _worker_spec("standby_echo", echo, prime_lock=lock, ECHO_WARM_S="1")
            pool.keep("echo", spec)
            take = asyncio.create_task(pool.take("echo"))

            def oldest() -> list[int]:
                return [pid for d, pid in _pids(pool.root, "started").items() if d.name.endswith("-1")]

            await _until(lambda: bool(oldest()), 30, "the worker started")
            first = oldest()[0]
            take.cancel()
            with pytest.raises(asyncio.CancelledError):
                await take
            await _until(lambda: _gone(first), 10, "the worker the cancelled take waited for is gone")

    asyncio.run(body())


def test_a_finished_process_is_never_killed_again(monkeypatch):
    # Its pid may belong to another process (and session) by the time a late discard() comes.
    kills: list[int] = []
    monkeypatch.setattr(proc, "_kill_group", kills.append)

    async def body() -> int:
        process = await StartedProcess.start(["true"], cwd=Path("/"), env=os.environ)
        await process.finish(10)
        after_finish = len(kills)
        process.kill()
        return after_finish

    assert asyncio.run(body()) == len(kills) == 1


def test_the_jobs_timings_say_what_it_waited_for_that_was_not_its_own(tmp_path, echo):
    # A job that takes a worker still loading waits for it, and its timings say so; a worker that was ready and
    # primed costs the job no wait worth the name.
    job_cwd = tmp_path / "job"
    job_cwd.mkdir()

    async def body() -> tuple[dict[str, float], dict[str, float]]:
        lock = asyncio.Lock()
        async with _pool(tmp_path / "standby") as (pool, taken):
            async with lock:
                pool.keep("ncu-gpu0", _gpu_lock_spec(echo, lock, ECHO_WARM_S="0.5"))
                with collect_timings() as first:
                    taken.append(await pool.take("ncu-gpu0"))
            # The GPU free: the pool primes the replacement ahead.
            for _ in range(300):
                waiting = pool._current.get("ncu-gpu0")
                if waiting and waiting[0].done() and (ahead := waiting[0].result()) is not None and ahead.primed:
                    break
                await asyncio.sleep(0.1)
            with collect_timings() as second:
                taken.append(await pool.take("ncu-gpu0"))
        return first, second

    first, second = asyncio.run(body())
    # The first worker loads for 0.5 s (ECHO_WARM_S) after the job asked for it.
    assert first["ncu:wait"] >= 0.4
    assert second["ncu:wait"] < 0.2
