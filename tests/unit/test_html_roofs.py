"""The HTML report's roofline draws one roof per precision, at the highest of the kernels' measured peaks.

Each kernel's peaks come from the clocks measured while it ran; two kernels of one run differ by a few percent,
and a roof per kernel drew near-identical lines under one legend name.
"""

from __future__ import annotations

import json
import re

from profsvc.report.html import render_html
from profsvc_contract.models import KernelResult, ProfileResult, Roofline


def _kernel(name: str, peak: float, bandwidth: float) -> KernelResult:
    roofline = Roofline(
        precision="fp32",
        achieved_flop_per_s=1e12,
        peak_flop_per_s=peak,
        peak_dram_byte_per_s=bandwidth,
        arithmetic_intensity=2.0,
    )
    return KernelResult(name=name, roofline=roofline)


def _roofs(html: str) -> list[dict]:
    traces = []
    for match in re.finditer(r"Plotly\.newPlot\(\s*\"roofline\",\s*(\[.*?\]),\s*\{", html, re.S):
        traces += [t for t in json.loads(match.group(1)) if t.get("mode") == "lines"]
    return traces


def test_two_kernels_of_one_precision_share_one_roof_at_the_higher_peaks():
    result = ProfileResult(ok=True, kernels=[_kernel("a", 65.0e12, 4.7e12), _kernel("b", 67.0e12, 4.8e12)])
    (roof,) = _roofs(render_html(result))
    assert roof["name"] == "DRAM roof, fp32 peak"
    # Flat part: the higher compute peak; sloped part: the higher bandwidth (4.8 TB/s x intensity).
    assert max(roof["y"]) == 67.0e12
    x, y = roof["x"][0], roof["y"][0]
    assert y == 4.8e12 * x
