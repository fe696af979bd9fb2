"""Memory and process-count limits over a whole jailed process tree, through cgroups.

Each jailed process gets a cgroup of its own under the server's (`profsvc.<server
pid>`), entered before bubblewrap starts, so everything it forks is counted and
killed with it: a fork bomb meets `pids.max`, children's memory adds up against
`memory.max`, and a daemon that left its process group still dies. cgroup v2
(one hierarchy) and v1 (the memory and pids hierarchies) are both handled;
where neither can be written, `Cgroups.detect` says why and limits fall back to
per-process rlimits.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from profsvc.proc import SERVER_NOTE

ROOT = Path("/sys/fs/cgroup")
# Enters the cgroups named before `--` (writes its pid into each cgroup.procs), then runs the rest.
_ENTER = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 126; shift; done; shift; exec "$@"'


@dataclass(frozen=True)
class JobCgroup:
    """One jailed process tree's cgroup (one folder per hierarchy)."""

    folders: tuple[Path, ...]
    v2: bool

    def enter_prefix(self, shell: str = "/bin/sh") -> list[str]:
        """argv prefix that moves the process into this cgroup before it starts the jail."""
        return [shell, "-c", _ENTER, "profsvc-cgroup", *(str(f / "cgroup.procs") for f in self.folders), "--"]

    def pids(self) -> list[int]:
        """The processes in it now."""
        found: set[int] = set()
        for folder in self.folders:
            with contextlib.suppress(OSError, ValueError):
                found.update(int(line) for line in (folder / "cgroup.procs").read_text().split())
        return sorted(found)

    def kill(self) -> None:
        """Kill every process in it (cgroup.kill where the kernel has it, else one by one until none is left)."""
        if self.v2 and (self.folders[0] / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                (self.folders[0] / "cgroup.kill").write_text("1")
                return
        for _ in range(100):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        """Remove the folders once empty (a folder whose processes are still exiting stays until the next sweep)."""
        for folder in self.folders:
            with contextlib.suppress(OSError):
                folder.rmdir()

    def why_killed(self) -> str:
        """Why the kernel killed a process of the tree, in a line for the job's result ('' where it did not): its
        memory limit, which counts every process of the job together, or the host's memory running out."""
        for folder in self.folders:
            with contextlib.suppress(OSError, ValueError):
                if self.v2:
                    # oom_kill: its processes killed by any OOM killer; oom: times its own limit was met.
                    events = dict(line.split() for line in (folder / "memory.events").read_text().splitlines())
                    killed, at_limit = int(events.get("oom_kill", "0")), int(events.get("oom", "0")) > 0
                    limit = (folder / "memory.max").read_text().strip()
                else:
                    control = dict(line.split() for line in (folder / "memory.oom_control").read_text().splitlines())
                    killed = int(control.get("oom_kill", "0"))
                    at_limit = int((folder / "memory.failcnt").read_text()) > 0
                    limit = (folder / "memory.limit_in_bytes").read_text().strip()
                if not killed:
                    return ""
                if not at_limit or not limit.isdigit():
                    return f"{SERVER_NOTE}the host ran out of memory and the kernel killed one of the job's processes"
                size = int(limit)
                shown = f"{size / 2**30:.1f} GiB" if size >= 2**30 else f"{size / 2**20:.0f} MiB"
                return (
                    f"{SERVER_NOTE}the job ran out of memory on the host: its processes together reached the job "
                    f"memory limit ({shown}) and the kernel killed one"
                )
        return ""


@dataclass(frozen=True)
class Cgroups:
    """The server's cgroup parent folders, one per hierarchy, under which each jailed process gets its own."""

    parents: tuple[Path, ...]
    v2: bool

    @classmethod
    def detect(cls, name: str, root: Path = ROOT) -> Cgroups | str:
        """Create the server's parent cgroup `name`; a reason string when this host does not let it."""
        if (root / "cgroup.controllers").is_file():
            controllers = (root / "cgroup.controllers").read_text().split()
            if not {"memory", "pids"} <= set(controllers):
                return f"cgroup v2 without the memory and pids controllers (it has: {' '.join(controllers)})"
            parent = root / name
            try:
                parent.mkdir(exist_ok=True)
                (parent / "cgroup.subtree_control").write_text("+memory +pids")
            except OSError as error:
                return f"cannot create a cgroup under {root} ({error.strerror})"
            return cls((parent,), v2=True)
        folders = (root / "memory", root / "pids")
        if not all((f / "cgroup.procs").is_file() for f in folders):
            return f"no cgroup v2 at {root} and no v1 memory and pids hierarchies"
        parents = tuple(f / name for f in folders)
        try:
            for parent in parents:
                parent.mkdir(exist_ok=True)
        except OSError as error:
            return f"cannot create a cgroup under {root} ({error.strerror})"
        return cls(parents, v2=False)

    def create(self, name: str, memory_bytes: int, pids_max: int) -> JobCgroup:
        """A new cgroup for one jailed process tree, with its limits set."""
        folders = tuple(parent / name for parent in self.parents)
        for folder in folders:
            folder.mkdir()
        if self.v2:
            (folders[0] / "memory.max").write_text(str(memory_bytes))
            with contextlib.suppress(OSError):
                (folders[0] / "memory.swap.max").write_text("0")
            (folders[0] / "pids.max").write_text(str(pids_max))
        else:
            (folders[0] / "memory.limit_in_bytes").write_text(str(memory_bytes))
            (folders[1] / "pids.max").write_text(str(pids_max))
        return JobCgroup(folders, self.v2)

    def sweep(self, prefix: str, alive: Callable[[int], bool]) -> None:
        """Remove the parents of servers that are gone (`prefix<pid>.<id>` folders), killing what is left."""
        for parent in self.parents:
            for folder in parent.parent.glob(f"{prefix}*"):
                pid = folder.name.removeprefix(prefix).partition(".")[0]
                if not pid.isdigit() or alive(int(pid)):
                    continue
                for child in [c for c in folder.iterdir() if c.is_dir()]:
                    JobCgroup((child,), self.v2).kill()
                    with contextlib.suppress(OSError):
                        child.rmdir()
                with contextlib.suppress(OSError):
                    folder.rmdir()

    def close(self) -> None:
        """Remove the server's parents (their job cgroups must be gone)."""
        for parent in self.parents:
            for child in [c for c in parent.iterdir() if c.is_dir()] if parent.is_dir() else []:
                JobCgroup((child,), self.v2).kill()
                with contextlib.suppress(OSError):
                    child.rmdir()
            with contextlib.suppress(OSError):
                parent.rmdir()


def shell() -> str:
    """The POSIX shell that enters a cgroup."""
    return shutil.which("sh") or "/bin/sh"
