"""What a job leaves for the server to read or remove, and what it sends on its control channel, against a real
jailed server on loopback: a status that is a link to a read that never ends or gigabytes, a folder nested
thousands deep, lines of millions of values. Each costs the server nothing, and it answers the next request."""

from __future__ import annotations

import subprocess
import time

import pytest

from profsvc.config import Limits
from profsvc_client.client import ProfilerClient
from tests.security.test_jail import BENIGN, SECRET, _served_jailed, _source

# Each module runs at import in a compile job; what it could not do shows as an error naming it.
STATUS_LINK = r"""
import os, sys
status = os.path.join(os.getcwd(), "compile-status.json")
if os.path.lexists(status):
    os.unlink(status)
os.mkfifo("never")  # no one writes it: a read of it blocks for good, as one of /proc/kmsg does
os.symlink(os.path.join(os.getcwd(), "never"), status)
print("PLANTED", file=sys.stderr, flush=True)
os._exit(0)
"""
STATUS_HUGE = r"""
import os, sys
with open("compile-status.json", "w") as status:
    status.write('{"ok": true, "stage": "running", "message": "')
    for _ in range(64):
        status.write("A" * (1 << 20))
    status.write('"}')
print("PLANTED", file=sys.stderr, flush=True)
os._exit(0)
"""
NESTED = r"""
import os
os.makedirs("deep", exist_ok=True)
os.chdir("deep")
for _ in range(3000):
    os.mkdir("d")
    os.chdir("d")
open("payload", "wb").write(os.urandom(1 << 20))
raise RuntimeError("NESTED 3000 deep")
"""
FLOOD = r"""
import json, os, socket
channel = socket.socket(fileno=os.dup(int(os.environ["PROFSVC_CONTROL_FD"])))
replies = []
for _ in range(4):
    channel.sendall(b'{"op": "build", "x": [' + b"[]," * 2_000_000 + b'[]]}\n')
    replies.append(channel.makefile("rb").readline().decode().strip())
raise RuntimeError("FLOOD " + json.dumps(replies))
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with _served_jailed(tmp_path_factory.mktemp("leftovers"), Limits(job_tasks=256)) as served:
        yield served


def _text(result) -> str:
    return "\n".join([*(d.message for d in result.diagnostics), result.log])


@pytest.mark.parametrize("module", [STATUS_LINK, STATUS_HUGE], ids=["link to a read that never ends", "64 MiB"])
def test_a_status_the_job_planted_is_refused_at_once(served, module):
    target, *_ = served
    with ProfilerClient(target, token=SECRET, timeout=120) as client:
        start = time.monotonic()
        planted = client.compile(_source("planted.py", module))
        assert time.monotonic() - start < 60
        assert not planted.ok and "PLANTED" in _text(planted), _text(planted)[-2000:]
        assert "not one the harness wrote" in _text(planted)
        assert client.compile(_source("after.py", BENIGN)).ok


def test_a_folder_nested_thousands_deep_is_removed_and_the_server_answers_on(served):
    target, config, *_ = served
    with ProfilerClient(target, token=SECRET, timeout=300) as client:
        nested = client.compile(_source("nested.py", NESTED))
        assert not nested.ok and "NESTED 3000 deep" in _text(nested), _text(nested)[-2000:]
        assert client.compile(_source("after_nested.py", BENIGN)).ok
    deadline = time.monotonic() + 60

    def left() -> str:  # find walks any depth (pathlib's walk recurses once per level)
        found = subprocess.run(["find", str(config.state_dir), "-name", "deep"], capture_output=True, text=True)
        return found.stdout.strip()

    while left():
        assert time.monotonic() < deadline, f"the nested folder is still on disk: {left()}"
        time.sleep(0.5)


def test_lines_of_millions_of_lists_are_refused_unparsed(served):
    target, *_ = served
    with ProfilerClient(target, token=SECRET, timeout=300) as client:
        start = time.monotonic()
        flooded = client.compile(_source("flood.py", FLOOD))
        assert "FLOOD" in _text(flooded), _text(flooded)[-2000:]
        assert _text(flooded).count("the request holds over") >= 4
        assert time.monotonic() - start < 60
        assert client.compile(_source("after_flood.py", BENIGN)).ok
