"""Cold builds on split-light against split-bind: the same corpus sources, the same run, profsvc's builder.

    [CUDA_HOME=DIR] python benchmarks/bench_bind_route.py --out DIR [--limit N]

The corpus sources (tests/corpus) whose calls the manifest puts on split-light with the light header are built
cold twice, one source at a time, alternating which goes first: in a cache without shared bindings (split-light)
and in one holding the commonest (binding.COMMON_SIGNATURES, which a server makes at start: split-bind where a
source binds one of them). Each build is the builder's own (profsvc.build.inline_builder.build_call, through the
job's load_inline wrapper with no server: profsvc.worker.inline_cache), in a fresh process, unjailed; its seconds
are the builder's. The glue headers and the shared bindings are made first and are not in the times. The p50,
p90 and their ratio are over the sources whose builds took split-light, then split-bind.

A torch without CUDA (a machine without a GPU) cannot link a CUDA extension: there CUDA_HOME is found as torch
finds it (set it where the `nvcc` on PATH is not the toolkit's own) and the link reads empty stand-ins for
torch's CUDA libraries. The compile steps, which the times are, are a GPU host's; the link of a library without
them is not. Writes DIR/bind_route.json; prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_loop import summary  # noqa: E402 (the benchmarks share their statistics)

CORPUS = ROOT / "tests" / "corpus"
ROUTES = ("split-light", "split-bind")
# Where the linker and the loader look for the stand-ins.
LINK_PATHS = ("LIBRARY_PATH", "LD_LIBRARY_PATH")

# What each process below runs first (prefixed where it is started). A torch without CUDA has no CUDA_HOME:
# torch's own search finds the toolkit.
CUDA_HOME = """
from torch.utils import cpp_extension
cpp_extension.CUDA_HOME = cpp_extension.CUDA_HOME or cpp_extension._find_cuda_home()
"""

# One build in a fresh process: the corpus module imported with profsvc's load_inline wrapper (no server).
ONE_BUILD = """
import json, sys, importlib.util
from pathlib import Path
from profsvc.worker import inline_cache
cache, path = Path(sys.argv[1]), Path(sys.argv[2])
recorder = inline_cache.InlineRecorder()
inline_cache.install(cache, lineinfo=True, user_text=path.read_text(), recorder=recorder)
spec = importlib.util.spec_from_file_location(path.stem, path)
error = ""
try:
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
except Exception as failure:  # the import of a library linked against stand-ins may fail: the build is timed
    error = f"{type(failure).__name__}: {str(failure).strip().splitlines()[-1][:200] if str(failure).strip() else ''}"
builds = [{"route": b.route, "seconds": b.seconds, "reason": b.route_reason} for b in recorder.builds]
print(json.dumps({"builds": builds, "error": error}))
"""

PREPARE = """
import shutil, sys
from pathlib import Path
from profsvc.build import inline_builder
from profsvc.build.binding import COMMON_SIGNATURES, BindingPlan
light, bind = Path(sys.argv[1]), Path(sys.argv[2])
print(inline_builder.prepare_server_headers(light, light))
shutil.copytree(light / inline_builder.PCH_FOLDER, bind / inline_builder.PCH_FOLDER)
for signature in COMMON_SIGNATURES:
    inline_builder.make_binding(bind, bind, BindingPlan((signature,)), inline_builder.torch_builders())
"""


def sources(limit: int) -> list[Path]:
    """Corpus files whose calls all take split-light against the light header (the manifest's)."""
    entries = tomllib.loads((CORPUS / "manifest.toml").read_text())["file"]
    chosen = [
        CORPUS / entry["name"]
        for entry in entries
        if entry.get("call") and all(c["route"] == "split-light" and c.get("glue") == "light" for c in entry["call"])
    ]
    return chosen[:limit] if limit else chosen


def stand_ins(folder: Path) -> dict[str, str]:
    """The environment that lets a torch without CUDA link CUDA extensions (empty libraries), or none."""
    import torch

    if torch.version.cuda:
        return {}
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("libc10_cuda.so", "libtorch_cuda.so"):
        subprocess.run(["cc", "-shared", "-fPIC", "-x", "c", "/dev/null", "-o", str(folder / name)], check=True)
    return {key: os.pathsep.join(filter(None, [str(folder), os.environ.get(key)])) for key in LINK_PATHS}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=0, help="at most this many sources (0: all)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bind-route-"))
    env = {**os.environ, "TORCH_CUDA_ARCH_LIST": os.environ.get("TORCH_CUDA_ARCH_LIST", "9.0")}
    caches = {"split-light": work / "light", "split-bind": work / "bind"}
    prepared = subprocess.run(
        [sys.executable, "-c", CUDA_HOME + PREPARE, str(caches["split-light"]), str(caches["split-bind"])],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    print(f"glue headers: {prepared.stdout.strip()}", file=sys.stderr)
    linked = stand_ins(work / "stand-ins")
    env |= linked
    results: dict[str, Any] = {"sources": {}, "stand_ins": bool(linked)}
    for index, source in enumerate(sources(args.limit)):
        entry: dict[str, Any] = {}
        for route in ROUTES if index % 2 == 0 else ROUTES[::-1]:
            done = subprocess.run(
                [sys.executable, "-c", CUDA_HOME + ONE_BUILD, str(caches[route]), str(source)],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            lines = done.stdout.strip().splitlines()
            entry[route] = json.loads(lines[-1]) if lines else {"builds": [], "error": done.stderr[-500:]}
        results["sources"][source.name] = entry
        print(source.name, json.dumps(entry), file=sys.stderr)
    shutil.rmtree(work, ignore_errors=True)
    (args.out / "bind_route.json").write_text(json.dumps(results, indent=2))
    print(table(results))
    return 0


def table(results: dict[str, Any]) -> str:
    """Per source: each route's build seconds and the routes the builds took; p50/p90 of each, and the ratio of
    the p50s, over the sources whose builds took the route asked for both times."""
    lines = ["| source | split-light | split-bind | ratio |", "| --- | --- | --- | --- |"]
    paired: dict[str, list[float]] = {route: [] for route in ROUTES}
    for name, entry in sorted(results["sources"].items()):
        total = {route: sum(b["seconds"] for b in entry[route]["builds"]) for route in ROUTES}
        taken = {route: [b["route"] for b in entry[route]["builds"]] for route in ROUTES}
        cells = [f"{total[route]:.2f} s ({', '.join(taken[route]) or 'no build'})" for route in ROUTES]
        both = all(taken[route] and set(taken[route]) == {route} for route in ROUTES)
        ratio = f"{total['split-light'] / total['split-bind']:.1f}x" if both else ""
        lines.append(f"| {name} | {cells[0]} | {cells[1]} | {ratio} |")
        for route in ROUTES if both else ():
            paired[route].append(total[route])
    if paired["split-bind"]:
        figures = {route: summary(paired[route]) for route in ROUTES}
        for route, figure in figures.items():
            lines.append(f"\n{route}: n {figure['n']}, p50 {figure['p50']:.2f} s, p90 {figure['p90']:.2f} s")
        ratio = figures["split-light"]["p50"] / figures["split-bind"]["p50"]
        lines.append(f"\nRatio of the p50s, split-light / split-bind: {ratio:.2f}x")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
