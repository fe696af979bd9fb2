#!/usr/bin/env bash
# Capture the figure-case kernels (examples/figures/*.cu) under ncu on a GPU host, as the fixtures
# tests/unit/test_figure_cases.py reads. Run from anywhere:
#   OUT=/some/dir tools/capture_fixtures.sh
# Writes tests/fixtures/figures/<name>.ncu-rep and env.txt in the source tree, and copies them with
# the logs (<name>.log: ncu's output, <name>.build.log: nvcc's with -Xptxas -v) to $OUT/figures/.
# Prints one line per kernel; exits non-zero when a kernel failed to build or to profile.
# Takes about a minute on an H200 (four kernels, 38 passes each).
set -u
cd "$(dirname "$0")/.."
fixtures=tests/fixtures/figures
logs="${OUT:-$(mktemp -d /tmp/figures-logs.XXXXXX)}/figures"
bin=$(mktemp -d /tmp/figures.XXXXXX)
mkdir -p "$fixtures" "$logs"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  ncu --version | tail -1
  nvcc --version | tail -1
} >"$fixtures/env.txt" 2>&1

# nvcc needs no GPU: build all at once, then profile one at a time. profsvc's own flags
# (profsvc/build/nvcc.py), plus -Xptxas -v for the stack frame and spill bytes in the build log.
for src in examples/figures/*.cu; do
  name=$(basename "$src" .cu)
  (
    nvcc -O3 -lineinfo -arch=sm_90 -Xptxas -v -o "$bin/$name" "$src" -ldl >"$logs/$name.build.log" 2>&1
    echo $? >"$bin/$name.build-rc"
  ) &
done
wait

failed=0
for src in examples/figures/*.cu; do
  name=$(basename "$src" .cu)
  build_rc=$(cat "$bin/$name.build-rc")
  if [ "$build_rc" != 0 ]; then
    printf '%-12s build failed (nvcc exit %s), see %s.build.log\n' "$name" "$build_rc" "$name"
    failed=1
    continue
  fi
  # The same collection as the archetype fixtures (tools/capture_archetypes.sh): only the launch inside
  # the NVTX range named after the file; timeout: a kernel that hangs under replay must not hold up the rest.
  timeout 120 ncu --config-file off --clock-control none --cache-control all --replay-mode kernel \
    --nvtx --nvtx-include "$name/" --set full --import-source yes \
    --export "$fixtures/$name.ncu-rep" --force-overwrite "$bin/$name" >"$logs/$name.log" 2>&1
  rc=$?
  # ncu's progress line ends "- N passes"; no such line means nothing was profiled.
  passes=$(grep -oE '[0-9]+ passes' "$logs/$name.log" | tail -1 | cut -d' ' -f1)
  printf '%-12s exit %-3s passes %s\n' "$name" "$rc" "${passes:-none}"
  if [ "$rc" != 0 ] || [ -z "$passes" ]; then
    failed=1
  fi
done
cp "$fixtures"/*.ncu-rep "$fixtures/env.txt" "$logs/" 2>/dev/null
rm -rf "$bin"
exit "$failed"
