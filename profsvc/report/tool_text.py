"""Plain-text renderings of correctness and timing results, for their own reports and the evaluation's."""

from __future__ import annotations

from profsvc_contract.models import BenchmarkResult, CorrectnessResult, ModelTiming, Precision
from profsvc_contract.units import format_value


def _in(precision: Precision) -> str:
    """' (fp16)': the precision the models ran in, where the result states one."""
    return "" if precision is Precision.UNSPECIFIED else f" ({precision.value})"


def _timing_line(label: str, timing: ModelTiming) -> str:
    events, wall, kernels = timing.events, timing.wall, timing.kernels
    interval = f"{events.median_ci_low_us:.2f}-{events.median_ci_high_us:.2f}"
    return (
        f"{label}: median {events.median_us:.2f} us (95 % CI {interval},"
        f" p10 {events.p10_us:.2f}, p90 {events.p90_us:.2f}, n {events.n}); launch-inclusive {wall.median_us:.2f} us;"
        f" kernels' own time {kernels.median_us:.2f} us in {timing.launches_per_call} launch(es)"
    )


def render_correctness_lines(correctness: CorrectnessResult) -> list[str]:
    """Lines about correctness."""
    if correctness.error.kind:
        return [f"correctness: could not run ({correctness.error.kind}): {correctness.error.message}"]
    verdict = "PASSED" if correctness.ok else "FAILED"
    lines = [f"correctness {verdict}{_in(correctness.precision)}: {correctness.message}"]
    if correctness.max_abs_error is not None:
        lines.append(
            f"  max_abs_err {correctness.max_abs_error:.3g}, mean_abs_err {correctness.mean_abs_error or 0:.3g},"
            f" max_rel_err {correctness.max_rel_error or 0:.3g}"
        )
    failed = next((t for t in correctness.trial_results if not t.ok), None)
    if failed and failed.first_mismatch:
        lines.append(f"  first mismatch (trial {failed.index}): {failed.first_mismatch}")
    return lines


def render_benchmark_lines(benchmark: BenchmarkResult) -> list[str]:
    """Lines about timing, memory and launches."""
    if benchmark.error.kind:
        return [f"timing: could not run ({benchmark.error.kind}): {benchmark.error.message}"]
    if not benchmark.ok:
        return []
    mode = _in(benchmark.precision)
    lines = [
        _timing_line(f"candidate{mode}", benchmark.candidate),
        _timing_line(f"reference{mode}", benchmark.reference),
    ]
    if benchmark.speedup is not None:
        lines.append(
            f"speedup {benchmark.speedup:.2f}x (95 % CI {benchmark.speedup_ci_low or 0:.2f}-"
            f"{benchmark.speedup_ci_high or 0:.2f}), from {benchmark.speedup_basis} times"
        )
    memory = (
        f"memory: candidate peak {format_value(float(benchmark.candidate.peak_memory_bytes), 'byte')},"
        f" reference {format_value(float(benchmark.reference.peak_memory_bytes), 'byte')}"
    )
    if benchmark.memory_ratio is not None:
        memory += f" (ratio {benchmark.memory_ratio:.2f})"
    lines.append(memory)
    names = ", ".join(r.name.split("(")[0][:60] for r in benchmark.candidate.launch_records[:5])
    fusion = f", fusion ratio {benchmark.fusion_ratio:.2f}" if benchmark.fusion_ratio is not None else ""
    lines.append(
        f"launches per call: candidate {benchmark.candidate.launches_per_call} ({names}),"
        f" reference {benchmark.reference.launches_per_call}{fusion}"
    )
    # A decisive flag fails the evaluation: it says so.
    lines.extend(f"FLAG{' (fails)' if flag in benchmark.decisive_flags else ''}: {flag}" for flag in benchmark.flags)
    return lines
