"""The build environment the cache keys by: the workers' torch and its CUDA version, read without importing torch.

The server keys every build itself (a job's word on its environment is not
taken): `python -m profsvc.build.toolchain` under the workers' interpreter
prints torch's version and CUDA version from torch's own version.py, found
without running torch's package (a few milliseconds, not torch's import).
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import json
import os
import sys
from pathlib import Path

# What torch's version.py assigns, and the key each gets.
_FIELDS = {"__version__": "torch", "cuda": "cuda"}


def torch_versions() -> dict[str, str]:
    """{"torch": version, "cuda": version or ""} of this interpreter's torch; empty strings without torch."""
    versions = dict.fromkeys(_FIELDS.values(), "")
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return versions
    path = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return versions
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and target.id in _FIELDS and isinstance(value, ast.Constant):
            versions[_FIELDS[target.id]] = str(value.value) if value.value is not None else ""
    return versions


async def worker_environment(python: str, arch_list: str) -> dict[str, str]:
    """The environment that keys the builds of workers run by `python` for target `arch_list`."""
    process = await asyncio.create_subprocess_exec(
        python, "-m", "profsvc.build.toolchain", stdout=asyncio.subprocess.PIPE, env=dict(os.environ)
    )
    output, _ = await process.communicate()
    try:
        versions = json.loads(output)
    except ValueError:
        versions = {}
    return {"torch": str(versions.get("torch", "")), "cuda": str(versions.get("cuda", "")), "arch": arch_list}


if __name__ == "__main__":
    print(json.dumps(torch_versions()))
    sys.exit(0)
