"""Kernel name filters: matched in time linear in the name, whatever the pattern; RE2's limits said plainly."""

from __future__ import annotations

import subprocess
import sys

import pytest

from profsvc.config import Limits
from profsvc.metrics.name_filter import NamePatternError, name_pattern
from profsvc.server.validation import validate_filter
from profsvc_contract.errors import InvalidRequest, Reason
from profsvc_contract.models import KernelFilter

# Nested stars before a letter that never comes: a backtracking engine tries every way to split the name among
# them (Python's `re` did not finish this search on a 17-character name within 5 s).
NESTED = "(.*.*.*)*Z"


def test_a_nested_pattern_on_long_names_answers_at_once():
    child = (
        "import time\nfrom profsvc.metrics.name_filter import name_pattern\n"
        f"pattern = name_pattern({NESTED!r})\nstart = time.perf_counter()\n"
        "found = [pattern.search('vga_linear_kernel' * n) for n in range(1, 200)]\n"
        "assert not any(found)\nprint(time.perf_counter() - start)\n"
    )
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout) < 1.0


def test_patterns_match_as_ncu_filters_do():
    assert name_pattern("gemm|conv").search("void ampere_sgemm_128x64_nn")
    assert name_pattern("^vga_linear_kernel$").search("vga_linear_kernel")
    assert not name_pattern("^linear").search("vga_linear_kernel")


@pytest.mark.parametrize(("pattern", "why"), [("(?=gemm)g", "perl operator"), (r"(a)\1", "escape")])
def test_lookaround_and_backreferences_are_refused_with_re2s_reason(pattern, why):
    with pytest.raises(NamePatternError, match=why):
        name_pattern(pattern)
    with pytest.raises(InvalidRequest, match="RE2 syntax") as caught:
        validate_filter(KernelFilter(name_regex=pattern), Limits())
    assert caught.value.reason == Reason.BAD_FILTER
    assert "\n" not in str(caught.value)
