#!/usr/bin/env bash
# Nsight Compute's own pages of every committed report, the oracle of tests/unit/test_parity.py.
# Run on a host with ncu (the version that wrote the reports, 2025.3.1), from anywhere:
#   OUT=/some/dir tools/capture_ncu_pages.sh
# For each tests/fixtures/**/<stem>.ncu-rep it writes, beside the report,
#   <stem>_details.csv   ncu --import <stem>.ncu-rep --page details --csv --print-units base
#   <stem>_raw.csv       ncu --import <stem>.ncu-rep --page raw --csv --print-units base
# (--import reads the file: no GPU is used), then packs them, paths from the repository root, as
# $OUT/ncu_pages.tgz with ncu's version in $OUT/ncu_pages_env.txt. Unpack at the repository root to commit:
#   tar xzf ncu_pages.tgz
# Base units keep every digit ncu stores for counts, bytes and times; the tests still read the unit
# each row states. Exits non-zero when ncu fails on any report (its error is in <stem>_<page>.err under $OUT).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:?set OUT to the output folder}"
mkdir -p "$out"
ncu=$(command -v ncu) || { echo "ncu is not on PATH" >&2; exit 3; }
{
  date -u
  "$ncu" --version | tail -1
} >"$out/ncu_pages_env.txt" 2>&1
failed=0
pages=()
while IFS= read -r -d '' report; do
  stem="${report%.ncu-rep}"
  for page in details raw; do
    target="${stem}_${page}.csv"
    err="$out/$(basename "$stem")_${page}.err"
    if "$ncu" --import "$report" --page "$page" --csv --print-units base >"$target.tmp" 2>"$err" && [ -s "$target.tmp" ]; then
      mv "$target.tmp" "$target"
      rm -f "$err"
      pages+=("$target")
      printf '%-60s %s rows\n' "$target" "$(grep -c '^"' "$target")"
    else
      rm -f "$target.tmp"
      failed=1
      printf '%-60s FAILED, see %s\n' "$target" "$err"
    fi
  done
done < <(find tests/fixtures -name '*.ncu-rep' -print0 | sort -z)
[ "${#pages[@]}" -gt 0 ] && tar czf "$out/ncu_pages.tgz" "${pages[@]}"
exit "$failed"
