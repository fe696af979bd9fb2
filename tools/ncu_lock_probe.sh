#!/usr/bin/env bash
# Two facts about ncu that the warm ncu workers depend on (profsvc.scheduler.warm_pool):
#   lock   Does a process under ncu that has profiled a kernel and then waits hold up another ncu's first
#          kernel? A profiles one kernel, then sleeps 20 s; B starts under a second ncu once A has profiled
#          and profiles one kernel too: when B's kernel returns tells per-kernel from per-process serialization.
#   group  Which process group and session ncu gives its target (profsvc kills a job's group and session), and
#          whether a child the target starts after profiling a kernel can profile one too (a job in a primed
#          worker that starts a GPU process) or waits for its parent's exit (a deadlock).
# Usage: tools/ncu_lock_probe.sh OUTDIR [lock|group|all]
set -uo pipefail
out="${1:?OUTDIR}"
what="${2:-all}"
mkdir -p "$out"
cat >"$out/probe.py" <<'PY'
import os, sys, time
name, linger = sys.argv[1], float(sys.argv[2])
print(name, "pid pgid sid", os.getpid(), os.getpgid(0), os.getsid(0), flush=True)
import torch
x = torch.empty(1, device="cuda")
print(name, "context", f"{time.time():.2f}", flush=True)
torch.cuda.nvtx.range_push("probe")
x.fill_(1.0)
torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print(name, "kernel returned", f"{time.time():.2f}", flush=True)
if len(sys.argv) > 3:
    import subprocess
    child = subprocess.run([sys.executable, __file__, sys.argv[3], "0"], timeout=25, check=False)
    print(name, "child exit", child.returncode, f"{time.time():.2f}", flush=True)
time.sleep(linger)
print(name, "exit", f"{time.time():.2f}", flush=True)
PY
ncu_probe() {
  ncu --clock-control none --nvtx --nvtx-include probe/ --metrics gpu__time_duration.sum -f -o "$out/$1" \
    python3 "$out/probe.py" "$@"
}
if [ "$what" != group ]; then
  echo "start $(date +%s.%N | cut -c1-13)"
  ncu_probe A 20 >"$out/A.txt" 2>&1 &
  a=$!
  for _ in $(seq 300); do grep -q "kernel returned" "$out/A.txt" && break; sleep 0.1; done
  echo "A profiled $(date +%s.%N | cut -c1-13)"
  timeout 60 bash -c "$(declare -f ncu_probe); out=$out; ncu_probe B 0" >"$out/B.txt" 2>&1
  echo "B exit $? $(date +%s.%N | cut -c1-13)"
  wait $a
  echo "A exit $? $(date +%s.%N | cut -c1-13)"
  cat "$out/A.txt" "$out/B.txt"
fi
if [ "$what" != lock ]; then
  # ncu started as a session leader, as profsvc starts it.
  setsid bash -c "echo ncu pid pgid sid \$\$ \$(ps -o pgid= \$\$) \$(ps -o sid= \$\$); $(declare -f ncu_probe); out=$out; ncu_probe C 0 D" >"$out/C.txt" 2>&1
  grep -E "pid pgid sid|returned|child exit|Profiling" "$out/C.txt"
fi
