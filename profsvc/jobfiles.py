"""Files and folders a job's process could have written, as the server reads and removes them.

The server runs with more rights than any job: a status file a job replaced with a link to `/proc/kmsg` (a read
that blocks for good), to a secret, or with gigabytes, must cost the server nothing; so must a folder a job nested
thousands deep or filled with a million files when the server removes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import subprocess
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

# A folder opened for its entries, never through a link.
NOFOLLOW_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Removals one at a time, on a thread of their own: a job's million files never hold up the threads builds and
# reports run on.
_REMOVER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="profsvc-remove")


def open_regular_at(folder: int, name: str) -> BinaryIO | None:
    """The regular file `name` of the open folder `folder`, opened for reading; None for anything else: a link is
    not followed, and a file with a second hard link (which could be a file elsewhere) is refused. OSError where
    nothing of that name can be opened."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        return None
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_regular(path: Path, limit: int) -> bytes | None:
    """What the plain file at `path` holds; None where it is a link, not a plain file, has a second hard link or
    holds more than `limit` bytes. FileNotFoundError where there is nothing of that name."""
    folder = os.open(path.parent, NOFOLLOW_DIRECTORY)
    try:
        try:
            file = open_regular_at(folder, path.name)
        except FileNotFoundError:
            raise
        except OSError:  # a link (ELOOP), or nothing this server may open
            return None
    finally:
        os.close(folder)
    if file is None:
        return None
    with file:
        content = file.read(limit + 1)
    return content if len(content) <= limit else None


def remove_tree(path: Path) -> None:
    """Remove a folder a job wrote in, whatever it made there; never raises. coreutils' rm, not shutil's removal:
    shutil recurses once per level (a job can nest thousands: RecursionError) and holds a descriptor per level.
    A folder its owner made unreadable is opened up first (find -P: no link is followed, the folder's own name
    included, so a job that swaps a folder for a link cannot point the server's chmod elsewhere)."""
    remove = ["rm", "-rf", "--one-file-system", "--", str(path)]
    opened = ["find", "-P", str(path), "-xdev", "-type", "d", "-exec", "chmod", "u+rwx", "{}", "+"]
    for command in (remove, opened, remove):
        if not os.path.lexists(path):
            return
        with contextlib.suppress(OSError):
            subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def remove_left_behind(root: Path, alive: Callable[[int], bool]) -> None:
    """Remove the folders under `root` named `NAME-PID-N` (a job process's, made by the server PID) whose server
    is gone (stopped by SIGKILL or a crash before it could remove them)."""
    for folder in root.glob("*-*-*"):
        pid = folder.name.rsplit("-", 2)[1]
        if pid.isdigit() and not alive(int(pid)):
            remove_tree(folder)


def trash_of(root: Path) -> Path:
    """Where remove_tree_soon moves the folders of `root` to be removed: beside it, on its file system."""
    return root.with_name(root.name + ".trash")


def remove_tree_soon(path: Path, trash_for: Path | None = None) -> None:
    """Remove a folder a job wrote in: gone from its place at once (moved to the trash of `trash_for`, by default
    its parent), removed off the event loop where one runs (a million files take seconds), else at once."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        remove_tree(path)
        return
    trash = trash_of(trash_for or path.parent)
    try:
        trash.mkdir(exist_ok=True)
        moved = trash / f"{path.name}-{uuid.uuid4().hex}"
        os.rename(path, moved)
    except FileNotFoundError:
        return
    except OSError:  # not movable: removed here, as before
        remove_tree(path)
        return
    loop.run_in_executor(_REMOVER, remove_tree, moved)
