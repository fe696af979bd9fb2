"""Attacks from inside a job, against a real server on loopback: each must fail, and the server answer on.

The attacking module runs its attacks at import (a job's compile step imports it, on the CPU), records what
each one got, and raises with the record, which the compile answer carries back: exactly the channel a real
attacker would use to smuggle data out.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from profsvc.config import Limits, Security, ServerConfig
from profsvc.server.app import EmbeddedServer
from profsvc_client.client import ProfilerClient
from profsvc_contract.models import KernelSource, SourceFile
from tests.conftest import processes_with
from tests.faults.problems import GOOD
from tests.faults.problems import source as problem_source

pytest.importorskip("torch", reason="the compile step imports the module with PyTorch (the CPU build will do)")

SECRET = f"token-{uuid.uuid4().hex}"
# In the server's environment alone: a job's own (and its supervisor's) is made for it.
SERVER_ONLY = f"server-only-{uuid.uuid4().hex}"
DAEMON_SECONDS = "987.6543"
ATTACK = r"""
import ctypes, glob, json, os, signal, socket, time
found = {}

def attempt(name, action):
    try:
        found[name] = repr(action())[:400]
    except BaseException as error:
        found[name] = "blocked: " + type(error).__name__ + ": " + str(error)[:200]

def parents_cmdlines():
    out = []
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        out.append(open(path, "rb").read().replace(b"\0", b" ").decode(errors="replace"))
    return out

def token_from_cmdline():
    for line in parents_cmdlines():
        if "--token-file" in line:
            return open(line.split("--token-file", 1)[1].split()[0]).read()
    return "no --token-file seen: " + " | ".join(parents_cmdlines())[:300]

def write(path):
    with open(path, "w") as handle:
        handle.write("attack")
    return "wrote " + path

def poison():
    hits = []
    for path in glob.glob(CACHE + "/**/*.so", recursive=True):
        with open(path, "r+b") as handle:
            handle.write(b"\0")
        hits.append(path)
    return hits or "no library found to poison"

def setns():
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open("/proc/1/ns/net", os.O_RDONLY)
    if libc.setns(fd, 0) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return "joined"

def unix_socket():
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(HOST_SOCKET)
        return "connected"

def tcp():
    with socket.create_connection(("127.0.0.1", PORT), timeout=2):
        return "connected"

def kill_everyone():
    killed = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                os.kill(int(entry), signal.SIGKILL)
                killed.append(int(entry))
            except OSError:
                pass
    return killed

def daemon():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execvp("sleep", ["sleep", DAEMON_SECONDS])
        os._exit(0)
    time.sleep(0.5)
    return "started"

attempt("token_via_cmdline", token_from_cmdline)
attempt("token_file", lambda: open(TOKEN_FILE).read())
attempt("shadow", lambda: open("/etc/shadow").read())
attempt("server_environ", lambda: open(f"/proc/{os.getppid()}/environ", "rb").read().decode(errors="replace"))
attempt("other_jobs", lambda: [p for p in glob.glob(STATE + "/**/*.py", recursive=True) if os.getcwd() not in p])
attempt("host_cgroups", lambda: sorted(glob.glob("/sys/fs/cgroup/**/cgroup.procs", recursive=True)))
attempt("host_interfaces", lambda: sorted(os.listdir("/sys/class/net") + os.listdir("/sys/devices/virtual/net")))
attempt("write_etc", lambda: write("/etc/profsvc-attack"))
attempt("write_state", lambda: write(STATE + "/attack"))
attempt("write_cache", lambda: write(CACHE + "/attack"))
attempt("poison_cache", poison)
attempt("list_cache", lambda: os.listdir(CACHE))
attempt("cache_sources", lambda: glob.glob(CACHE + "/**/*.cpp", recursive=True))
attempt("setns", setns)
attempt("unshare", lambda: os.unshare(os.CLONE_NEWUSER) or "unshared")
attempt("host_unix_socket", unix_socket)
attempt("server_port", tcp)
attempt("daemon", daemon)
# Last: killing its parent (the job's supervisor) or everyone it sees may end this very job, so the record goes
# out first.
print("ATTACK " + json.dumps(found), flush=True)
attempt("kill_parent", lambda: os.kill(os.getppid(), signal.SIGKILL) or "sent")
attempt("kill_everyone", kill_everyone)
raise RuntimeError("ATTACK " + json.dumps(found))
"""
BENIGN = r"""
import torch
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="answer_ext", cpp_sources="int answer() { return ANSWER; }", functions=["answer"],
                   extra_cflags=["-DANSWER=42"])


class Model(torch.nn.Module):
    def forward(self, x):
        return x


class ModelNew(Model):
    pass


def get_inputs():
    return [torch.ones(4)]


