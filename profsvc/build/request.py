"""A build request as a jailed job sends it: a call's arguments and the files of the job's own folders, by value.

The job (profsvc.worker.inline_cache) normalizes a load_inline or load call and sends, with its arguments, the
files the build reads from the job's own folders: the headers of its extra_include_paths, the sources of a
load() and their neighbours. The builder sees none of the job's folders: it writes the sent files into its
staging folder and builds from there. Here, pure: the request's checks (shapes and bounds, before anything is
built) and its cache key, which the server computes from the request itself, the sent folders standing for
themselves by their files' content, not by their paths.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from profsvc.build import routes

LOAD_INLINE = "load_inline"
LOAD = "load"
# Files of a folder that a build may read: headers, and sources a header or a load() may name.
SENT_SUFFIXES = (".h", ".hpp", ".hh", ".hxx", ".cuh", ".inl", ".inc", ".ipp", ".tcc")
SENT_SUFFIXES += (".cu", ".cpp", ".cc", ".cxx", ".c")
# Bounds of what one request sends: folders, files in all, bytes of one file and in all, folder depth.
MAX_FOLDERS = 32
MAX_FILES = 512
MAX_FILE_BYTES = 1 << 20
MAX_TOTAL_BYTES = 16 << 20
MAX_DEPTH = 8
MAX_FIRST_LINE = 10_000_000
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
# Sent text keeps bytes that are not UTF-8 (a header's comment in Latin-1): they cross as surrogates.
ENCODING = {"encoding": "utf-8", "errors": "surrogateescape"}


class BadBuildRequest(ValueError):
    """A build request that is not a load_inline or load call's arguments with the files they read."""


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _text_or_strings(value: Any) -> bool:
    return isinstance(value, str) or _strings(value)


def _functions(value: Any) -> bool:
    if isinstance(value, dict):
        return all(isinstance(v, str) for v in [*value, *value.values()])
    return _text_or_strings(value)


def _flag(value: Any) -> bool:
    return isinstance(value, bool)


_FLAGS = ("extra_cflags", "extra_cuda_cflags", "extra_sycl_cflags", "extra_ldflags", "extra_include_paths")
_COMMON: dict[str, tuple[Callable[[Any], bool], str]] = {
    **{name: (_strings, "a list of strings") for name in _FLAGS},
    **{
        name: (_flag, "true or false")
        for name in ("with_cuda", "with_sycl", "is_python_module", "keep_intermediates", "is_standalone")
    },
}
# What each argument a request may carry must be (None is always allowed), and how to say so, per call.
_SHAPES: dict[str, dict[str, tuple[Callable[[Any], bool], str]]] = {
    LOAD_INLINE: {
        **_COMMON,
        **{name: (_text_or_strings, "a string or a list of strings") for name in ("cpp_sources", "cuda_sources")},
        "sycl_sources": (_text_or_strings, "a string or a list of strings"),
        "functions": (_functions, "a string, a list of strings or a mapping of strings"),
        **{
            name: (_flag, "true or false") for name in ("with_pytorch_error_handling", "use_pch", "no_implicit_headers")
        },
    },
    LOAD: {**_COMMON, "sources": (_strings, "a list of strings")},
}


def check_arguments(arguments: Any, call: str = LOAD_INLINE) -> dict[str, Any]:
    """A call's arguments, checked for shape (their content is the user's business)."""
    if not isinstance(arguments, dict):
        raise BadBuildRequest("the arguments are not an object")
    shapes = _SHAPES[call]
    unknown = set(arguments) - {"name", *shapes}
    if unknown:
        raise BadBuildRequest(f"unknown {call} argument(s): {', '.join(sorted(unknown))}")
    if not isinstance(arguments.get("name"), str) or not _NAME.match(arguments["name"]):
        raise BadBuildRequest("the extension's name must be a Python identifier")
    for name, (fits, shape) in shapes.items():
        if arguments.get(name) is not None and not fits(arguments[name]):
            raise BadBuildRequest(f"{name} must be {shape}")
    for path in arguments.get("extra_include_paths") or []:
        if not _absolute(path):
            raise BadBuildRequest(f"include folder {path[:200]!r} is not an absolute, normalized path")
    return arguments


def _absolute(path: str) -> bool:
    return len(path) <= 4096 and path.isprintable() and path.startswith("/") and os.path.normpath(path) == path


def relative_name(name: Any) -> bool:
    """A file's name inside a sent folder: relative, no `..`, printable, at most MAX_DEPTH parts."""
    if not isinstance(name, str) or not name or not name.isprintable() or "\\" in name:
        return False
    parts = name.split("/")
    return len(parts) <= MAX_DEPTH and all(p not in ("", ".", "..") and len(p.encode()) <= 255 for p in parts)


@dataclass(frozen=True)
class SentFolder:
    """One of the job's folders, by value: its path in the job's view, and its files (name -> text)."""

    path: str
    files: dict[str, str]

    def as_message(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"path": self.path, "files": self.files}


