"""Parameter sweeps: the grid, the constants a sweep may set (and the line refusing the others), the rewritten
source, and each grid point and repeat a problem of its own to the checkpoint."""

from __future__ import annotations

import hashlib
import json

import pytest

from profsvc_client.batch import Problem, discover
from profsvc_client.sweep import check_constants, grid, manifest_sweep, override_constants, parse_sweeps
from profsvc_contract import errors
from tests.conftest import FIXTURES

PROBLEM = b"""import torch

batch_size = 16
dim: int = 16384  # the row length
scale = -0.5
label = "caf\xc3\xa9"; mode = "fast"


def get_inputs():
    return [torch.randn(batch_size, dim) * scale]
"""


def test_cli_sweeps_are_literals_separated_by_commas():
    assert parse_sweeps(["dim=1024,4096", "batch_size=8", "shape=(1, 2),(3, 4)", "mode='a', 'b'"]) == {
        "dim": [1024, 4096],
        "batch_size": [8],
        "shape": [(1, 2), (3, 4)],
        "mode": ["a", "b"],
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("dim", "--sweep dim: give NAME=VALUE,VALUE... (for example dim=1024,4096)"),
        ("dim=", "--sweep dim=: give NAME=VALUE,VALUE... (for example dim=1024,4096)"),
        ("2d=1", "--sweep 2d=1: '2d' is not a Python name"),
        ("class=1", "--sweep class=1: 'class' is not a Python name"),
        ("dtype=float16", "--sweep dtype=float16: the values are Python literals separated by commas"),
        ("big=1e999", "--sweep big=1e999: inf is not a Python literal a problem can be given"),
    ],
)
def test_a_bad_cli_sweep_is_one_line(spec, message):
    with pytest.raises(errors.InvalidRequest) as caught:
        parse_sweeps([spec])
    assert caught.value.message.startswith(message) and "\n" not in caught.value.message


def test_a_name_swept_twice_is_refused():
    with pytest.raises(errors.InvalidRequest, match="dim is swept twice"):
        parse_sweeps(["dim=1", "dim=2"])


def test_manifest_sweeps():
    assert manifest_sweep({"dim": [1024, 4096], "mode": ["a"]}, "m.jsonl:1") == {"dim": [1024, 4096], "mode": ["a"]}
    for value, message in [
        ([1], '"sweep" maps constant names to lists of values'),
        ({}, '"sweep" maps constant names to lists of values'),
        ({"dim": 1024}, '"sweep" dim: give a non-empty list of values'),
        ({"dim": []}, '"sweep" dim: give a non-empty list of values'),
        ({"a-b": [1]}, "'a-b' is not a Python name"),
    ]:
        with pytest.raises(errors.InvalidRequest, match=message):
            manifest_sweep(value, "m.jsonl:1")


def test_the_grid_is_every_combination_first_name_slowest():
    assert grid({"dim": [1024, 4096], "batch_size": [8, 16]}) == [
        {"dim": 1024, "batch_size": 8},
        {"dim": 1024, "batch_size": 16},
        {"dim": 4096, "batch_size": 8},
        {"dim": 4096, "batch_size": 16},
    ]
    assert grid({}) == [{}]


def test_override_rewrites_only_the_literals():
    point = {"dim": 1024, "batch_size": 8, "scale": 0.25, "mode": "slow"}
    expected = PROBLEM.replace(b"batch_size = 16", b"batch_size = 8").replace(b"int = 16384", b"int = 1024")
    expected = expected.replace(b"scale = -0.5", b"scale = 0.25").replace(b'mode = "fast"', b"mode = 'slow'")
    assert override_constants(PROBLEM, point, "p.py") == expected
    # After a non-ASCII literal on the same line: ast's columns are bytes, and the rewrite keeps the file's bytes.
    assert override_constants(PROBLEM, {"label": "x"}, "p.py") == PROBLEM.replace(b'"caf\xc3\xa9"', b"'x'")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (b"x = 1\n", "p.py: cannot sweep dim: the module has no top-level assignment `dim = ...`"),
        (b"dim = 1\ndim = 2\n", "p.py: cannot sweep dim: it is bound 2 times at module level (lines 1, 2)"),
        (b"dim = 1\nfor dim in range(3):\n    pass\n", "p.py: cannot sweep dim: it is bound 2 times at module level"),
        (b"import numpy as dim\n", "p.py: cannot sweep dim: line 1 is not a simple `dim = LITERAL`"),
        (b"dim, b = 1, 2\n", "p.py: cannot sweep dim: line 1 is not a simple `dim = LITERAL`"),
        (b"dim = b = 1\n", "p.py: cannot sweep dim: line 1 is not a simple `dim = LITERAL`"),
        (b"if True:\n    dim = 1\n", "p.py: cannot sweep dim: line 1 is not a simple `dim = LITERAL`"),
        (b"n = 2\ndim = 4 * n\n", "p.py: cannot sweep dim: line 2 sets it to an expression, not a literal"),
        (b"dim = 1\ndef grow():\n    global dim\n    dim = 2\n", "p.py: cannot sweep dim: a function rebinds it"),
        (b"def f(:\n", "p.py: cannot sweep a file that does not parse (line 1)"),
    ],
)
def test_a_constant_a_sweep_cannot_set_is_refused_naming_it(source, message):
    with pytest.raises(errors.InvalidRequest) as caught:
        check_constants(source, ["dim"], "p.py")
    assert caught.value.message.startswith(message) and "\n" not in caught.value.message


