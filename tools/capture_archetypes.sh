#!/usr/bin/env bash
# Capture every archetype kernel (examples/archetypes/*.cu) under ncu on a GPU
# host, as the fixtures tests/unit/test_archetypes.py reads. Run from the
# repository root: OUT=/some/dir tools/capture_archetypes.sh
# Writes $OUT/archetypes/<name>.ncu-rep, <name>.log (ncu's output) and
# <name>.build.log (nvcc's), and prints one line per archetype. Copy the
# reports to tests/fixtures/archetypes/ to commit them.
set -u
cd "$(dirname "$0")/.."
out="${OUT:?set OUT to the output folder}/archetypes"
bin=$(mktemp -d /tmp/archetypes.XXXXXX)
mkdir -p "$out"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  ncu --version | tail -1
  nvcc --version | tail -1
} >"$out/env.txt" 2>&1

# nvcc is the slow step and needs no GPU: build all at once, then profile one at a time.
# The flags are profsvc's own (profsvc/build/nvcc.py), so the reports show what profsvc would.
for src in examples/archetypes/*.cu; do
  name=$(basename "$src" .cu)
  (
    nvcc -O3 -lineinfo -arch=sm_90 -o "$bin/$name" "$src" -ldl >"$out/$name.build.log" 2>&1
    echo $? >"$bin/$name.build-rc"
  ) &
done
wait

for src in examples/archetypes/*.cu; do
  name=$(basename "$src" .cu)
  build_rc=$(cat "$bin/$name.build-rc")
  if [ "$build_rc" != 0 ]; then
    printf '%-18s build failed (nvcc exit %s), see %s.build.log\n' "$name" "$build_rc" "$name"
    continue
  fi
  # The NVTX range each program pushes is named after its file: only the launch inside it is profiled.
  # timeout: a kernel that hangs under replay must not hold up the others.
  timeout 150 ncu --config-file off --clock-control none --cache-control all --replay-mode kernel \
    --nvtx --nvtx-include "$name/" --set full --import-source yes \
    --export "$out/$name.ncu-rep" --force-overwrite "$bin/$name" >"$out/$name.log" 2>&1
  rc=$?
  # ncu's progress line ends "- N passes"; no such line means nothing was profiled.
  passes=$(grep -oE '[0-9]+ passes' "$out/$name.log" | tail -1 | cut -d' ' -f1)
  printf '%-18s exit %-3s passes %s\n' "$name" "$rc" "${passes:-none}"
done
rm -rf "$bin"
