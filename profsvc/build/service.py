"""The trusted builder's server side: jobs ask, only the server writes the shared build cache.

A jailed job sends a load_inline call's arguments over its control channel
(profsvc.worker.inline_cache). The server computes the cache key from them,
answers with the cached build when the cache holds one whose content hash, kept
outside every jail (`index/`), still matches; else it runs the builder
(profsvc.worker.builder) in a jail of its own that can write only a staging
folder, moves what it built into the cache, records its hashes, and answers
with that. A job sees the cache read-only: it can load what the server verified,
and nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from profsvc.build.inline_builder import PCH_FOLDER, ROUTES, inline_key, route_folder
from profsvc.proc import ProcessResult

log = logging.getLogger("profsvc.build")

# The builder's run in its cell: the request written there, (how it ended, the cell) while the cell lives.
BuilderRun = Callable[[dict[str, Any]], AbstractAsyncContextManager[tuple[ProcessResult, Path]]]
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")


class BadBuildRequest(ValueError):
    """A build request that is not a load_inline call's arguments."""


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _text_or_strings(value: Any) -> bool:
    return isinstance(value, str) or _strings(value)


def _functions(value: Any) -> bool:
    if isinstance(value, dict):
        return all(isinstance(v, str) for v in [*value, *value.values()])
    return _text_or_strings(value)


# What each load_inline argument a request may carry must be (None is always allowed), and how to say so.
_SHAPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    **{name: (_text_or_strings, "a string or a list of strings") for name in ("cpp_sources", "cuda_sources")},
    "sycl_sources": (_text_or_strings, "a string or a list of strings"),
    "functions": (_functions, "a string, a list of strings or a mapping of strings"),
    **{
        name: (_strings, "a list of strings")
        for name in ("extra_cflags", "extra_cuda_cflags", "extra_sycl_cflags", "extra_ldflags", "extra_include_paths")
    },
    **{
        name: (lambda v: isinstance(v, bool), "true or false")
        for name in (
            "with_cuda",
            "with_sycl",
            "is_python_module",
            "with_pytorch_error_handling",
            "keep_intermediates",
            "use_pch",
            "no_implicit_headers",
            "is_standalone",
        )
    },
}


def check_arguments(arguments: Any) -> dict[str, Any]:
    """The request's load_inline arguments, checked for shape (their content is the user's business)."""
    if not isinstance(arguments, dict):
        raise BadBuildRequest("the arguments are not an object")
    unknown = set(arguments) - {"name", *_SHAPES}
    if unknown:
        raise BadBuildRequest(f"unknown load_inline argument(s): {', '.join(sorted(unknown))}")
    if not isinstance(arguments.get("name"), str) or not _NAME.match(arguments["name"]):
        raise BadBuildRequest("the extension's name must be a Python identifier")
    for name, (fits, shape) in _SHAPES.items():
        if arguments.get(name) is not None and not fits(arguments[name]):
            raise BadBuildRequest(f"{name} must be {shape}")
    return arguments