def test_constants_a_sweep_can_set():
    # Assigned once at the top level, a local of the same name in a function does not count.
    check_constants(PROBLEM + b"\ndef f():\n    dim = 3\n    return [dim for dim in range(dim)]\n", ["dim"], "p.py")
    # The seed sets its sizes by tuple unpacking: it cannot be swept, and says where.
    with pytest.raises(errors.InvalidRequest, match=r"cannot sweep B: line 6 is not a simple `B = LITERAL`"):
        check_constants((FIXTURES / "seed47.py").read_bytes(), ["B"], "seed47.py")


def _problem(tmp_path, name="p.py", source=PROBLEM) -> Problem:
    path = tmp_path / name
    path.write_bytes(source)
    return Problem(name, path, hashlib.sha256(source).hexdigest(), metric_set="basic")


def test_each_grid_point_and_repeat_is_a_problem_of_its_own(tmp_path):
    plain = _problem(tmp_path)
    # An unswept first repeat keeps the key checkpoints held before sweeps and repeats: they still resume.
    assert plain.key == hashlib.sha256(json.dumps(["p.py", plain.digest, "basic", ""]).encode()).hexdigest()
    points = [Problem(**{**plain.__dict__, "params": point}) for point in grid({"dim": [1024, 4096]})]
    repeats = [Problem(**{**plain.__dict__, "repeat": repeat}) for repeat in (1, 2)]
    keys = [p.key for p in (plain, *points, *repeats)]
    assert len(set(keys)) == 5
    # A point is its values, in whatever order they were named.
    same = Problem(**{**plain.__dict__, "params": {"b": 2, "a": 1}})
    assert same.key == Problem(**{**plain.__dict__, "params": {"a": 1, "b": 2}}).key
    assert points[1].content() == PROBLEM.replace(b"int = 16384", b"int = 4096")
    assert plain.content() == PROBLEM


def test_discover_expands_sweeps_and_repeats(tmp_path):
    _problem(tmp_path, "a.py")
    _problem(tmp_path, "b.py", PROBLEM.replace(b"batch_size = 16", b"batch_size = 32"))
    found = discover(tmp_path, sweep={"dim": [1024, 4096], "batch_size": [8]}, repeats=2)
    assert [(p.name, dict(p.params), p.repeat) for p in found] == [
        (name, {"dim": dim, "batch_size": 8}, repeat)
        for name in ("a.py", "b.py")
        for dim in (1024, 4096)
        for repeat in (0, 1)
    ]
    # A static check is the same every time: done once.
    assert [p.repeat for p in discover(tmp_path, task="lint", repeats=3)] == [0, 0]
    (tmp_path / "c.py").write_bytes(b"dim = 2 ** 10\n")
    with pytest.raises(errors.InvalidRequest) as caught:
        discover(tmp_path, sweep={"dim": [1024]})
    assert (
        caught.value.message
        == "c.py: cannot sweep dim: line 1 sets it to an expression, not a literal (a number, a string, a tuple)"
    )
    with pytest.raises(errors.InvalidRequest, match="--repeat must be at least 1, not 0"):
        discover(tmp_path, repeats=0)


def test_a_manifest_entry_sweeps_its_own_constants(tmp_path):
    _problem(tmp_path, "a.py")
    _problem(tmp_path, "b.py")
    (tmp_path / "k.cu").write_text("int main() { return 0; }\n")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"file": "a.py", "sweep": {"scale": [1.5, 2.5]}}\n{"file": "b.py"}\n')
    found = discover(manifest, sweep={"dim": [64]})
    # The entry's own sweep, else the command's.
    assert [(p.name, dict(p.params)) for p in found] == [
        ("a.py", {"scale": 1.5}),
        ("a.py", {"scale": 2.5}),
        ("b.py", {"dim": 64}),
    ]
    manifest.write_text('{"file": "k.cu", "sweep": {"dim": [1]}}\n')
    with pytest.raises(
        errors.InvalidRequest,
        match=r"m\.jsonl:1: a sweep sets the constants of a Python file that is profiled; k\.cu is not one",
    ):
        discover(manifest)
