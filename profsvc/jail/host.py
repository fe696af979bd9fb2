"""This host's jail: found and checked once at server start, then one `Launch` per job process.

`probe_jail` looks for bubblewrap (and setpriv where the server runs as root),
compiles the system-call filter, sets up the server's cgroup, and runs a
jailed `true` with every option a job gets. Where any of it fails it returns
the reason, and the server refuses to start (unless told `--unjailed`): a job
is never run silently unjailed.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import secrets
import shutil
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from profsvc.jail.cgroup import Cgroups, JobCgroup, shell
from profsvc.jail.command import JailPlan, bwrap_argv
from profsvc.proc import Launch, run_process
from profsvc.worker.warm import pid_alive

# The system's read-only trees (those that exist); /etc only in part, below.
SYSTEM_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt")
# What programs need of /etc: the loader's cache, users and groups, compiler alternatives, fonts, time zone.
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/localtime",
    "/etc/os-release",
    "/etc/fonts",
)
GPU_DEVICE_GLOBS = ("nvidia[0-9]*", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia-caps")
# The unprivileged user jobs run as when the server runs as root.
NOBODY = 65534
CGROUP_PREFIX = "profsvc."


@dataclass(frozen=True)
class JailLimits:
    """Limits over one jailed process tree."""

    memory_bytes: int = 32 << 30
    pids_max: int = 1024


@dataclass
class Jail:
    """How this host jails job processes (see profsvc.jail.command for what a jail holds)."""

    plan: JailPlan
    seccomp_filter: Path
    cgroups: Cgroups | None
    limits: JailLimits = field(default_factory=JailLimits)
    # Why limits are per process only, where cgroups cannot be used ('' when they can).
    cgroup_reason: str = ""
    gpu_devices: tuple[Path, ...] = ()
    _serial: Iterator[int] = field(default_factory=itertools.count)

    @property
    def uid(self) -> int:
        """The user job processes run as."""
        return self.plan.uid if self.plan.uid is not None else os.geteuid()

    def describe(self) -> str:
        """One line for logs and capabilities."""
        limits = "cgroup" if self.cgroups is not None else f"per-process rlimits ({self.cgroup_reason})"
        return (
            f"bubblewrap ({self.plan.bwrap}), uid {self.uid}, seccomp, "
            f"memory {self.limits.memory_bytes >> 20} MiB and {self.limits.pids_max} tasks per job via {limits}"
        )

    def launch(
        self,
        argv: Sequence[str],
        *,
        writable: Sequence[Path],
        gpu: bool = False,
        readonly: Sequence[Path] = (),
        workdir: Path | None = None,
        pass_fds: Sequence[int] = (),
    ) -> Launch:
        """A jailed launch of argv: `writable` folders (the job's own) read-write, `readonly` ones added;
        `pass_fds` stay open in the jailed process."""
        for folder in writable:
            self.own(folder)
        fd = os.open(self.seccomp_filter, os.O_RDONLY)
        try:
            plan = replace(
                self.plan,
                # Looked up for each process: an interface may come or go (a driver reloaded, a device removed),
                # and bubblewrap cannot make a folder that is gone inside the read-only /sys.
                hidden_dirs=(*self.plan.hidden_dirs, *network_folders()),
                readonly=tuple(readonly),
                writable=tuple(writable),
                devices=self.gpu_devices if gpu else (),
                workdir=workdir or (writable[0] if writable else None),
                seccomp_fd=fd,
            )
            command = bwrap_argv(plan, argv)
            tree: JobCgroup | None = None
            if self.cgroups is not None:
                tree = self.cgroups.create(f"job{next(self._serial)}", **self._limits())
                command = [*tree.enter_prefix(shell()), *command]
            else:
                command = self._rlimits(command)
        except BaseException:
            os.close(fd)
            raise
        return Launch(argv=tuple(command), pass_fds=(fd, *pass_fds), tree=tree, owned_fds=(fd,))

    def _limits(self) -> dict[str, int]:
        return {"memory_bytes": self.limits.memory_bytes, "pids_max": self.limits.pids_max}

    def _rlimits(self, command: list[str]) -> list[str]:
        prlimit = shutil.which("prlimit")
        if prlimit is None:
            return command
        # Per process only: without cgroups, children's memory does not add up (stated in describe()).
        return [prlimit, f"--nproc={self.limits.pids_max}", "--", *command]

    def own_descriptor(self, fd: int) -> None:
        """Give one open folder to the jail's user (by descriptor: a path inside a jail's folder can be swapped)."""
        if self.plan.uid is not None and os.geteuid() == 0:
            os.fchown(fd, self.plan.uid, self.plan.gid or self.plan.uid)

    def own(self, folder: Path) -> None:
        """Give a job folder (and what is in it) to the jail's user, so the job can write there."""
        if self.plan.uid is None or os.geteuid() != 0:
            return
        for path in (folder, *folder.rglob("*")):
            os.chown(path, self.plan.uid, self.plan.gid or self.plan.uid, follow_symlinks=False)


def _existing(paths: Iterable[str | Path]) -> list[Path]:
    return [Path(p) for p in paths if p and Path(p).exists()]


def _covered(path: Path, trees: Sequence[Path]) -> bool:
    return any(path == tree or tree in path.parents for tree in trees)