def sha256_file(path: Path) -> str:
    """Content hash of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class BuildCacheIndex:
    """Content hashes of the cache's entries, kept where no job can write (the server's state folder)."""

    def __init__(self, cache_root: Path, index_root: Path) -> None:
        self.cache_root = cache_root
        self.root = index_root
        self.root.mkdir(parents=True, exist_ok=True)
        # Files already hashed this run, by (inode, size, mtime): a file that changed since is hashed again.
        self._seen: dict[Path, tuple[int, int, int]] = {}

    def _record(self, folder: str) -> Path:
        return self.root / (folder.replace("/", "__") + ".json")

    def verified(self, folder: str) -> bool:
        """True when every file the index holds for the cache folder is there with its recorded hash."""
        record = self._record(folder)
        if not record.is_file():
            return False
        try:
            files = json.loads(record.read_text())["files"]
        except (ValueError, KeyError, TypeError):
            return False
        for name, expected in files.items():
            path = self.cache_root / folder / name
            try:
                info = path.lstat()
            except OSError:
                return False
            stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
            if not path.is_file() or path.is_symlink():
                return False
            if self._seen.get(path) == stamp:
                continue
            if sha256_file(path) != expected:
                log.warning("cache entry %s/%s does not match its recorded hash: not used", folder, name)
                return False
            self._seen[path] = stamp
        return True

    def sweep(self) -> None:
        """Remove cache entries the index does not vouch for (left by an older server, or changed since).

        Builds are checked against their hashes when a job asks for them; precompiled headers, which the
        builder reads from the cache itself, are checked here.
        """
        if not self.cache_root.is_dir():
            return
        pch = self.cache_root / PCH_FOLDER
        for path in [p for p in self.cache_root.iterdir() if p.is_dir() and p != pch]:
            if not self._record(path.name).is_file():
                shutil.rmtree(path, ignore_errors=True)
        for path in [p for p in pch.iterdir() if p.is_dir()] if pch.is_dir() else []:
            folder = f"{PCH_FOLDER}/{path.name}"
            if not self.verified(folder):
                shutil.rmtree(path, ignore_errors=True)
                self._record(folder).unlink(missing_ok=True)

    def install(self, staged: Path, folder: str, hashed: list[str]) -> bool:
        """Move a staged folder into the cache as `folder` and record the hashes of `hashed` (names in it).

        False when the cache has a verified entry already (the staged copy is dropped) or the staged folder is
        not plain files and folders.
        """
        if self.verified(folder):
            return False
        for path in [staged, *staged.rglob("*")]:
            if path.is_symlink() or not (path.is_file() or path.is_dir()):
                log.warning("staged build %s holds %s, which is not a plain file: not installed", folder, path)
                return False
        target = self.cache_root / folder
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            shutil.rmtree(target)  # an entry whose hashes did not match
        staged.rename(target)
        if os.geteuid() == 0:
            for path in [target, *target.rglob("*")]:
                os.chown(path, 0, 0, follow_symlinks=False)
        files = {name: sha256_file(target / name) for name in hashed if (target / name).is_file()}
        partial = self._record(folder).with_suffix(".partial")
        partial.write_text(json.dumps({"files": files}))
        partial.replace(self._record(folder))
        return True


class BuildService:
    """Answers a jailed job's `build` requests (see the module's text)."""

    def __init__(self, index: BuildCacheIndex, run_builder: BuilderRun) -> None:
        self.index = index
        self.run_builder = run_builder
        self._locks: dict[str, asyncio.Lock] = {}

    @contextlib.asynccontextmanager
    async def _locked(self, key: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                yield
        finally:
            if not lock.locked() and self._locks.get(key) is lock:
                del self._locks[key]

    def _cached(self, key: str, name: str) -> dict[str, Any] | None:
        for route in ("torch", *ROUTES[:2]):
            folder = route_folder(key, route)
            if (self.index.cache_root / folder / f"{name}.so").is_file() and self.index.verified(folder):
                directory = str(self.index.cache_root / folder)
                return {"ok": True, "cached": True, "route": route, "directory": directory, "built_in": ""}
        return None

    async def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        """The control-channel handler of `build`."""
        try:
            arguments = check_arguments(message.get("arguments"))
        except BadBuildRequest as error:
            return {"ok": False, "error": str(error)}
        environment = message.get("environment")
        if not isinstance(environment, dict):
            return {"ok": False, "error": "the request names no environment"}
        key = inline_key(arguments, environment)
        name = arguments["name"]
        async with self._locked(key):
            cached = await asyncio.to_thread(self._cached, key, name)
            if cached is not None:
                return cached
            async with self.run_builder({"arguments": arguments, "key": key}) as (process, cell):
                return await asyncio.to_thread(self._finish, process, cell, key, name)

    def _finish(self, process: ProcessResult, cell: Path, key: str, name: str) -> dict[str, Any]:
        try:
            outcome = json.loads((cell / "result.json").read_text())
        except (OSError, ValueError):
            why = "it ran past its time limit" if process.timed_out else f"exit status {process.returncode}"
            tail = (process.stderr or process.stdout).strip()[-4000:]
            return {"ok": False, "route": "torch", "log": f"the builder failed ({why})\n{tail}"}
        self._install_pch(cell)
        if not outcome.get("ok"):
            return {**outcome, "cached": False}
        folder = route_folder(key, str(outcome["route"]))
        self.index.install(cell / folder, folder, [f"{name}.so"])
        if not self.index.verified(folder):
            return {"ok": False, "route": outcome["route"], "log": "the build could not be installed in the cache"}
        directory = str(self.index.cache_root / folder)
        return {**outcome, "cached": False, "directory": directory}

    def _install_pch(self, cell: Path) -> None:
        """Precompiled headers the builder made, installed for every later build with the same flags."""
        staged = cell / PCH_FOLDER
        if not staged.is_dir():
            return
        for folder in staged.iterdir():
            hashed = [str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()]
            self.index.install(folder, f"{PCH_FOLDER}/{folder.name}", hashed)
