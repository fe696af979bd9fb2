"""The jail's command line: a pure builder of bubblewrap's argv (no process is started here).

Every job process runs as `bwrap <options> -- argv`: its own user, PID, mount,
IPC, UTS, cgroup and network namespaces; the toolchain and Python read-only at
their host paths (so argv and file names are the same inside and out); one
private writable folder, also at its host path; its own /proc, /dev and /tmp;
the host's /sys read-only (hardware topology, as a container sees it) but its
cgroups; the GPU device nodes only for a GPU job; and whatever the plan hides
(the server's state folder, its token and TLS files, the /sys folders that name
the host's network interfaces) replaced by an empty tmpfs or an empty file even
where it lies under a read-only tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

JAIL_HOSTNAME = "profsvc-job"


@dataclass(frozen=True)
class JailPlan:
    """What one jailed process sees.

    Every path is mounted at its own path: first the `system` trees (read-only), then the `hidden` ones are
    covered, then the job's `readonly` and `writable` folders, so a job's folder inside the hidden state
    folder is still visible; `symlinks` recreate merged-/usr links such as /lib -> usr/lib.

    Where the server runs as root, bubblewrap runs as root too (it can read every tree it mounts) and the job
    itself runs as `uid`/`gid` through `setpriv` inside the jail, with no capabilities; otherwise bubblewrap
    runs in a user namespace of its own as the server's user, with every capability dropped.
    """

    bwrap: str
    system: tuple[Path, ...]
    readonly: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    symlinks: tuple[tuple[str, Path], ...] = ()
    hidden_dirs: tuple[Path, ...] = ()
    hidden_files: tuple[Path, ...] = ()
    devices: tuple[Path, ...] = ()
    workdir: Path | None = None
    seccomp_fd: int | None = None
    setpriv: str = ""
    uid: int | None = None
    gid: int | None = None

    @property
    def privileged(self) -> bool:
        """True when bubblewrap runs as root and the job drops to `uid` inside the jail."""
        return bool(self.setpriv) and self.uid is not None


def _namespaces(plan: JailPlan) -> list[str]:
    if plan.privileged:
        # No user namespace: the job's user is a real unprivileged one (set by setpriv below).
        return ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    return ["--unshare-all", "--cap-drop", "ALL"]


def _parents(paths: Sequence[Path], inside: Sequence[Path], made: set[Path]) -> list[str]:
    """Create the folders that lead to mount points, readable by the job's user (bubblewrap's own are 0700).

    Folders inside the `inside` trees exist there already (read-only mounts) and are not made again.
    """
    options: list[str] = []
    for path in paths:
        for parent in reversed(path.parents):
            if parent == Path("/") or parent in made or any(t == parent or t in parent.parents for t in inside):
                continue
            made.add(parent)
            options += ["--perms", "0755", "--dir", str(parent)]
    return options


def _mounts(plan: JailPlan) -> list[str]:
    made: set[Path] = set()
    # /tmp first: a tree under it (a checkout, a package folder on PYTHONPATH) is mounted on top, and the
    # folders leading to it are made in the tmpfs (made before it, they would be hidden, and bubblewrap's own
    # are 0700: closed to the job's user).
    options = ["--tmpfs", "/tmp", *_parents(plan.system, (), made)]
    for link, target in plan.symlinks:
        options += ["--symlink", link, str(target)]
    for path in plan.system:
        options += ["--ro-bind", str(path), str(path)]
    options += ["--proc", "/proc", "--dev", "/dev"]
    # hwloc, in the CUDA and profiler stacks, reads the CPU topology there; without it every program's
    # output starts with its warning.
    options += ["--ro-bind-try", "/sys", "/sys"]
    # But not the host's cgroups: every job's would show there (their processes, their memory).
    options += ["--tmpfs", "/sys/fs/cgroup"]
    for device in plan.devices:
        options += ["--dev-bind", str(device), str(device)]
    for path in plan.hidden_dirs:
        options += ["--tmpfs", str(path)]
    for path in plan.hidden_files:
        options += ["--ro-bind", "/dev/null", str(path)]
    options += _parents([*plan.readonly, *plan.writable], plan.system, made)
    for path in plan.readonly:
        options += ["--ro-bind", str(path), str(path)]
    for path in plan.writable:
        options += ["--bind", str(path), str(path)]
    return options


def bwrap_argv(plan: JailPlan, argv: Sequence[str]) -> list[str]:
    """The command line that runs argv inside the plan's jail."""
    options = [plan.bwrap, *_namespaces(plan), "--die-with-parent", "--new-session", "--hostname", JAIL_HOSTNAME]
    options += _mounts(plan)
    if plan.workdir is not None:
        options += ["--chdir", str(plan.workdir)]
    if plan.seccomp_fd is not None:
        options += ["--seccomp", str(plan.seccomp_fd)]
    user: list[str] = []
    if plan.privileged:
        ids = [f"--reuid={plan.uid}", f"--regid={plan.gid}", "--clear-groups"]
        user = [plan.setpriv, *ids, "--inh-caps=-all", "--bounding-set=-all", "--"]
    return [*options, "--", *user, *argv]
