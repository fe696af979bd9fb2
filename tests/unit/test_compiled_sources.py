"""The memory of successful Python-problem compiles (a repeat skips the compile worker)."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

from profsvc.build.inline_builder import ROUTES, is_route_folder, route_folder
from profsvc.build.python_problem import HarnessStatus
from profsvc.scheduler.compiled import CompiledSources, source_digest
from profsvc.scheduler.jobs import SourceSpec
from profsvc_contract.models import BuiltUnit, CompileResult, SourceKind


def _source(text: str = "x = 1\n", reference: str = "") -> SourceSpec:
    return SourceSpec(
        kind=SourceKind.PYTHON_PROBLEM,
        main_name="p.py",
        main_text=text,
        reference_name="r.py" if reference else "",
        reference_text=reference,
    )


def _folder(tmp_path: Path, name: str) -> Path:
    """A cache folder as the server names one: a 32-digit key (here of the name), its route after a dash."""
    return tmp_path / f"{hashlib.md5(name.encode()).hexdigest()}-split-bind"


def _built(tmp_path: Path, name: str = "ext") -> tuple[CompileResult, HarnessStatus]:
    folder = _folder(tmp_path, name)
    folder.mkdir()
    (folder / f"{name}.so").write_bytes(b"\x7fELF")
    unit = BuiltUnit(name=name, cache_key="k", cached=False, seconds=7.5)
    result = CompileResult(ok=True, seconds=8.0, units=[unit])
    status = HarnessStatus(ok=True, stage="compiling", builds=[{"name": name, "build_directory": str(folder)}])
    return result, status


def test_a_repeat_is_served_as_cached(tmp_path):
    memory = CompiledSources(tmp_path)
    result, status = _built(tmp_path)
    memory.put(_source(), result, status)
    served = memory.get(_source())
    assert served is not None
    again, again_status = served
    assert again.ok and again.seconds == 0.0
    assert [(u.name, u.cached, u.seconds) for u in again.units] == [("ext", True, 0.0)]
    assert again_status.builds == status.builds
    assert result.units[0].cached is False  # the remembered result itself is left as it was


def test_any_change_of_source_misses(tmp_path):
    memory = CompiledSources(tmp_path)
    memory.put(_source(), *_built(tmp_path))
    assert memory.get(_source("x = 2\n")) is None
    assert memory.get(_source(reference="y = 1\n")) is None
    assert source_digest(_source("ab", "c")) != source_digest(_source("a", "bc"))


def test_failures_are_not_remembered(tmp_path):
    memory = CompiledSources(tmp_path)
    result, status = _built(tmp_path)
    memory.put(_source(), result.model_copy(update={"ok": False}), status)
    assert memory.get(_source()) is None


def test_a_build_folder_without_its_library_forgets_the_entry(tmp_path):
    memory = CompiledSources(tmp_path)
    result, status = _built(tmp_path)
    memory.put(_source(), result, status)
    (_folder(tmp_path, "ext") / "ext.so").unlink()
    assert memory.get(_source()) is None
    (_folder(tmp_path, "ext") / "ext.so").write_bytes(b"\x7fELF")
    assert memory.get(_source()) is None  # forgotten, not revived


def test_the_least_recently_used_goes_first(tmp_path):
    memory = CompiledSources(tmp_path, capacity=2)
    for i in range(2):
        memory.put(_source(f"x = {i}\n"), *_built(tmp_path, f"e{i}"))
    assert memory.get(_source("x = 0\n")) is not None  # now the most recent
    memory.put(_source("x = 2\n"), *_built(tmp_path, "e2"))
    assert memory.get(_source("x = 1\n")) is None
    assert memory.get(_source("x = 0\n")) is not None
    assert memory.get(_source("x = 2\n")) is not None


def test_an_outcome_naming_a_folder_outside_the_cache_is_not_kept(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    memory = CompiledSources(cache)
    # The job wrote its own status: a build "in" a host folder that happens to hold a library.
    result, status = _built(tmp_path, "elsewhere")
    memory.put(_source(), result, status)
    assert memory.get(_source()) is None
    inside, inside_status = _built(cache)
    memory.put(_source("x = 3\n"), inside, inside_status)
    assert memory.get(_source("x = 3\n")) is not None
    # A path whose parent is the cache, as a path, but which names the state folder above it.
    above = dataclasses.replace(inside_status, builds=[{"name": "ext", "build_directory": f"{cache}/.."}])
    (tmp_path / "ext.so").write_bytes(b"\x7fELF")
    memory.put(_source("x = 4\n"), inside, above)
    assert memory.get(_source("x = 4\n")) is None


def test_a_cache_folder_is_recognised_by_the_names_builds_get():
    key = "0123456789abcdef" * 2
    assert all(is_route_folder(route_folder(key, route)) for route in ROUTES)
    assert not any(is_route_folder(name) for name in ("..", key[:-1], key.upper(), f"{key}-torch", f"{key}-x", "pch"))
