"""StaticCheck: honest candidates pass, each gaming candidate is caught by the rule it names, the rule table is strict.

The corpus lives in tests/staticcheck_corpus/ (its README says what each folder holds):
- gaming/ one file per trick, named `<rule_id>__<variant>.py` and starting with `# rule: <rule_id>`; a line ending
  in `# <-` (or `// <-` inside CUDA source) is a line where that rule must fire. Lint fails it under the default
  policy, unless a `# lint: warn` line says it passes with warnings (a partial replacement).
- honest/ real custom-kernel answers (the seed fixtures among them) with no finding at all, unless `# lint: warn`
  says they pass with warnings; a look-alike of a trick is named `<rule_id>__<variant>.py` after the rule it
  must not trip.
- runtime/ tricks with no static sign, named `<guard>__<variant>.py` and starting with `# runtime: <guard>`: lint
  passes them (warnings at most); the worker's runtime guards are what catch them.
"""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest

from profsvc.metrics.tables import load_table
from profsvc.staticcheck import RuleId, RuleTableError, Severity, check_source, load_rules, parse_rules
from profsvc.staticcheck.cppsource import blank_comments

CORPUS = Path(__file__).resolve().parents[1] / "staticcheck_corpus"
HONEST = sorted((CORPUS / "honest").glob("*.py"))
GAMING = sorted((CORPUS / "gaming").glob("*.py"))
RUNTIME = sorted((CORPUS / "runtime").glob("*.py"))
_HEADER = re.compile(r"# rule: (\w+)\n")
_RUNTIME_HEADER = re.compile(r"# runtime: (\w+)\n")
_WARN = re.compile(r"^# lint: warn$", re.MULTILINE)
_MARK = re.compile(r"(?:#|//) <-$")
# What the worker's runtime guards report, one per kind lint cannot see.
RUNTIME_GUARDS = {
    "no_custom_kernel_ran",
    "output_not_written",
    "inputs_changed",
    "results_from_cache",
    "work_left_running",
}


def _named_rule(path: Path) -> str:
    match = _HEADER.match(path.read_text())
    assert match, f"{path.name} must start with '# rule: <rule_id>'"
    assert path.name.startswith(f"{match.group(1)}__"), f"{path.name} must be named after its rule"
    return match.group(1)


def _marked_lines(text: str) -> list[int]:
    return [number for number, line in enumerate(text.splitlines(), 1) if _MARK.search(line.rstrip())]


def _verdict(text: str, name: str) -> str:
    """Lint's verdict under the default policy: fail (an error), warn (warnings only) or clean."""
    severities = {f.severity for f in check_source(text, name)}
    return "fail" if Severity.ERROR in severities else "warn" if severities else "clean"


# ---- the corpus ---------------------------------------------------------------


def test_corpus_holds_the_seed_fixtures_and_enough_examples():
    names = {p.name for p in HONEST}
    assert {"seed47.py", "big.py"} <= names
    assert len(HONEST) >= 5
    assert len(GAMING) >= len(RuleId)


@pytest.mark.parametrize("path", HONEST, ids=lambda p: p.name)
def test_honest_candidate_gets_its_verdict(path):
    text = path.read_text()
    findings = check_source(text, path.name)
    listed = [f"{f.line}: {f.rule_id}: {f.message}" for f in findings]
    if _WARN.search(text):
        assert _verdict(text, path.name) == "warn", listed
    else:
        assert listed == []


@pytest.mark.parametrize("path", [p for p in HONEST if "__" in p.name], ids=lambda p: p.name)
def test_look_alike_is_named_after_a_rule_it_does_not_trip(path):
    rule = path.name.split("__")[0]
    assert rule in {str(r) for r in RuleId}, f"{path.name} is named after no rule"
    assert rule not in {f.rule_id for f in check_source(path.read_text(), path.name)}


@pytest.mark.parametrize("path", GAMING, ids=lambda p: p.name)
def test_gaming_candidate_is_caught_by_the_rule_it_names(path):
    rule = _named_rule(path)
    text = path.read_text()
    findings = check_source(text, path.name)
    fired_on = {f.line for f in findings if f.rule_id == rule}
    assert fired_on, f"{rule} did not fire; found {[(f.line, f.rule_id) for f in findings]}"
    missed = [line for line in _marked_lines(text) if line not in fired_on]
    assert missed == [], f"{rule} fired on lines {sorted(fired_on)}, not on the marked lines {missed}"


