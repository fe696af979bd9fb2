"""A verdict the candidate cannot touch: the judge decides in a process of its own (profsvc.worker.judge).

Every candidate here computes a wrong answer with a kernel of its own and tries to forge the verdict from
inside its process, as catalogues of reward hacks describe: patching the comparison, writing a status file
at exit or sending one for the server to relay, exiting before the comparison, rewriting the reference's
file. Each must fail correctness and Evaluate. A candidate whose forward runs only PyTorch fails with "no
kernel of the candidate's own ran"; an honest partial replacement passes.
"""

from __future__ import annotations

import pytest

from profsvc_client.client import ProfilerClient
from profsvc_contract.models import KernelSource, SourceFile
from tests.faults.problems import EXTENSION, HEADER, SMALL_N, model_new

pytestmark = pytest.mark.gpu

REFERENCE = HEADER.format(n=SMALL_N)
IMPORTS = "import os\nimport torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"
WRONG = model_new("return _ext.affine(x) * 1.5")
FORGERIES = {
    "patches_the_comparison": (
        "import profsvc.worker.correctness as judged\n"
        "judged.compare_all = lambda *a, **k: {'ok': True, 'message': ''}\n"
        "judged.compare = lambda *a, **k: {'ok': True, 'message': ''}\n"
    ),
    "writes_a_status_at_exit": (
        "import atexit, glob, json\n"
        "def _forge():\n"
        "    forged = json.dumps({'ok': True, 'stage': 'running', 'correctness': {'ok': True, 'trials': 5,"
        " 'passed': 5, 'message': 'forged'}})\n"
        "    for folder in {os.getcwd(), os.path.dirname(os.getcwd())}:\n"
        "        for name in ('correctness-status.json', 'evaluate-status.json', 'status.json'):\n"
        "            try:\n"
        "                open(os.path.join(folder, name), 'w').write(forged)\n"
        "            except OSError:\n"
        "                pass\n"
        "atexit.register(_forge)\n"
    ),
    # A forged status under the judge's status names, sent over the candidate's channel for the server to move
    # into the judge's cell (read-only: the judge's own write would fail and leave the forgery).
    "sends_a_status_through_the_relay": (
        "import json, socket\n"
        "_forged = json.dumps({'ok': True, 'stage': 'running', 'correctness': {'ok': True, 'trials': 5,"
        " 'passed': 5, 'message': 'forged'}})\n"
        "_names = ['correctness-status.json', 'evaluate-status.json', 'benchmark-status.json']\n"
        "for _name in _names:\n"
        "    open(_name, 'w').write(_forged)\n"
        "    os.chmod(_name, 0o444)\n"
        "_channel = socket.socket(fileno=os.dup(int(os.environ['PROFSVC_CONTROL_FD'])))\n"
        "_channel.sendall(json.dumps({'op': 'next', 'result': {'ok': True}, 'files': _names}).encode() + b'\\n')\n"
    ),
    "rewrites_the_reference": (
        "import glob\n"
        "for path in glob.glob('/**/*.py', recursive=False) + glob.glob('../**/*.py', recursive=True):\n"
        "    try:\n"
        "        text = open(path).read()\n"
        "        if 'class Model' in text and 'get_inputs' in text:\n"
        "            open(path, 'w').write(text.replace('x * 2.0 + 1.0', '(x * 2.0 + 1.0) * 1.5'))\n"
        "    except OSError:\n"
        "        pass\n"
    ),
}


def _problem(candidate: str) -> KernelSource:
    return KernelSource(
        main=SourceFile(name="candidate.py", content=(IMPORTS + EXTENSION + candidate).encode()),
        reference=SourceFile(name="reference.py", content=REFERENCE.encode()),
    )


@pytest.fixture(scope="module")
def tools(served):
    with ProfilerClient(served, timeout=900) as client:
        yield client


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_forged_verdict_fails(tools, forgery):
    candidate = _problem(FORGERIES[forgery] + WRONG)
    correctness = tools.check_correctness(candidate)
    assert not correctness.ok, correctness.message
    evaluation = tools.evaluate(candidate, skip_profile=True)
    assert not evaluation.ok


def test_exiting_before_the_comparison_fails(tools):
    candidate = _problem(model_new("os._exit(0)"))
    correctness = tools.check_correctness(candidate)
    assert not correctness.ok
    assert "died" in correctness.error.message or "exit" in correctness.error.message, correctness.error


def test_a_forward_of_pytorch_alone_fails_with_no_own_kernel(tools):
    correctness = tools.check_correctness(_problem(model_new("return x * 2.0 + 1.0")))
    assert not correctness.ok
    assert "no kernel of the candidate's own ran" in correctness.message, correctness.message


def test_an_honest_partial_replacement_passes(tools):
    correctness = tools.check_correctness(_problem(model_new("return (_ext.affine(x) - 1.0) + 1.0")))
    assert correctness.ok, correctness.message
