"""The ncu version a report's session records, read from the file (ncu_report has no accessor for it)."""

from __future__ import annotations

import re

import pytest

from profsvc.metrics.session import report_ncu_version
from profsvc.report.text import render_text
from profsvc_contract.models import NcuRun, ProfileResult
from tests.conftest import FIXTURES, REPORTS

# What `strings` shows in each report: the provider's name, a protobuf tag and length, then ncu's own version
# line ("2025.3.1.0 (build 36398880) (public-release)"), of which the number is the version.
RECORDED = re.compile(rb"Nsight Compute Target.{1,4}?(\d+\.\d+\.\d+\.\d+) \(build \d+\)", re.DOTALL)


def _recorded(path) -> str:
    found = {match.decode() for match in RECORDED.findall(path.read_bytes())}
    assert len(found) == 1, f"{path.name} records ncu versions {found}"
    return found.pop()


@pytest.mark.parametrize("report", REPORTS, ids=lambda p: p.name)
def test_the_version_is_the_one_the_report_records(report):
    assert report_ncu_version(report) == _recorded(report)


def test_the_fixtures_were_written_by_ncu_2025_3_1():
    # The oracle itself, pinned: every committed report came from the H200 host's Nsight Compute 2025.3.1.
    assert {_recorded(report) for report in REPORTS} == {"2025.3.1.0"}


@pytest.mark.parametrize(
    "data",
    [b"", b"NVR\x00", b"this is not a report", b"NVR\x00\x02\x00\x00\x00\x08\x07\xff\xff\xff\xff\x0a"],
    ids=["empty", "magic only", "not a report", "a block header past the end"],
)
def test_a_file_that_does_not_say_gives_no_version(tmp_path, data):
    path = tmp_path / "r.ncu-rep"
    path.write_bytes(data)
    assert report_ncu_version(path) == ""


def test_a_report_cut_inside_the_block_that_holds_the_version_gives_none(tmp_path):
    whole = (FIXTURES / "seed47_default.ncu-rep").read_bytes()
    cut_at = RECORDED.search(whole).start()
    path = tmp_path / "cut.ncu-rep"
    path.write_bytes(whole[:cut_at])
    assert report_ncu_version(path) == ""
    # Up to the end of that block header (the recorded line and a few fields after it): the version is read.
    path.write_bytes(whole[: cut_at + 200])
    assert report_ncu_version(path) == "2025.3.1.0"


def test_the_text_report_says_which_ncu_wrote_a_report_it_read():
    read = render_text(ProfileResult(ok=True, ncu=NcuRun(version="2025.3.1.0")))
    assert "report written by ncu 2025.3.1.0\n" in read and " s\n" not in read.split("\n", 2)[1]
    ran = render_text(ProfileResult(ok=True, ncu=NcuRun(version="2025.3.1.0", command="ncu ...", seconds=2.0)))
    assert "ncu 2025.3.1.0, 2.0 s" in ran and "written by" not in ran