@pytest.mark.parametrize("path", GAMING, ids=lambda p: p.name)
def test_gaming_candidate_gets_its_verdict(path):
    text = path.read_text()
    assert _verdict(text, path.name) == ("warn" if _WARN.search(text) else "fail")


def test_every_rule_has_a_gaming_example():
    assert {_named_rule(p) for p in GAMING} == {str(rule) for rule in RuleId}


@pytest.mark.parametrize("path", RUNTIME, ids=lambda p: p.name)
def test_runtime_only_trick_passes_lint(path):
    match = _RUNTIME_HEADER.match(path.read_text())
    assert match and match.group(1) in RUNTIME_GUARDS and path.name.startswith(f"{match.group(1)}__")
    assert _verdict(path.read_text(), path.name) != "fail"


def test_every_runtime_guard_has_an_example():
    assert {p.name.split("__")[0] for p in RUNTIME} == RUNTIME_GUARDS


@pytest.mark.parametrize("path", HONEST + GAMING + RUNTIME, ids=lambda p: p.name)
def test_findings_follow_the_table(path):
    table = load_rules()
    text = path.read_text()
    line_count = len(text.splitlines())
    for finding in check_source(text, path.name):
        rule = table[finding.rule_id]
        assert finding.severity is rule.severity
        assert "\n" not in finding.message
        assert finding.message.startswith(rule.reason.split("{detail}")[0])
        assert 1 <= finding.line <= line_count
        assert finding.column >= 1


def test_findings_are_sorted_and_one_per_rule_and_line():
    findings = check_source((CORPUS / "gaming" / "result_caching__data_ptr_dict.py").read_text())
    positions = [(f.line, f.column) for f in findings]
    assert positions == sorted(positions)
    assert len({(f.rule_id, f.line) for f in findings}) == len(findings)


# ---- particular behaviour -------------------------------------------------------

_FP32_REFERENCE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.nn.functional.layer_norm(x, x.shape[-1:])

def get_inputs():
    return [torch.randn(4096, 2048, device="cuda")]
