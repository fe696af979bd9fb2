"""The jail's system-call filter, compiled to the BPF program bubblewrap loads (`--seccomp FD`).

Everything is allowed except what lets a process leave or widen its jail, or
reach into other processes and the kernel: new namespaces or joining others'
(setns, unshare, clone with namespace flags), mounts, ptrace and reading or
writing other processes' memory, kernel keyrings, modules, BPF, perf events,
reboot. clone3 answers ENOSYS, so the C library falls back to clone, whose
flags the filter can read (it cannot read clone3's, which sit in memory).
"""

from __future__ import annotations

import errno
from pathlib import Path

# Denied outright (EPERM), as container runtimes' default profiles do.
DENIED = (
    "setns",
    "unshare",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "process_madvise",
    "pidfd_getfd",
    "kcmp",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "open_by_handle_at",
    "name_to_handle_at",
    "lookup_dcookie",
    "iopl",
    "ioperm",
)
# clone flags that create namespaces (linux/sched.h): NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID,
# NEWNET.
CLONE_NAMESPACE_FLAGS = (0x80, 0x20000, 0x2000000, 0x4000000, 0x8000000, 0x10000000, 0x20000000, 0x40000000)


def write_filter(path: Path) -> None:
    """Compile the filter with libseccomp (through pyseccomp) into `path`."""
    import pyseccomp as seccomp

    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in DENIED:
        try:
            rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
        except (RuntimeError, ValueError, OSError):
            continue  # a call this kernel or libseccomp does not know cannot be made either
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    for flag in CLONE_NAMESPACE_FLAGS:
        rules.add_rule(seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    partial = path.with_name(path.name + ".partial")
    with partial.open("wb") as handle:
        rules.export_bpf(handle)
    partial.replace(path)