def get_init_inputs():
    return []


assert _ext.answer() == 42, _ext.answer()
"""


@contextmanager
def _served_jailed(root: Path, limits: Limits) -> Iterator[tuple[str, ServerConfig, Path, Path]]:
    """A server with a token whose file lies under a tree every jail mounts (the repository), a host socket."""
    inside_tree = Path(__file__).resolve().parent / f".token-{uuid.uuid4().hex}"
    inside_tree.write_text(SECRET)
    host_socket = root / "host.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(host_socket))
    listener.listen()
    config = ServerConfig(
        state_dir=root / "state",
        security=Security(tokens={"tester": SECRET}, token_file=inside_tree),
        limits=limits,
    )
    os.environ["PROFSVC_TEST_SERVER_ONLY"] = SERVER_ONLY
    embedded = EmbeddedServer(config)
    target = embedded.start()
    try:
        yield target, config, inside_tree, host_socket
    finally:
        embedded.stop()
        listener.close()
        inside_tree.unlink(missing_ok=True)
        os.environ.pop("PROFSVC_TEST_SERVER_ONLY", None)


@pytest.fixture(scope="module")
def jailed(tmp_path_factory):
    with _served_jailed(tmp_path_factory.mktemp("jail"), Limits(job_tasks=256)) as served:
        yield served


# The names the server looks for before it runs anything: the attack runs at import, after them.
NAMES = "class Model: ...\nclass ModelNew: ...\ndef get_inputs(): ...\ndef get_init_inputs(): ...\n"


def _source(name: str, text: str) -> KernelSource:
    return KernelSource(main=SourceFile(name=name, content=(NAMES + text).encode()))


def _attack_record(result) -> dict[str, str]:
    text = "\n".join([*(d.message for d in result.diagnostics), result.log])
    match = re.search(r"ATTACK (\{.*\})", text)
    assert match, text[-2000:]
    return json.loads(match.group(1))


def _sleepers() -> list[int]:
    return processes_with(DAEMON_SECONDS)


def test_attacks_from_inside_a_job_all_fail_and_the_server_answers_on(jailed):
    target, config, token_file, host_socket = jailed
    cache = config.cache_dir
    with ProfilerClient(target, token=SECRET, timeout=600) as client:
        benign = client.compile(_source("benign.py", BENIGN))
        assert benign.ok, benign.diagnostics
        text = ATTACK
        for name, value in {
            "CACHE": str(cache),
            "STATE": str(config.state_dir),
            "TOKEN_FILE": str(token_file),
            "HOST_SOCKET": str(host_socket),
            "PORT": target.rsplit(":", 1)[1],
            "DAEMON_SECONDS": DAEMON_SECONDS,
        }.items():
            text = f"{name} = {value!r}\n" + text
        attacked = client.compile(_source("attack.py", text))
        record = _attack_record(attacked)
        leaked = {name: got for name, got in record.items() if SECRET in got}
        assert not leaked, leaked
        for name in ("token_file", "shadow", "write_etc", "write_state", "write_cache"):
            assert record[name].startswith("blocked"), (name, record[name])
        assert SERVER_ONLY not in record["server_environ"], record["server_environ"]
        assert record["setns"].startswith("blocked") and record["unshare"].startswith("blocked"), record
        assert record["host_unix_socket"].startswith("blocked") and record["server_port"].startswith("blocked")
        assert record["other_jobs"] in ("[]", "blocked"), record["other_jobs"]
        assert record["host_cgroups"] == "[]", record["host_cgroups"]
        assert record["host_interfaces"] == "[]" or record["host_interfaces"].startswith("blocked"), record
        assert record["poison_cache"].startswith("blocked") or "no library" in record["poison_cache"]
        # Another caller's build cannot be found: the cache is not listed, and its entries keep no sources.
        assert record["list_cache"].startswith("blocked: PermissionError"), record["list_cache"]
        assert record["cache_sources"] == "[]", record["cache_sources"]
        entries = [p for p in cache.iterdir() if p.is_dir() and p.name not in ("pch", "binding")]
        assert entries and all({f.suffix for f in e.iterdir()} <= {".so", ".json"} for e in entries), [
            sorted(f.name for f in e.iterdir()) for e in entries
        ]
        assert not Path("/etc/profsvc-attack").exists()
        assert not (config.state_dir / "attack").exists() and not (cache / "attack").exists()
        # The server is alive, its cache intact: the benign module's build still answers 42 (it asserts so).
        again = client.compile(_source("benign2.py", BENIGN.replace("x):\n        return x", "x):\n        return x ")))
        assert again.ok, again.diagnostics
        assert client.capabilities().isolation.startswith("bubblewrap")
    # Nothing of the job outlived it: the daemon it forked went with its jail.
    assert not _sleepers(), _sleepers()


def test_a_fork_bomb_meets_the_task_limit_and_the_server_answers_on(jailed):
    target, *_ = jailed
    bomb = (
        "import os\nfor _ in range(100000):\n    try:\n        os.fork()\n    except OSError:\n        break\n"
        "raise RuntimeError('forks stopped')\n"
    )
    with ProfilerClient(target, token=SECRET, timeout=600) as client:
        start = time.monotonic()
        result = client.compile(_source("bomb.py", bomb))
        # Every fork that got through raises and writes the status too: the answer is a failed compile.
        assert not result.ok
        assert client.compile(_source("benign3.py", BENIGN)).ok
        assert time.monotonic() - start < 300


def test_a_job_past_its_memory_limit_is_told_so_and_the_server_answers_on(tmp_path):
    # Room for a job that imports torch: on a GPU host, a CUDA build's import alone did not fit in 256 MiB (the
    # compile of `x = 1` was killed there, on an H100 host).
    limit = 2 << 30
    hog = "blocks = [b'x' * (64 << 20) for _ in range(64)]  # 4 GiB, every page written\n"
    with _served_jailed(tmp_path, Limits(job_tasks=256, job_memory_bytes=limit)) as (target, *_):
        with ProfilerClient(target, token=SECRET, timeout=600) as client:
            if "cgroup" not in client.capabilities().isolation:
                pytest.skip("this host gives jobs per-process limits only (no cgroup to count the whole job)")
            # A module that builds nothing fits under the limit: what meets it below is the hog's own memory.
            fits = client.compile(_source("fits.py", "x = 1\n"))
            assert fits.ok, [d.message for d in fits.diagnostics]
            result = client.compile(_source("hog.py", hog))
            assert not result.ok
            message = result.diagnostics[0].message
            # The kernel's own count, read from the job's cgroup: the limit it met, in the result's first line.
            assert "ran out of memory on the host" in message and "(2.0 GiB)" in message, message
            again = client.compile(_source("fits2.py", "x = 2\n"))
            assert again.ok, [d.message for d in again.diagnostics]


def test_a_jailed_process_has_no_capabilities_and_no_new_privileges(jailed):
    target, *_ = jailed
    probe = (
        "import os\nstatus = open('/proc/self/status').read().splitlines()\n"
        "wanted = [line for line in status if line.startswith(('CapEff', 'NoNewPrivs', 'Seccomp:'))]\n"
        "oom = open('/proc/self/oom_score_adj').read().strip()\n"
        "raise RuntimeError('STATUS ' + ' '.join(wanted) + f' uid={os.getuid()} oom_score_adj={oom}')\n"
    )
    with ProfilerClient(target, token=SECRET, timeout=600) as client:
        result = client.compile(_source("probe.py", probe))
    text = " ".join(d.message for d in result.diagnostics)
    assert "CapEff:\t0000000000000000" in text, text
    assert "NoNewPrivs:\t1" in text and "Seccomp:\t2" in text, text
    assert "oom_score_adj=1000" in text, text
    if os.geteuid() == 0:
        assert "uid=0" not in text, text


# The attacks again, from the measured call of a profile: inside ncu's jail, while counters are read. Killing its
# own parent here only ends its own job (ncu), so the server's reach is probed by its pid instead.
UNDER_NCU_LIMIT_S = 150.0
UNDER_NCU = """
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2