def _folder(entry: Any) -> tuple[SentFolder, int]:
    """One sent folder, checked, and its size in bytes."""
    if not isinstance(entry, dict) or set(entry) != {"path", "files"} or not isinstance(entry["files"], dict):
        raise BadBuildRequest("each folder must be an object of a path and its files")
    if not isinstance(entry["path"], str) or not _absolute(entry["path"]):
        raise BadBuildRequest("a folder's path must be absolute and normalized")
    total = 0
    for name, text in entry["files"].items():
        if not relative_name(name) or not isinstance(text, str):
            raise BadBuildRequest(f"a folder's file {str(name)[:200]!r} is not a relative name with its text")
        size = len(text.encode(**ENCODING))
        if size > MAX_FILE_BYTES:
            raise BadBuildRequest(f"{name[:200]} is over {MAX_FILE_BYTES >> 20} MiB")
        total += size
    return SentFolder(entry["path"], dict(entry["files"])), total


def _folders(value: Any) -> tuple[SentFolder, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_FOLDERS:
        raise BadBuildRequest(f"folders must be a list of at most {MAX_FOLDERS}")
    checked = [_folder(entry) for entry in value]
    folders = tuple(folder for folder, _ in checked)
    if sum(len(f.files) for f in folders) > MAX_FILES or sum(size for _, size in checked) > MAX_TOTAL_BYTES:
        raise BadBuildRequest(f"the folders hold over {MAX_FILES} files or {MAX_TOTAL_BYTES >> 20} MiB")
    if len({f.path for f in folders}) != len(folders):
        raise BadBuildRequest("a folder is sent twice")
    return folders


@dataclass(frozen=True)
class BuildRequest:
    """One load_inline or load call to build: normalized arguments, the job's folders it reads, by value.

    `first_line`: the line of the user's file where the CUDA source starts (0: unknown), for the reason's line.
    """

    call: str
    arguments: dict[str, Any]
    folders: tuple[SentFolder, ...] = ()
    first_line: int = 0

    @classmethod
    def from_message(cls, message: Any) -> BuildRequest:
        """The request a message holds, checked; BadBuildRequest in one line where it is not one."""
        if not isinstance(message, dict):
            raise BadBuildRequest("the request is not an object")
        call = message.get("call", LOAD_INLINE)
        if call not in _SHAPES:
            raise BadBuildRequest(f"call must be {LOAD_INLINE} or {LOAD}")
        first_line = message.get("first_line", 0)
        if not isinstance(first_line, int) or isinstance(first_line, bool) or not 0 <= first_line <= MAX_FIRST_LINE:
            raise BadBuildRequest("first_line must be a line number")
        arguments = check_arguments(message.get("arguments"), call)
        request = cls(call, arguments, _folders(message.get("folders")), first_line)
        if call == LOAD:
            if not request.arguments.get("sources"):
                raise BadBuildRequest("a load() names no sources")
            for source in request.arguments["sources"]:
                if request._sent(source) is None:
                    raise BadBuildRequest(f"source {source[:200]!r} is not among the files sent")
        return request

    @property
    def name(self) -> str:
        """The extension's name."""
        return str(self.arguments["name"])

    @property
    def artifact(self) -> str:
        """The file the build makes: the library, or a standalone executable."""
        return self.name if self.arguments.get("is_standalone") else f"{self.name}.so"

    @property
    def has_cuda(self) -> bool:
        """Whether the call compiles CUDA code (only such builds take a route with a precompiled glue header)."""
        if self.call == LOAD:
            return any(PurePosixPath(s).suffix == ".cu" for s in self.arguments["sources"])
        cuda = self.arguments.get("cuda_sources")
        return bool("".join([cuda] if isinstance(cuda, str) else cuda or []).strip())

    def _sent(self, path: str) -> tuple[int, str] | None:
        """(folder index, name in it) of a path among the files sent, None where it is not one."""
        for index, folder in enumerate(self.folders):
            name = path.removeprefix(folder.path.rstrip("/") + "/")
            if name != path and name in folder.files:
                return index, name
        return None

    def canonical(self) -> tuple[dict[str, Any], dict[str, str]]:
        """The arguments with each sent folder named `@N` in place of its path, and "@N/name" -> each sent
        file's SHA-256: what the cache key covers (routes.cache_key)."""
        names = {folder.path: f"@{index}" for index, folder in enumerate(self.folders)}
        arguments = dict(self.arguments)
        arguments["extra_include_paths"] = [names.get(p, p) for p in arguments.get("extra_include_paths") or []]
        if self.call == LOAD:
            sent = [self._sent(source) for source in arguments["sources"]]
            arguments["sources"] = [f"@{where[0]}/{where[1]}" for where in sent if where is not None]
        digests = {
            f"@{index}/{name}": hashlib.sha256(text.encode(**ENCODING)).hexdigest()
            for index, folder in enumerate(self.folders)
            for name, text in sorted(folder.files.items())
        }
        return arguments, digests

    def key(self, environment: dict[str, str]) -> str:
        """The build cache's key of this request in `environment` (torch, CUDA, target: the server's own)."""
        arguments, digests = self.canonical()
        return routes.cache_key({**arguments, "call": self.call}, environment, digests)

    def as_message(self) -> dict[str, Any]:
        """JSON-ready: what the job sends, and what the builder is handed (with the key)."""
        folders = [folder.as_message() for folder in self.folders]
        return {"call": self.call, "arguments": self.arguments, "folders": folders, "first_line": self.first_line}