"""


@pytest.mark.parametrize("repeats", [19, 20, 50])
def test_a_rule_lists_at_most_twenty_lines_and_counts_the_rest(repeats):
    # One trick on each of `repeats` lines (lines 3 onwards): the first 20 are listed, the 20th counts the others.
    source = (
        "import torch\nimport torch.nn as nn\n"
        + "torch.backends.cuda.matmul.allow_tf32 = True\n" * repeats
        + "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
    )
    findings = [f for f in check_source(source) if f.rule_id == "precision_downcast"]
    assert [f.line for f in findings] == list(range(3, 3 + min(repeats, 20)))
    counted = [f.message for f in findings if "more lines not listed" in f.message]
    assert counted == ([] if repeats <= 20 else [findings[-1].message])
    assert repeats <= 20 or findings[-1].message.endswith(f"(and {repeats - 20} more lines not listed).")


# C++ text and what stays of it once comments are blanked, worked out by C++'s lexing rules: a literal's "/*" or
# "//" starts no comment; a raw string ends only at its own delimiter; a quote after a digit is a separator.
BLANKED = {
    'a = "/*"; b(); /* c */ d': 'a = "/*"; b();         d',
    "char q = '\"'; /* c */ e": "char q = '\"';         e",
    's = "a \\" /* b"; f(); // g': 's = "a \\" /* b"; f();     ',
    'r = R"(" /*)"; live(); /* c */': 'r = R"(" /*)"; live();        ',
    'r = R"xy(a)" /* )xy"; live(); // c': 'r = R"xy(a)" /* )xy"; live();     ',
    "n = 1'000'000; // c\nm": "n = 1'000'000;     \nm",
    'open "no close /* x\nnext(); /* c */': 'open "no close /* x\nnext();        ',
    'f("a") /* R"( */ g': 'f("a")           g',
}


@pytest.mark.parametrize("text", BLANKED)
def test_comments_are_blanked_and_literals_kept(text):
    assert blank_comments(text) == BLANKED[text]


def test_precision_is_judged_against_the_reference():
    candidate = (CORPUS / "honest" / "layernorm_half.py").read_text()
    # Its own Model is fp16, so without a separate reference nothing is a downcast.
    assert not [f for f in check_source(candidate) if f.rule_id == RuleId.PRECISION_DOWNCAST]
    against_fp32 = [f for f in check_source(candidate, reference_text=_FP32_REFERENCE)]
    downcasts = [f for f in against_fp32 if f.rule_id == RuleId.PRECISION_DOWNCAST]
    assert downcasts, "an fp16 kernel for an fp32 reference is a downcast"
    assert all("the reference does not use float16" in f.message for f in downcasts)
    half_reference = _FP32_REFERENCE.replace('device="cuda")', 'device="cuda").half()')
    assert not [f for f in check_source(candidate, reference_text=half_reference) if f.rule_id == "precision_downcast"]


def test_gaming_downcast_is_excused_only_by_a_reference_that_uses_it():
    candidate = (CORPUS / "gaming" / "precision_downcast__half_inputs.py").read_text()
    rules = {f.rule_id for f in check_source(candidate, reference_text="x = torch.randn(4, dtype=torch.float16)")}
    assert RuleId.PRECISION_DOWNCAST not in rules
    rules = {f.rule_id for f in check_source(candidate, reference_text="x = torch.randn(4, dtype=torch.bfloat16)")}
    assert RuleId.PRECISION_DOWNCAST in rules


@pytest.mark.parametrize(
    ("source", "line"),
    [("import torch\ndef f(:\n    pass\n", 2), ("class ModelNew(\n", 1), ("x = 1\0\n", 1)],
    ids=["bad-signature", "unclosed", "null-byte"],
)
def test_unparsable_candidate_is_one_syntax_error(source, line):
    findings = check_source(source, "k.py")
    assert [(f.rule_id, f.severity, f.line) for f in findings] == [("syntax_error", Severity.ERROR, line)]
    assert "k.py" in findings[0].message


_PREAMBLE = """
import os
import numpy as np
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
_ext = load_inline(
    name="e",
    cpp_sources="",
    cuda_sources="__global__ void k(float* y) { y[threadIdx.x] = 0.0f; }\\nvoid run() { k<<<1, 32>>>(nullptr); }",
    functions=["softmax", "run"],
)
"""


@pytest.mark.parametrize(
    "body",
    [
        # glue around a kernel call: allocation, views, pointers, parameter reads, the current stream
        "class ModelNew(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.proj = nn.Linear(4, 4)\n"
        "    def forward(self, x):\n"
        "        out = torch.empty(x.shape[0], 4, device=x.device, dtype=x.dtype)\n"
        "        n = int(np.prod(x.shape))\n"
        "        _ext.run(x.contiguous().view(-1), self.proj.weight.data_ptr(), out, n,\n"
        "                 torch.cuda.current_stream().cuda_stream)\n"
        "        return out.view(x.shape[0], 4)\n",
        # an extension function that happens to share a torch op's name
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return _ext.softmax(x)\n",
        # settings and environment writes at module level, a __main__ block
        'torch.backends.cudnn.benchmark = True\nos.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"\n'
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return _ext.run(x)\n"
        'if __name__ == "__main__":\n    print(ModelNew()(torch.ones(2)))\n',
        # a side stream joined back before forward returns
        "class ModelNew(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.s = torch.cuda.Stream()\n"
        "    def forward(self, x):\n"
        "        with torch.cuda.stream(self.s):\n            y = _ext.run(x)\n"
        "        torch.cuda.current_stream().wait_stream(self.s)\n        return y\n",
        # a custom autograd Function wrapping the kernel
        "class _Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        "        ctx.save_for_backward(x)\n        return _ext.run(x)\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return _Fn.apply(x)\n",
        # an event recorded on the side stream and waited for on the host
        "class ModelNew(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.s = torch.cuda.Stream()\n"
        "    def forward(self, x):\n        done = torch.cuda.Event()\n"
        "        with torch.cuda.stream(self.s):\n            y = _ext.run(x)\n            done.record()\n"
        "        done.synchronize()\n        return y\n",
        # forward's own blocks: an in-module nn.Module whose forward runs the kernel
        "class Block(nn.Module):\n    def forward(self, x):\n        return _ext.run(x)\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.blocks = nn.ModuleList([Block() for _ in range(2)])\n"
        "    def forward(self, x):\n        for block in self.blocks:\n            x = block(x)\n        return x\n",
        # a plain launcher object of the module's own, held on self and at module level
        "class Launcher:\n    def run(self, x):\n        return _ext.run(x)\n_LAUNCHER = Launcher()\n"
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.launcher = Launcher()\n"
        "    def forward(self, x):\n        return self.launcher.run(_LAUNCHER.run(x))\n",
        # its own frame, and a name rebound to a view of itself (the lookup must not loop)
        "import sys\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
        "        name = sys._getframe(0).f_code.co_name\n        x = x.contiguous()\n        x = x.view(-1)\n"
        "        return _ext.run(x, name)\n",
    ],
    ids=["glue", "extension-named-softmax", "module-settings", "joined-stream", "autograd-function",
         "recorded-event", "own-blocks", "launcher-object", "own-frame"],
)  # fmt: skip
def test_honest_idioms_are_not_flagged(body):
    assert check_source(_PREAMBLE + body) == []


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        ("class ModelNew(nn.Module):\n    def forward(self, x):\n        return x.matmul(x)\n", "torch_fallback"),
        ("class ModelNew(nn.Module):\n    def forward(self, x):\n        return self._go(x)\n"
         "    def _go(self, x):\n        return torch.softmax(x, -1)\n", "torch_fallback"),
        ("class ModelNew(nn.Module):\n    def forward(self, x):\n        return nn.Linear(4, 4).cuda()(x)\n",
         "torch_fallback"),
        ("ModelNew = nn.Linear\n", "torch_fallback"),
        ("class ModelNew(nn.Module):\n    def forward(self, x):\n        self.n = self.n + 1\n"
         "        return _ext.run(x) if self.n < 3 else x\n", "warmup_divergence"),
        ("class ModelNew(nn.Module):\n    def forward(self, x):\n        ModelNew.last = _ext.run(x)\n"
         "        return ModelNew.last\n", "result_caching"),
        ("import inspect\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
         "        return inspect.stack()[1].frame.f_locals['ref']\n", "harness_introspection"),
        ("class ModelNew(nn.Module):\n"
         "    def __init__(self):\n        super().__init__()\n"
         "        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])\n"
         "    def forward(self, x):\n        for layer in self.layers:\n            x = layer(x)\n        return x\n",
         "torch_fallback"),
        ("class _Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
         "        return torch.mm(x, x)\n"
         "class ModelNew(nn.Module):\n    def forward(self, x):\n        return _Fn.apply(x)\n", "torch_fallback"),
        # the only wait comes before the side-stream work; an unrecorded event's synchronize joins nothing
        ("class ModelNew(nn.Module):\n    def forward(self, x):\n        torch.cuda.synchronize()\n"
         "        with torch.cuda.stream(torch.cuda.Stream()):\n            return _ext.run(x)\n", "side_stream"),
        ("class ModelNew(nn.Module):\n    def forward(self, x):\n        s = torch.cuda.Stream()\n"
         "        e = torch.cuda.Event()\n        with torch.cuda.stream(s):\n            y = _ext.run(x)\n"
         "        e.synchronize()\n        return y\n", "side_stream"),
        ("import sys\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
         "        return sys._getframe(2).f_code\n", "harness_introspection"),
        ("class Block(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
         "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.b = Block()\n"
         "    def forward(self, x):\n        return self.b(_ext.run(x))\n", "torch_fallback"),
        ("class ModelNew(nn.Module):\n    def forward(self, x):\n        return getattr(torch, 'mat' + 'mul')(x, x)\n",
         "torch_fallback"),
        ("class ModelNew(nn.Module):\n    def forward(self, x):\n        x[0] = 0\n        return _ext.run(x)\n",
         "input_mutation"),
    ],
    ids=["tensor-method", "private-method", "layer-built-in-forward", "bound-to-layer", "counter-ifexp",
         "class-attribute-stash", "inspect-stack", "module-list-loop", "autograd-function", "wait-before-work",
         "unrecorded-event", "callers-frame", "block-forward", "assembled-getattr", "input-item-write"],
)  # fmt: skip
def test_variants_are_caught(body, rule):
    findings = check_source(_PREAMBLE + body)
    assert rule in {f.rule_id for f in findings}, findings


_TRITON_MATMUL = """
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def _mm(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs[:, None] * BLOCK + offs[None, :])
    b = tl.load(b_ptr + offs[:, None] * BLOCK + offs[None, :])
    tl.store(c_ptr + offs[:, None] * BLOCK + offs[None, :], tl.dot(a, b))