class ModelNew(Model):
    def forward(self, x):
        y = x * 2
        torch.cuda.synchronize()
        attack()
        return y


def get_inputs():
    return [torch.ones(1 << 20, device="cuda")]


def get_init_inputs():
    return []


def attack():
{attack}
"""


@pytest.mark.gpu
def test_attacks_under_ncu_all_fail_and_the_server_profiles_on(tmp_path):
    # A job limit the test can outlast: a profile held to it (a process of the job that ncu waits for) fails.
    limits = Limits(job_tasks=256, job_timeout_s=UNDER_NCU_LIMIT_S)
    with _served_jailed(tmp_path, limits) as (target, config, token_file, host_socket):
        _attack_under_ncu(target, config, token_file, host_socket)
    assert not _sleepers(), _sleepers()


def _attack_under_ncu(target: str, config: ServerConfig, token_file: Path, host_socket: Path) -> None:
    body = ATTACK.replace(
        'attempt("daemon", daemon)\n',
        'attempt("daemon", daemon)\n'
        'attempt("signal_server", lambda: os.kill(SERVER_PID, 0) or "visible")\n'
        # ncu's injection: libraries of its install (`nsight-compute` in every layout: /opt/nvidia/nsight-compute/V,
        # CUDA's nsight-compute-V) mapped into this process. ncu 2025.3.1 leaves no CUDA_INJECTION64_PATH here, and
        # `ncu` on PATH may be a wrapper script outside its install.
        'attempt("under_ncu", lambda: sorted({l.split()[-1] for l in open("/proc/self/maps")'
        ' if "nsight-compute" in l}))\n',
    ).replace(
        'attempt("kill_parent", lambda: os.kill(os.getppid(), signal.SIGKILL) or "sent")\n'
        'attempt("kill_everyone", kill_everyone)\n',
        "",
    )
    assert "signal_server" in body
    text = UNDER_NCU.format(attack="\n".join("    " + line for line in body.splitlines()))
    for name, value in {
        "CACHE": str(config.cache_dir),
        "STATE": str(config.state_dir),
        "TOKEN_FILE": str(token_file),
        "HOST_SOCKET": str(host_socket),
        "PORT": target.rsplit(":", 1)[1],
        "DAEMON_SECONDS": DAEMON_SECONDS,
        "SERVER_PID": os.getpid(),
    }.items():
        text = f"{name} = {value!r}\n" + text
    with ProfilerClient(target, token=SECRET, timeout=900) as client:
        start = time.monotonic()
        attacked = client.profile(KernelSource(main=SourceFile(name="attack_ncu.py", content=text.encode())))
        held = time.monotonic() - start
        assert held < UNDER_NCU_LIMIT_S, f"the attacked profile was held to the job limit ({held:.0f} s)"
        assert not attacked.ok and attacked.error.kind, attacked.error
        match = re.search(r"ATTACK (\{.*\})", attacked.error.message)
        assert match, attacked.error.message
        record = json.loads(match.group(1))
        assert record["under_ncu"].startswith("['"), record
        assert not {name: got for name, got in record.items() if SECRET in got}, record
        for name in ("token_file", "shadow", "write_etc", "write_state", "write_cache"):
            assert record[name].startswith("blocked"), (name, record[name])
        assert SERVER_ONLY not in record["server_environ"], record["server_environ"]
        for name in ("setns", "unshare", "host_unix_socket", "server_port", "signal_server"):
            assert record[name].startswith("blocked"), (name, record[name])
        assert record["other_jobs"] in ("[]", "blocked"), record["other_jobs"]
        assert record["host_cgroups"] == "[]", record["host_cgroups"]
        assert record["poison_cache"].startswith("blocked") or "no library" in record["poison_cache"]
        good = client.profile(problem_source(*GOOD[:2]))
        assert good.ok and good.kernels[0].name == "affine_kernel", good.error


def test_a_daemon_ends_with_its_job_on_a_host_without_the_jail(tmp_path):
    # No PID namespace to end it here: the worker itself takes the daemon in and ends it (worker/descendants.py).
    daemon = (
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        f"        os.execvp('sleep', ['sleep', {DAEMON_SECONDS!r}])\n    os._exit(0)\ntime.sleep(0.5)\n"
    )
    embedded = EmbeddedServer(ServerConfig(state_dir=tmp_path / "state", jail="off"))
    try:
        with ProfilerClient(embedded.start(), timeout=600) as client:
            result = client.compile(_source("daemon.py", daemon))
            assert result.ok, result.diagnostics
            assert not _sleepers(), "the daemon outlived its job"
            assert client.compile(_source("benign4.py", BENIGN)).ok
    finally:
        embedded.stop()


def test_a_daemon_ends_with_a_job_killed_at_its_limit_on_a_host_without_the_jail(tmp_path):
    # The server's kill takes the supervisor too: what lies below it is listed first and killed with it.
    daemon = (
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        f"        os.execvp('sleep', ['sleep', {DAEMON_SECONDS!r}])\n    os._exit(0)\ntime.sleep(600)\n"
    )
    config = ServerConfig(state_dir=tmp_path / "state", jail="off", limits=Limits(compile_timeout_s=8))
    embedded = EmbeddedServer(config)
    try:
        with ProfilerClient(embedded.start(), timeout=600) as client:
            result = client.compile(_source("stuck.py", daemon))
            assert not result.ok and "time limit" in result.diagnostics[0].message, result.diagnostics
            assert not _sleepers(), "the daemon outlived its job"
    finally:
        embedded.stop()


@pytest.fixture(autouse=True)
def _no_sleepers_left():
    yield
    for pid in _sleepers():
        os.kill(pid, signal.SIGKILL)


def test_the_server_refuses_to_start_without_a_jail_unless_told(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFSVC_BWRAP", str(tmp_path / "no-bwrap"))
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(OSError, match="cannot jail jobs"):
        EmbeddedServer(ServerConfig(state_dir=tmp_path / "state", warm_workers=False)).start()
    assert shutil.which("bwrap") is None
