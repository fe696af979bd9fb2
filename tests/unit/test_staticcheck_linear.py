"""The static check and the own-kernel scan take time in proportion to the source, however it is written.

A caller chooses the text: a pattern that looks to the end of the text from each of many starting points, or a
scan that starts again at each of many kernels, is quadratic, and a source of the server's largest size (1 MiB)
then holds a CPU for hours (a StaticCheck of 132 KB built of `__global__ ` repeated held one for 66 s, and the
server with it). Each text below repeats what one pattern or scan looks for, with nothing that completes it, to
the server's size limit, and to a quarter of it. A text whose check takes over 2 s at the limit (a module of 65,000
calls in forward, which every AST detector walks) must take at most 8 times what a quarter of it takes: 4 for a
linear pass, 16 for a quadratic one (8 between them, for a machine busy with other work).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from profsvc.config import Limits

LIMIT_BYTES = Limits().max_source_bytes
BOUND_S = 2.0
LINEAR_RATIO = 8.0

# Put inside a load_inline string (the C++ checks) or used as the module's text (the Python ones).
CPP_ATOMS = {
    "qualifiers": "__global__ ",
    "unclosed_parameters": "__global__ void k(",
    "unclosed_body": "__global__ void k() {",
    "namespaces": "torch::",
    "calls_on_many_lines": "torch::add(x, y);\n",
    "unclosed_comment": "/*",
    "unclosed_template": "static std::map<",
    "statics": "static int a;\n",
    "copies": "memcpy(",
    "compared_pointers": "a == b ",
    "host_calls": "f(",
    "launches": "k<<<",
    # Literals that never close: each must be read once, not again from every later quote.
    "escaped_quotes": '\\"',
    "escaped_apostrophes": "\\'",
    "raw_strings": 'R"(',
    "raw_delimiters": 'R"abcdefghijklmnopq',
}
PY_ATOMS = {
    "autotune": "@triton.autotune\n",
    "jit": "@triton.jit\n",
    "raw_kernel": "RawKernel(",
}

HEAD = (
    "import torch\nfrom torch.utils.cpp_extension import load_inline\n"
    "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return ext.f(x)\n"
)

# Run in a child: a regression would not return, and the child's timeout turns that into a failure.
CHILD = """
import json, sys, time
from profsvc.staticcheck import check_source
from profsvc.staticcheck.own_kernels import own_kernel_names
seconds = {}
for size, texts in json.loads(sys.stdin.read()).items():
    for name, text in texts.items():
        start = time.perf_counter()
        check_source(text, "candidate.py")
        own_kernel_names(text)
        seconds.setdefault(name, {})[size] = time.perf_counter() - start
print(json.dumps(seconds))
"""


def _fill(atom: str, room: int) -> str:
    return atom * (room // len(atom))


def _texts(size: int) -> dict[str, str]:
    texts = {}
    for name, atom in CPP_ATOMS.items():
        tail = "\next = load_inline(name='e', cpp_sources=src, cuda_sources=src, functions=['f'])\n"
        room = size - len(HEAD) - len(tail) - 32
        # A raw triple-quoted string keeps the atom's newlines as lines of the module.
        texts[name] = HEAD + 'src = r"""#include <x>\n' + _fill(atom, room) + '"""' + tail
    for name, atom in PY_ATOMS.items():
        texts[name] = _fill(atom, size)
    # Half the budget in forward's calls of an extension function, half in C++ that names that function: each
    # call's search of the C++ for its definition was a pass over the whole string.
    half = size // 2
    forward = "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n" + _fill("        ext.f(x)\n", half)
    cpp = 'src = r"""#include <x>\n' + _fill("=f(x);\n", half - 256) + '"""\n'
    load = "ext = load_inline(name='e', cpp_sources=src, cuda_sources=src, functions=['f'])\n"
    imports = "import torch\nfrom torch.utils.cpp_extension import load_inline\n"
    texts["calls_in_forward"] = imports + cpp + load + forward
    # Chains declared in reverse order, so that a search to a fixed point learns one link per pass over the module
    # (found by red-teaming the server): hand-offs of an extension, and classes deriving from torch.nn or the reference.
    build = "load_inline(name='e', cpp_sources='', functions=['f'])"
    for name, (link, last) in CHAINS.items():
        count = (size - 256) // len(link.format(i=99999, j=99999))
        lines = [link.format(i=i, j=i + 1) for i in range(count)]
        texts[name] = imports + "".join(lines) + last.format(n=count, build=build)
    return texts


CHAINS = {
    "assigned_chain": ("a{i} = a{j}\n", "a{n} = {build}\n"),
    "subscript_chain": ("b{i} = b{j}[0]\n", "b{n} = [{build}]\n"),
    "returned_chain": ("def f{i}():\n    return f{j}()\n", "def f{n}():\n    return {build}\n"),
    "module_class_chain": ("class C{i}(C{j}): pass\n", "class C{n}(torch.nn.Module): pass\n"),
    "reference_class_chain": (
        "class R{i}(R{j}): pass\n",
        "class R{n}(Model): pass\nclass Model(torch.nn.Module): pass\nclass ModelNew(R0): pass\n",
    ),
}


@pytest.fixture(scope="module")
def seconds() -> dict[str, dict[str, float]]:
    texts = {str(size): _texts(size) for size in (LIMIT_BYTES // 4, LIMIT_BYTES)}
    assert all(len(t.encode()) <= LIMIT_BYTES for t in texts[str(LIMIT_BYTES)].values())
    done = subprocess.run(
        [sys.executable, "-c", CHILD], input=json.dumps(texts), capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("name", [*CPP_ATOMS, *PY_ATOMS, "calls_in_forward", *CHAINS])
def test_a_source_at_the_size_limit_is_checked_in_linear_time(seconds: dict[str, dict[str, float]], name: str) -> None:
    full, quarter = seconds[name][str(LIMIT_BYTES)], seconds[name][str(LIMIT_BYTES // 4)]
    assert full < BOUND_S or full / quarter <= LINEAR_RATIO, (
        f"{name}: {full:.2f} s at the limit, {quarter:.2f} s at a quarter"
    )
