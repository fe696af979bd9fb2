"""The HTML report, opened in a real headless browser (Debian's chromium): charts drawn, no script errors, and
the figures it shows are the result's."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from PIL import Image

from tests.conftest import FIXTURES

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (.ci/run installs it)")
BROWSER = ["--headless=new", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000"]
# A duration as the report shows it ("2.59 μs"), in ns.
SCALE_NS = {"ns": 1.0, "μs": 1e3, "ms": 1e6, "s": 1e9}


def _browser(*args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, *BROWSER, *args], capture_output=True, text=True, timeout=120)


def test_the_report_opens_draws_its_charts_and_shows_the_results_figures(client, tmp_path):
    session = "html-report"
    client.analyze(FIXTURES / "seed47_full.ncu-rep", session_id=session)
    result = client.analyze(FIXTURES / "seed47_lineinfo.ncu-rep", session_id=session, html_report=True)
    (artifact,) = [a for a in result.artifacts if a.name == "report.html"]
    assert artifact.content_type == "text/html"
    page = client.download_artifact(artifact.id, tmp_path)
    url = page.resolve().as_uri()

    # The DOM after its scripts ran: plotly drew an SVG chart in each chart's place, and nothing reached for
    # the network (the file stands alone).
    shown = _browser("--enable-logging=stderr", "--v=0", "--dump-dom", url)
    assert shown.returncode == 0, shown.stderr[-2000:]
    dom = shown.stdout
    for chart in ("roofline", "stalls-0"):
        start = dom.index(f'id="{chart}"')
        assert 'class="main-svg"' in dom[start : start + 20000], chart
    assert "Uncaught" not in shown.stderr and "CONSOLE" not in shown.stderr.replace("INFO:CONSOLE", "")
    assert not re.search(r"<script[^>]+src=", dom)

    # The text figures are the result's: the kernel table's duration, the hints, the source lines, the delta.
    kernel = result.kernels[0]
    cell = re.search(r"data-figure=\"duration\">([0-9.]+) (ns|μs|ms|s)<", dom)
    assert cell is not None
    shown_ns = float(cell.group(1)) * SCALE_NS[cell.group(2)]
    assert shown_ns == pytest.approx(kernel.figures["duration"].value, rel=0.01)
    assert all(hint.title.replace("'", "&#x27;") in dom for hint in kernel.hints)
    assert f"{kernel.hotspots[0].file}:{kernel.hotspots[0].line}" in dom
    assert ("Delta against the previous iteration" in dom) == bool(result.delta)

    # Drawn, not blank: the screenshot's chart area holds many colours.
    shot = tmp_path / "shot.png"
    done = _browser("--window-size=1200,1400", f"--screenshot={shot}", url)
    assert done.returncode == 0, done.stderr[-2000:]
    with Image.open(shot) as image:
        chart_area = image.convert("RGB").crop((0, 250, 1200, 800))
        assert len(chart_area.getcolors(maxcolors=1 << 20) or []) > 50