class ModelNew(nn.Module):
    def forward(self, a, b):
        c = torch.empty_like(a)
        _mm[(1,)](a, b, c, BLOCK=32)
        return c
"""


@pytest.mark.parametrize(
    ("reference", "flagged"),
    [("x = torch.randn(32, 32)", True), ("x = torch.randn(32, 32, dtype=torch.float16)", False), ("", False)],
    ids=["fp32-reference", "fp16-reference", "no-reference"],
)
def test_triton_dot_is_tf32_only_against_an_fp32_reference(reference, flagged):
    # Triton's tl.dot rounds fp32 operands to TF32 unless input_precision="ieee"; fp16 operands are fp16 already,
    # and without a reference the operands' dtype is unknown.
    findings = check_source(_TRITON_MATMUL, reference_text=reference)
    assert any(f.rule_id == RuleId.PRECISION_DOWNCAST and "tf32" in f.message for f in findings) is flagged
    ieee = _TRITON_MATMUL.replace("tl.dot(a, b)", 'tl.dot(a, b, input_precision="ieee")')
    assert not [f for f in check_source(ieee, reference_text=reference) if f.rule_id == RuleId.PRECISION_DOWNCAST]


def test_extension_built_from_a_file_is_trusted_to_launch():
    # Sources the checker cannot read (a file, a download) are taken at their word: only literals are judged.
    source = _PREAMBLE.replace('cuda_sources="__global__', 'cuda_sources=open("k.cu").read() + "__global__')
    source += "class ModelNew(nn.Module):\n    def forward(self, x):\n        return _ext.run(x)\n"
    assert check_source(source) == []
    empty = _PREAMBLE.replace("y[threadIdx.x] = 0.0f;", "")
    empty += "class ModelNew(nn.Module):\n    def forward(self, x):\n        return _ext.run(x)\n"
    assert [f.rule_id for f in check_source(empty)] == ["no_custom_kernel"]


def test_model_new_bound_to_the_reference_is_a_fallback_not_a_missing_class():
    source = "import torch.nn as nn\nclass Model(nn.Module):\n    pass\nModelNew = Model\n"
    assert sorted((f.rule_id, f.line) for f in check_source(source)) == [
        ("no_custom_kernel", 4),
        ("reference_fallback", 4),
    ]


# ---- the rule table ----------------------------------------------------------


def test_shipped_table_matches_the_code():
    table = load_rules()
    assert [r.id for r in table.rules] == [str(r) for r in RuleId]
    assert all(r.message("X").count("X") >= 1 for r in table.rules)


def _table_with(rule_id: str, **changes: object) -> dict:
    data = copy.deepcopy(load_table("static_rules.toml"))
    entry = next(r for r in data["rule"] if r["id"] == rule_id)
    for key, value in changes.items():
        if value is None:
            del entry[key]
        else:
            entry[key] = value
    return data


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"severity": "fatal"}, "side_stream"),
        ({"reason": "Work escapes the timed stream."}, "side_stream"),
        ({"reason": "Work escapes the timed stream: {detail} {where}."}, "side_stream"),
        ({"reason": "Work escapes\nthe timed stream: {detail}."}, "side_stream"),
        ({"advice": None}, "side_stream"),
        ({"advice": "  "}, "side_stream"),
        ({"explanation": "extra field"}, "side_stream"),
        ({"id": "SideStream"}, "SideStream"),
    ],
    ids=["severity", "no-detail", "unknown-placeholder", "two-lines", "missing-advice", "blank-advice", "extra-field",
         "not-snake-case"],
)  # fmt: skip
def test_malformed_rule_is_rejected_naming_it(changes, named):
    with pytest.raises(RuleTableError, match=rf"'{named}'"):
        parse_rules(_table_with("side_stream", **changes))


def test_table_missing_a_rule_the_code_reports_is_rejected():
    data = copy.deepcopy(load_table("static_rules.toml"))
    data["rule"] = [r for r in data["rule"] if r["id"] != "dynamic_code"]
    with pytest.raises(RuleTableError, match=r"'dynamic_code'.*not in the table"):
        parse_rules(data)


def test_table_rule_without_code_is_rejected():
    data = copy.deepcopy(load_table("static_rules.toml"))
    data["rule"].append({**data["rule"][0], "id": "telepathy"})
    with pytest.raises(RuleTableError, match=r"'telepathy'.*reported by no analyzer code"):
        parse_rules(data)


def test_duplicate_rule_is_rejected():
    data = copy.deepcopy(load_table("static_rules.toml"))
    data["rule"].append(copy.deepcopy(data["rule"][3]))
    with pytest.raises(RuleTableError, match=f"'{data['rule'][3]['id']}' is defined twice"):
        parse_rules(data)


def test_empty_table_is_rejected():
    with pytest.raises(RuleTableError, match="no \\[\\[rule\\]\\]"):
        parse_rules({})


# ---- layering (its speed: benchmarks/bench_staticcheck.py) ----------------------


def test_staticcheck_is_a_pure_layer():
    # A fresh interpreter: this test process has the server loaded through conftest.
    probe = (
        "import sys, profsvc.staticcheck as s; s.check_source('x = 1'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'grpc') "
        "or m.startswith(('profsvc.server', 'profsvc.scheduler', 'profsvc.worker', 'profsvc_client'))))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
