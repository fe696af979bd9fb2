"""The trusted builder's server side: jobs ask, only the server writes the shared build cache.

A jailed job sends a load_inline or load call over its control channel
(profsvc.worker.inline_cache): its normalized arguments and the files of its own
folders the build reads (profsvc.build.request). The server checks the request,
computes the cache key from it (in its own environment: the workers' torch, CUDA
and target), answers with the cached build when the cache holds one whose
content hashes, kept outside every jail (`index/`), still match; else it runs
the builder (profsvc.worker.builder) in a jail of its own that can write only a
staging folder, moves what it built into the cache, records its hashes, and
answers with that, its route and why a faster one was declined. A job sees the
cache read-only: it can load what the server verified, and nothing else.

The precompiled glue headers are made by the builder once, in a run of their
own with no user input (prepare_headers), and installed like a build: a build's
staging folder, where the user's flags and code have run, is never a source of
anything shared but its own library. So is a shared binding (profsvc.build.binding):
a build reports the plan it lacked, the server checks it and has a run of its own
make the object from the plan alone, beside the job, for the next build.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from profsvc.build.binding import BINDING_FOLDER, BINDING_OBJECT, COMMON_SIGNATURES, BindingPlan
from profsvc.build.inline_builder import PCH_FOLDER, ROUTE_FILE, ROUTES, recorded_route, route_folder
from profsvc.build.python_problem import unit_line
from profsvc.build.request import BadBuildRequest, BuildRequest
from profsvc.build.routes import GLUE_BIND, GLUE_TYPES
from profsvc.jobfiles import read_regular
from profsvc.proc import ProcessResult, server_note
from profsvc.worker.inline_split import Declined
from profsvc_contract.models import BuiltUnit

log = logging.getLogger("profsvc.build")

# The builder's run in its cell: the request written there, (how it ended, the cell) while the cell lives.
BuilderRun = Callable[[dict[str, Any]], AbstractAsyncContextManager[tuple[ProcessResult, Path]]]
# The environment that keys builds (torch, CUDA, target), found once.
Environment = Callable[[], Awaitable[dict[str, str]]]
# The largest builder result read (its log is cut to the build's log limit).
RESULT_LIMIT = 8 << 20
# Folders the builder reads from the cache itself: checked against their hashes when the server starts.
_SHARED_FOLDERS = (PCH_FOLDER, BINDING_FOLDER)
_BINDING_KEY = re.compile(r"[0-9a-f]{24}")
# Shared bindings made at once, each beside the build that lacked it.
_BINDINGS_AT_ONCE = 2


def _result(cell: Path) -> bytes:
    """The builder's result file (its cell is where the user's flags and code ran: read it as a job's file)."""
    content = read_regular(cell / "result.json", RESULT_LIMIT)
    if content is None:
        raise ValueError("the builder's result is not a plain file of its size")
    return content


def _run_result(process: ProcessResult, cell: Path, field: str, failed: str) -> Any:
    """`field` of the result of a builder run of the server's own (headers, a binding); None where the run left
    none, logged with `failed` and the run's last output."""
    try:
        return json.loads(_result(cell))[field]
    except (OSError, ValueError, KeyError, TypeError):
        log.warning("%s (exit status %s): %s", failed, process.returncode, process.output.strip()[-2000:])
        return None