def readonly_trees(extra: Iterable[str | Path] = ()) -> tuple[list[Path], list[tuple[str, Path]]]:
    """The read-only trees and merged-/usr symlinks every jail gets: system, /etc in part, Python and profsvc."""
    import profsvc

    symlinks: list[tuple[str, Path]] = []
    trees: list[Path] = []
    for name in SYSTEM_TREES:
        path = Path(name)
        if path.is_symlink():
            symlinks.append((os.readlink(path), path))
        elif path.is_dir():
            trees.append(path)
    # Not the folder the server was started in (`python -m` puts it first on sys.path; an empty entry of a
    # search path means it too): it may hold anything (/etc, say).
    here = os.getcwd()
    python = [sys.prefix, sys.base_prefix, sys.exec_prefix, *(p for p in sys.path if p not in ("", here))]
    packages = [Path(profsvc.__file__).resolve().parent.parent]
    search = [*os.environ.get("LD_LIBRARY_PATH", "").split(":"), *os.environ.get("PYTHONPATH", "").split(":")]
    with_env = [p for p in search if p not in ("", ".", here)]
    home = Path.home()
    for path in _existing([*ETC_FILES, *python, *packages, *with_env, *extra]):
        path = path.resolve()
        if path in (Path("/"), home) or _covered(path, trees):
            continue
        trees.append(path)
    # Fewest mounts: drop trees inside others.
    trees = sorted(set(trees), key=lambda p: len(p.parts))
    kept: list[Path] = []
    for tree in trees:
        if not _covered(tree, kept):
            kept.append(tree)
    return kept, symlinks


def network_folders(sys_root: Path = Path("/sys")) -> tuple[Path, ...]:
    """The /sys folders that name the host's network interfaces (and give their hardware addresses): the class
    folder and each interface's parent, where its device lives (`devices/virtual/net`, a PCI device's `net`).
    A job has a network namespace of its own, but a bind of /sys still lists the host's interfaces."""
    listing = sys_root / "class" / "net"
    if not listing.is_dir():
        return ()
    parents = {(listing / name).resolve().parent for name in os.listdir(listing)}
    # Only folders of this /sys: a link that leads elsewhere is not one to cover.
    inside = {p for p in parents if p.is_dir() and p.is_relative_to(sys_root.resolve())}
    return (listing, *sorted(inside))


def gpu_devices() -> tuple[Path, ...]:
    """The NVIDIA device nodes a GPU job needs."""
    found = [p for pattern in GPU_DEVICE_GLOBS for p in Path("/dev").glob(pattern)]
    return tuple(sorted(set(found)))


async def probe_jail(
    state_dir: Path,
    *,
    hidden_files: Sequence[Path] = (),
    extra_readonly: Sequence[str | Path] = (),
    limits: JailLimits | None = None,
    bwrap: str | None = None,
) -> Jail | str:
    """This host's jail, checked by running one jailed process; the reason when there is none."""
    bwrap = bwrap or os.environ.get("PROFSVC_BWRAP") or shutil.which("bwrap")
    if not bwrap or not os.access(bwrap, os.X_OK):
        return "bubblewrap (bwrap) is not installed: apt-get install bubblewrap, or set PROFSVC_BWRAP"
    try:
        import pyseccomp  # noqa: F401
    except (ImportError, OSError) as error:
        return f"the system-call filter needs pyseccomp and libseccomp ({error})"
    from profsvc.jail.seccomp import write_filter

    jail_dir = state_dir / "jail"
    jail_dir.mkdir(parents=True, exist_ok=True)
    seccomp_filter = jail_dir / "seccomp.bpf"
    write_filter(seccomp_filter)
    setpriv, uid, gid = "", None, None
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv") or ""
        if not setpriv:
            return "the server runs as root but setpriv (util-linux) is missing to run jobs as an unprivileged user"
        uid = gid = NOBODY
    readonly, symlinks = readonly_trees(extra_readonly)
    hidden_dirs = (state_dir.resolve(),)
    hidden = tuple(p.resolve() for p in hidden_files if p.exists() and _covered(p.resolve(), readonly))
    plan = JailPlan(
        bwrap=bwrap,
        system=tuple(readonly),
        symlinks=tuple(symlinks),
        hidden_dirs=hidden_dirs,
        hidden_files=hidden,
        setpriv=setpriv,
        uid=uid,
        gid=gid,
    )
    # One parent per jail: several servers in one process (an embedded service, tests) keep apart.
    cgroups = Cgroups.detect(f"{CGROUP_PREFIX}{os.getpid()}.{secrets.token_hex(4)}")
    reason = ""
    if isinstance(cgroups, str):
        cgroups, reason = None, cgroups
    else:
        cgroups.sweep(CGROUP_PREFIX, alive=pid_alive)
    jail = Jail(plan, seccomp_filter, cgroups, limits or JailLimits(), reason, gpu_devices())
    probe = jail_dir / f"probe-{os.getpid()}"
    probe.mkdir(exist_ok=True)
    try:
        launch = jail.launch(["/bin/sh", "-c", "echo jailed > probe"], writable=[probe])
        result = await run_process(launch.argv, cwd=probe, timeout=30, launch=launch)
        if not result.ok or not (probe / "probe").is_file():
            return f"bubblewrap could not start a jailed process: {result.stderr.strip()[-300:] or result.returncode}"
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    return jail


async def close_jail(jail: Jail | None) -> None:
    """Remove the server's cgroup parents at shutdown."""
    if jail is not None and jail.cgroups is not None:
        await asyncio.to_thread(jail.cgroups.close)
