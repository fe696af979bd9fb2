"""Isolation of job processes: no network, bounded memory.

Every job process (builds, the worker under ncu, report reading) runs in a new
network namespace when the host allows one (`unshare --net`: only a loopback
interface, down, so nothing outside is reachable). Where it is not allowed, the
result says so. CPU-only processes also get an address-space limit (`prlimit`;
a preexec hook is unsafe in the threaded server); GPU processes do not, because
the CUDA driver reserves far more virtual memory than it uses.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from profsvc.proc import run_process

NO_NETWORK_ISOLATION = (
    "network isolation is unavailable on this host (unshare --net is not permitted): the job could reach the network"
)


@dataclass(frozen=True)
class Sandbox:
    """How this host isolates job processes."""

    network_prefix: tuple[str, ...] = ()
    memory_prefix: tuple[str, ...] = ()

    @property
    def isolates_network(self) -> bool:
        """True when job processes run without network access."""
        return bool(self.network_prefix)

    def wrap(self, argv: list[str]) -> list[str]:
        """argv run inside the job's own network namespace (unchanged where there is none)."""
        return [*self.network_prefix, *argv]

    def wrap_cpu(self, argv: list[str]) -> list[str]:
        """A CPU-only process: no network and a capped address space."""
        return [*self.network_prefix, *self.memory_prefix, *argv]


async def probe_sandbox(cpu_memory_bytes: int) -> Sandbox:
    """Find out whether this host lets a process start in a new network namespace."""
    network: tuple[str, ...] = ()
    memory: tuple[str, ...] = ()
    unshare, prlimit = shutil.which("unshare"), shutil.which("prlimit")
    if unshare is not None and (await run_process([unshare, "--net", "--", "true"], timeout=10)).ok:
        network = (unshare, "--net", "--")
    if prlimit is not None and (await run_process([prlimit, f"--as={cpu_memory_bytes}", "--", "true"], timeout=10)).ok:
        memory = (prlimit, f"--as={cpu_memory_bytes}", "--")
    return Sandbox(network_prefix=network, memory_prefix=memory)
