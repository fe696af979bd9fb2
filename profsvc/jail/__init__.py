"""The jail every job process runs in (bubblewrap, a system-call filter, cgroup limits).

`command` builds bubblewrap's argv (pure), `seccomp` the system-call filter,
`cgroup` the limits over a whole process tree, `host` finds and checks what this
host offers and makes one `Launch` per job process.
"""

from profsvc.jail.host import Jail, JailLimits, close_jail, probe_jail

__all__ = ["Jail", "JailLimits", "close_jail", "probe_jail"]
