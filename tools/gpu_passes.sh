#!/usr/bin/env bash
# Replay passes per ncu collection on this GPU: what each section costs, so that the default metric set
# (metrics/metric_sets.toml) holds what the report reads in as few passes as possible.
#   OUT=DIR tools/gpu_passes.sh
# Profiles one kernel (column_sweep of examples/archetypes/bank_conflicts.cu, profsvc's nvcc flags) once per collection:
# --set full, --set basic, each section alone, and the candidate lists below. Writes DIR/passes/summary.tsv
# (name, exit code, wall seconds, passes as ncu printed them) and DIR/passes/reports.tgz (every report and ncu log:
# one archive, since the device tool brings back a limited number of files).
set -u
cd "$(dirname "$0")/.."
out="${OUT:-gpu-out}/passes"
mkdir -p "$out"
bin=$(mktemp -d /tmp/passes.XXXXXX)
reports=$(mktemp -d /tmp/passes-reports.XXXXXX)
trap 'tar czf "$out/reports.tgz" -C "$reports" .' EXIT
nvcc -O3 -lineinfo -arch=sm_90 -o "$bin/kernel" examples/archetypes/bank_conflicts.cu -ldl >"$out/build.log" 2>&1 || exit 1
ncu --list-sets >"$out/sets.txt" 2>&1
ncu --list-sections >"$out/sections.txt" 2>&1
known=$(grep -E '\.section\s*$' "$out/sections.txt" | awk '{print $1}')
printf 'name\trc\twall_s\tpasses\n' >"$out/summary.tsv"

profile() {
  local name=$1
  shift
  local start=$EPOCHREALTIME
  ncu --config-file off --clock-control none --cache-control all --kernel-name regex:column_sweep --launch-count 1 "$@" \
    --export "$reports/$name" --force-overwrite "$bin/kernel" >"$reports/$name.log" 2>&1
  local rc=$?
  local passes
  passes=$(grep -oE '[0-9]+ pass(es)?' "$reports/$name.log" | head -1 | grep -oE '^[0-9]+')
  printf '%s\t%s\t%.2f\t%s\n' "$name" "$rc" "$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')" "${passes:-?}" | tee -a "$out/summary.tsv"
}

# Each candidate: sections that exist in this ncu, as --section arguments.
sections_args() {
  local s
  for s in "$@"; do
    grep -qx "$s" <<<"$known" && printf -- '--section\n%s\n' "$s"
  done
}

profile full --set full --import-source yes
profile basic --set basic
for s in $known; do profile "section-$s" --section "$s"; done
REPORT=(SpeedOfLight LaunchStats Occupancy MemoryWorkloadAnalysis MemoryWorkloadAnalysis_Tables SchedulerStats
  WarpStateStats InstructionStats SourceCounters ComputeWorkloadAnalysis SpeedOfLight_RooflineChart
  SpeedOfLight_HierarchicalHalfRooflineChart SpeedOfLight_HierarchicalTensorRooflineChart)
mapfile -t args < <(sections_args "${REPORT[@]}")
profile report "${args[@]}" --import-source yes
mapfile -t args < <(sections_args "${REPORT[@]}" MemoryWorkloadAnalysis_Chart WorkloadDistribution)
profile report-charts "${args[@]}" --import-source yes
mapfile -t args < <(sections_args "${REPORT[@]/SourceCounters/}")
profile report-no-source "${args[@]}"
NV_COMPUTE_PROFILER_DISABLE_SW_PRE_PASS=1 profile full-no-prepass --set full --import-source yes
