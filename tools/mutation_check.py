"""Break the catalog and the rule table on purpose, one edit at a time, and check the tests catch each.

Each mutation is applied to a temporary copy of the source tree; the figure and rule tests run there and must
fail (and they must pass on the unbroken copy first, so a failure is the edit's doing). CI runs this after the
suite (.ci/run); on two cores it takes a few minutes.

    python tools/mutation_check.py            # all mutations
    python tools/mutation_check.py -k l1_hit  # those whose name contains l1_hit
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = [
    "tests/unit/test_parity.py",
    "tests/unit/test_catalog_figures.py",
    "tests/unit/test_roofline.py",
    "tests/unit/test_rules.py",
    "tests/unit/test_archetypes.py",
    "tests/unit/test_figure_truth.py",
]


# An entry's own sub-tables ([[sass_count.match]], [rule.params]) belong to it; the next entry starts at the next
# array-of-tables header without a dot ([[figure]], [[sass_count]], [[rule]], ...).
NEXT_ENTRY = re.compile(r"^\[\[[^.\]]+\]\]", re.MULTILINE)


@dataclass(frozen=True)
class Mutation:
    """Replace `old` with `new` inside one entry (the one whose `key = "entry"`) of a table, its sub-tables included."""

    name: str
    table: str
    entry: str
    old: str
    new: str
    key: str = "name"

    def apply(self, root: Path) -> None:
        path = root / "metrics" / self.table
        text = path.read_text()
        start = text.index(f'{self.key} = "{self.entry}"\n')
        following = NEXT_ENTRY.search(text, start)
        end = following.start() if following else len(text)
        block = text[start:end]
        if block.count(self.old) != 1:
            raise SystemExit(f"{self.name}: {self.old!r} is not in {self.table}'s {self.entry!r} exactly once")
        path.write_text(text[:start] + block.replace(self.old, self.new) + text[end:])


MUTATIONS = [
    Mutation(
        "l1_hit_rate_pct reads L2's hit rate",
        "catalog.toml",
        "l1_hit_rate_pct",
        '"l1tex__t_sector_hit_rate.pct"',
        '"lts__t_sector_hit_rate.pct"',
    ),
    Mutation(
        "tensor_flop drops its FP16 term",
        "catalog.toml",
        "tensor_flop",
        'formula = "fp64 + tf32 + bf16 + fp16 + fp8_dense + fp8_sparse"',
        'formula = "fp64 + tf32 + bf16 + fp8_dense + fp8_sparse"',
    ),
    Mutation(
        "pipe_tensor_pct reads the FP64 pipe",
        "catalog.toml",
        "pipe_tensor_pct",
        '"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"',
        '"sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_elapsed"',
    ),
    Mutation(
        "dram_throughput_pct reads the memory speed of light",
        "catalog.toml",
        "dram_throughput_pct",
        '["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", ',
        '["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", ',
    ),
    Mutation(
        "global_load_sectors_per_request inverted",
        "catalog.toml",
        "global_load_sectors_per_request",
        'formula = "sectors / requests"',
        'formula = "requests / sectors"',
    ),
    Mutation(
        "pipe_tensor_mma_pct reads the whole tensor pipe (HFMA2.MMA moves too)",
        "catalog.toml",
        "pipe_tensor_mma_pct",
        '"sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.avg.pct_of_peak_sustained_elapsed"',
        '"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"',
    ),
    Mutation(
        "fp16_idiom_flop takes a zero addend for a zero factor",
        "catalog.toml",
        "fp16_idiom_flop",
        'opcode = "HFMA2"\nzero_sources = [1, 2]\n',
        'opcode = "HFMA2"\nzero_sources = [3]\n',
    ),
    Mutation(
        "local_load_instructions counts local stores",
        "catalog.toml",
        "local_load_instructions",
        'instances = ["LDL"]',
        'instances = ["STL"]',
    ),
    Mutation(
        "dram_near_peak's threshold raised from 75 % to 90 %",
        "rules.toml",
        "dram_near_peak",
        "min_dram_pct = 75",
        "min_dram_pct = 90",
        key="id",
    ),
    Mutation(
        "uncoalesced_global_loads's ideal lowered to 8 sectors",
        "rules.toml",
        "uncoalesced_global_loads",
        "max_ideal_sectors = 16",
        "max_ideal_sectors = 8",
        key="id",
    ),
    Mutation(
        "local_memory_arrays fires where every local access is a spill",
        "rules.toml",
        "local_memory_arrays",
        'condition = "local_load_instructions + local_store_instructions > spill_instructions"',
        'condition = "local_load_instructions + local_store_instructions >= spill_instructions"',
        key="id",
    ),
]


def _copy_tree(target: Path) -> None:
    """The working tree's files (committed or not, ignored ones left out), with metrics/ also as profsvc/_tables.

    The editable install maps the package profsvc._tables to the original metrics/ folder; a real folder at
    profsvc/_tables in the copy, found first on sys.path, makes the copy read its own (mutated) tables.
    """
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = ROOT / os.fsdecode(name)
        if source.is_file():
            (target / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / os.fsdecode(name))
    os.symlink(Path("..") / "metrics", target / "profsvc" / "_tables")


def _pytest(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "client")])}
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-o", "addopts=", *TESTS]
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600)


def _first_failure(output: str) -> str:
    found = re.search(r"^FAILED (\S+)", output, re.MULTILINE) or re.search(r"^ERROR (\S+)", output, re.MULTILINE)
    return found.group(1) if found else output.strip().splitlines()[-1]


def _tables_folder(root: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(root)}
    code = "from profsvc.metrics.tables import _tables; print(_tables())"
    return subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True).stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="run only the mutations whose name contains this")
    chosen = [m for m in MUTATIONS if parser.parse_args().k in m.name]
    survived: list[str] = []
    with tempfile.TemporaryDirectory(prefix="profsvc-mutation-") as scratch:
        pristine = Path(scratch) / "pristine"
        _copy_tree(pristine)
        if not _tables_folder(pristine).strip().startswith(str(pristine)):
            print(f"the copy does not read its own tables: {_tables_folder(pristine)!r}")
            return 2
        started = time.monotonic()
        baseline = _pytest(pristine)
        if baseline.returncode != 0:
            print(f"the tests fail on the unbroken tree ({_first_failure(baseline.stdout)}):")
            print(baseline.stdout[-3000:])
            return 2
        summary = baseline.stdout.strip().splitlines()[-1]
        print(f"unbroken tree: {summary} ({time.monotonic() - started:.0f} s)")
        for mutation in chosen:
            mutant = Path(scratch) / "mutant"
            shutil.copytree(pristine, mutant, symlinks=True)
            mutation.apply(mutant)
            result = _pytest(mutant)
            # pytest exits 1 when a test failed; anything else (an error collecting, no tests) is no catch.
            if result.returncode == 1:
                print(f"caught    {mutation.name}: {_first_failure(result.stdout)}")
            else:
                survived.append(mutation.name)
                print(f"SURVIVED  {mutation.name} (pytest exit {result.returncode})")
            shutil.rmtree(mutant)
    if survived:
        print(f"{len(survived)} of {len(chosen)} deliberate errors went unnoticed by the tests")
        return 1
    print(f"all {len(chosen)} deliberate errors caught")
    return 0


if __name__ == "__main__":
    sys.exit(main())