def sha256_file(path: Path) -> str:
    """Content hash of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# The cache's roots (its own folder, the shared headers' and bindings'), which no one may list: an entry's name
# is the key of someone's sources, and a job loads a build only from the folder the server named to it. Write and
# search for the server (the owner: it installs entries), search alone for the rest; a server without root gives
# itself reading back only while it sweeps at start, before any job runs.
UNLISTED = 0o311
_LISTABLE = 0o711


class BuildCacheIndex:
    """Content hashes of the cache's entries, kept where no job can write (the server's state folder)."""

    def __init__(self, cache_root: Path, index_root: Path) -> None:
        self.cache_root = cache_root
        self.root = index_root
        self.root.mkdir(parents=True, exist_ok=True)
        self.cache_root.mkdir(parents=True, exist_ok=True)
        self.cache_root.chmod(UNLISTED)
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

        Builds are checked against their hashes when a job asks for them; precompiled headers and shared
        bindings, which the builder reads from the cache itself, are checked here.
        """
        shared = [self.cache_root / name for name in _SHARED_FOLDERS]
        roots = [self.cache_root, *(root for root in shared if root.is_dir())]
        with self._exclusive():
            self._sweep(roots, shared)

    def _sweep(self, roots: list[Path], shared: list[Path]) -> None:
        for root in roots:
            root.chmod(_LISTABLE)
        try:
            for path in [p for p in self.cache_root.iterdir() if p.is_dir() and p not in shared]:
                if not self._record(path.name).is_file():
                    shutil.rmtree(path, ignore_errors=True)
            for root in roots[1:]:
                for path in [p for p in root.iterdir() if p.is_dir()]:
                    folder = f"{root.name}/{path.name}"
                    if not self.verified(folder):
                        shutil.rmtree(path, ignore_errors=True)
                        self._record(folder).unlink(missing_ok=True)
        finally:
            for root in roots:
                root.chmod(UNLISTED)

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Held around a sweep and an install: servers that share one cache (a cluster's workers on one node) do
        not sweep while another installs, nor list a root another's sweep has closed again."""
        with (self.cache_root / ".install.lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    def install(self, staged: Path, folder: str, hashed: list[str]) -> bool:
        """Move a staged folder into the cache as `folder` and record the hashes of `hashed` (names in it).

        False when the cache has a verified entry already (the staged copy is dropped) or the staged folder is
        not plain files and folders.
        """
        with self._exclusive():
            return self._install(staged, folder, hashed)

    def _install(self, staged: Path, folder: str, hashed: list[str]) -> bool:
        if self.verified(folder):
            return False
        for path in [staged, *staged.rglob("*")]:
            if path.is_symlink() or not (path.is_file() or path.is_dir()):
                log.warning("staged build %s holds %s, which is not a plain file: not installed", folder, path)
                return False
        _keep_only(staged, hashed)
        target = self.cache_root / folder
        if target.parent != self.cache_root:
            # Installs run in threads beside each other: the first into a shared folder makes it.
            target.parent.mkdir(exist_ok=True)
            target.parent.chmod(UNLISTED)
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


def _keep_only(staged: Path, hashed: list[str]) -> None:
    """Remove from a staged folder what is not hashed: the rest (the sent sources, objects, ninja's files) is the
    caller's own and no later job's business."""
    for path in sorted(staged.rglob("*"), reverse=True):
        if path.is_file() and str(path.relative_to(staged)) not in hashed:
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


class BuildService:
    """Answers a jailed job's `build` requests (see the module's text)."""

    def __init__(self, index: BuildCacheIndex, run_builder: BuilderRun, environment: Environment) -> None:
        self.index = index
        self.run_builder = run_builder
        self._environment = environment
        self._known: dict[str, str] | None = None
        self._locks: dict[str, asyncio.Lock] = {}
        self._headers: asyncio.Task[None] | None = None
        # Shared bindings being made, by plan (one run each), and the plans asked for already (made, or that
        # failed to build: not tried again while the server runs).
        # Keyed by plan (a frozen value), or "common" for the commonest ones' run.
        self._bindings: dict[BindingPlan | str, asyncio.Task[None]] = {}
        self._asked: set[BindingPlan] = set()
        self._closing = False

    async def environment(self) -> dict[str, str]:
        """The environment builds are keyed by (asked once)."""
        if self._known is None:
            self._known = await self._environment()
        return self._known

    def prepare_headers(self) -> None:
        """Start making the precompiled glue headers (once; builds with CUDA code wait for it)."""
        if self._headers is None:
            self._headers = asyncio.get_running_loop().create_task(self._prepare_headers())

    async def _prepare_headers(self) -> None:
        async with self.run_builder({"op": "prepare"}) as (process, cell):
            outcome = _run_result(process, cell, "headers", "the glue headers were not made")
            if outcome is None:
                return
            await asyncio.to_thread(self._install_pch, cell)
        log.info("glue headers: %s", "; ".join(f"{header}: {state}" for header, state in outcome.items()))
        if outcome.get(GLUE_TYPES) == outcome.get(GLUE_BIND) == "ok":
            self._bind_common()

    def _bind_common(self) -> None:
        """Make the shared bindings of the commonest signatures, one after another, as the headers are: a
        first candidate that binds one of them builds on split-bind."""

        async def common() -> None:
            for signature in COMMON_SIGNATURES:
                plan = BindingPlan((signature,))
                if plan not in self._asked and not self._closing:
                    self._asked.add(plan)
                    await self._make_binding(plan)

        task = asyncio.get_running_loop().create_task(common(), context=contextvars.Context())
        self._bindings["common"] = task
        task.add_done_callback(lambda _task: self._bindings.pop("common", None))

    async def _headers_made(self) -> None:
        self.prepare_headers()
        assert self._headers is not None
        try:
            # Shielded: a build whose job is cancelled leaves the headers to the next.
            await asyncio.shield(self._headers)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise
            # The headers' run was stopped (the server is closing): the build reads the headers as text.
        except Exception:
            log.exception("making the glue headers failed")

    async def close(self) -> None:
        """Stop making shared bindings and the glue headers (their builders are killed); start no more."""
        self._closing = True
        # The bindings first: they wait for the headers, whose cancellation would start them.
        for task in [*self._bindings.values(), self._headers]:
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    def _bind(self, message: Any) -> None:
        """Start making the shared binding a build lacked (checked: a build's outcome is read as data)."""
        try:
            plan = BindingPlan.from_message(message)
        except ValueError as error:
            log.warning("a build asked for a binding that is not one: %s", error)
            return
        # A few at once: a later build with the same signatures asks again.
        if self._closing or plan in self._asked or len(self._bindings) >= _BINDINGS_AT_ONCE:
            return
        self._asked.add(plan)
        # In a context of its own: the run is no job's, its time in none's timings.
        task = asyncio.get_running_loop().create_task(self._make_binding(plan), context=contextvars.Context())
        self._bindings[plan] = task
        task.add_done_callback(lambda _task: self._bindings.pop(plan, None))

    async def _make_binding(self, plan: BindingPlan) -> None:
        try:
            await self._headers_made()
            async with self.run_builder({"op": "bind", "plan": plan.as_message()}) as (process, cell):
                key = _run_result(process, cell, "key", "a shared binding was not made")
                if not isinstance(key, str) or not _BINDING_KEY.fullmatch(key):
                    return
                staged = cell / BINDING_FOLDER / key
                if staged.is_dir():
                    await asyncio.to_thread(self.index.install, staged, f"{BINDING_FOLDER}/{key}", [BINDING_OBJECT])
                if self.index.verified(f"{BINDING_FOLDER}/{key}"):
                    log.info("shared binding made: %s", "; ".join(plan.signatures))
        except Exception:  # cancellation is not one: it goes on
            log.exception("making a shared binding failed")

    @contextlib.asynccontextmanager
    async def _locked(self, key: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                yield
        finally:
            if not lock.locked() and self._locks.get(key) is lock:
                del self._locks[key]

    def _cached(self, key: str, artifact: str) -> dict[str, Any] | None:
        for route in ROUTES:
            folder = route_folder(key, route)
            if (self.index.cache_root / folder / artifact).is_file() and self.index.verified(folder):
                directory = self.index.cache_root / folder
                try:
                    record = {**_checked({"ok": True, **recorded_route(directory)}), "route": route}
                except ValueError:
                    record = {"route": route}
                return {**record, "ok": True, "cached": True, "directory": str(directory), "built_in": ""}
        return None

    async def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        """The control-channel handler of `build`."""
        environment = await self.environment()
        try:
            # Off the event loop: a request may carry megabytes of sources to check and hash.
            request = await asyncio.to_thread(BuildRequest.from_message, message)
        except BadBuildRequest as error:
            return {"ok": False, "error": str(error)}
        key = await asyncio.to_thread(request.key, environment)
        async with self._locked(key):
            reply = await asyncio.to_thread(self._cached, key, request.artifact)
            if reply is None:
                if request.has_cuda:
                    await self._headers_made()
                async with self.run_builder({"op": "build", **request.as_message(), "key": key}) as (process, cell):
                    reply = await asyncio.to_thread(self._finish, process, cell, key, request.artifact)
                if reply.get("binding"):
                    self._bind(reply["binding"])
        reply = {**reply, "key": key, "detail": _worded(reply, request.first_line)}
        unit = BuiltUnit(
            name=request.name,
            cache_key=key,
            cached=bool(reply.get("cached")),
            seconds=float(reply.get("seconds") or 0.0),
            route=str(reply.get("route", "")),
            route_reason=str(reply.get("reason", "")),
            route_detail=reply["detail"],
            failed=not reply.get("ok"),
        )
        log.info(unit_line(unit))
        return reply

    def _finish(self, process: ProcessResult, cell: Path, key: str, artifact: str) -> dict[str, Any]:
        try:
            outcome = _checked(json.loads(_result(cell)))
        except (OSError, ValueError):
            why = (
                "it ran past its time limit"
                if process.timed_out
                else server_note(process.output) or f"exit status {process.returncode}"
            )
            tail = process.output.strip()[-4000:]
            return {"ok": False, "route": "torch", "log": f"the builder failed ({why})\n{tail}"}
        if not outcome.get("ok"):
            return {**outcome, "cached": False}
        folder = route_folder(key, str(outcome["route"]))
        if not (cell / folder / artifact).is_file():
            return {**outcome, "ok": False, "log": f"the build made no {artifact}"}
        self.index.install(cell / folder, folder, [artifact, ROUTE_FILE])
        if not self.index.verified(folder):
            return {"ok": False, "route": outcome["route"], "log": "the build could not be installed in the cache"}
        directory = str(self.index.cache_root / folder)
        return {**outcome, "cached": False, "directory": directory}

    def _install_pch(self, cell: Path) -> None:
        """Precompiled headers the builder made, installed for every later build."""
        staged = cell / PCH_FOLDER
        if not staged.is_dir():
            return
        for folder in staged.iterdir():
            hashed = [str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()]
            self.index.install(folder, f"{PCH_FOLDER}/{folder.name}", hashed)


# The fields of a builder's outcome (inline_builder.InlineOutcome) and of a route record, and their types.
_OUTCOME: dict[str, type | tuple[type, ...]] = {
    "ok": bool,
    "route": str,
    "reason": str,
    "detail": str,
    "split_reason": str,
    "split_line": int,
    "built_in": str,
    "seconds": (int, float),
    "fallback_seconds": (int, float),
    "log": str,
    "binding": (dict, type(None)),
}


def _checked(outcome: Any) -> dict[str, Any]:
    """A builder's outcome, its fields of the right types and its route one of the routes (a build's cell is where
    the user's flags ran: what it holds is read as data, never as a path); ValueError where it is not."""
    if not isinstance(outcome, dict):
        raise ValueError("the outcome is not an object")
    checked = {name: outcome[name] for name in _OUTCOME if name in outcome}
    if not all(isinstance(value, _OUTCOME[name]) for name, value in checked.items()):
        raise ValueError("an outcome's field is not of its type")
    if checked.get("ok") is not False and checked.get("route") not in ROUTES:
        raise ValueError("the outcome names no route")
    return checked


def _worded(reply: dict[str, Any], first_line: int) -> str:
    """The reason a faster route was declined, its line counted in the asking job's file where it has one."""
    if reply.get("split_reason"):
        return Declined(str(reply["split_reason"]), int(reply.get("split_line", 0))).text(first_line)
    return str(reply.get("detail", ""))
