"""Worker process that reads a .ncu-rep into kernel results with their hints, printed as JSON.

Reports come from user jobs and from uploads; ncu_report is a native library,
so a malformed file may crash it. Reading happens here, in a child process,
never in the server.

    python -m profsvc.worker.analyze_report REPORT [--filter JSON] [--charts DIR] [--source-map JSON]
        [--metrics JSON] [--derived JSON]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from profsvc.metrics.analysis import ReportUnreadable, analyze_report
from profsvc.metrics.catalog import load_catalog
from profsvc.metrics.hotspots import relocate
from profsvc.metrics.reader import ReaderUnavailable
from profsvc.rules import check_figures, evaluate_rules, load_rules
from profsvc.rules.checks import load_checks
from profsvc.worker.warm import job_argv
from profsvc_contract.models import KernelFilter

EXIT_UNREADABLE = 3
EXIT_NO_READER = 4
# A small report with source counters (the seed's, default set): reading its SASS once starts ncu_report's
# disassembler, about 0.4 s of CPU that the first report of every process would otherwise pay.
PRIME_REPORT = Path(__file__).with_name("prime.ncu-rep")


def warm_up() -> None:
    """What a warm analyze worker pays before its job: the report reader and its disassembler, the tables and
    matplotlib."""
    from profsvc.metrics.reader import load_reader
    from profsvc.metrics.sass import kernel_sass

    load_catalog()
    load_rules()
    load_checks()
    # The reader before matplotlib (and before grpc): loaded after either, its NVTX filter crashes the process.
    try:
        reader = load_reader()
    except ReaderUnavailable:
        pass  # reported per job, where it matters
    else:
        # Only a head start: a reader that cannot read the report reads the user's all the same.
        with contextlib.suppress(Exception):
            kernel_sass(reader.load_report(str(PRIME_REPORT)).range_by_idx(0).action_by_idx(0))
    from profsvc.report.roofline_chart import warm_up as warm_up_charts

    warm_up_charts()


def main(argv: list[str] | None = None) -> int:
    """Print the analysis as JSON on stdout; exit 3 for an unreadable report, 4 without a reader."""
    argv = job_argv(argv, warm=warm_up)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report")
    parser.add_argument("--filter", default="{}", help="KernelFilter as JSON")
    parser.add_argument("--charts", default="", help="folder to write roofline.png and roofline.svg into")
    parser.add_argument("--metrics", default="[]", help="JSON list: ncu metrics to report besides the catalog's")
    parser.add_argument("--derived", default="[]", help="JSON list: NAME=FORMULA metrics over ncu metrics")
    parser.add_argument(
        "--source-map", default="{}", help="JSON {generated file: [user file, line offset]} for hotspot lines"
    )
    args = parser.parse_args(argv)
    try:
        kernel_filter = KernelFilter.model_validate(json.loads(args.filter))
        metrics, derived = [str(m) for m in json.loads(args.metrics)], [str(d) for d in json.loads(args.derived)]
        analysis = analyze_report(args.report, kernel_filter, metrics=metrics, derived=derived)
        catalog, rules = load_catalog(), load_rules()
        source_map = {path: (file, offset) for path, (file, offset) in json.loads(args.source_map).items()}
        for kernel in analysis.kernels:
            kernel.hotspots = relocate(kernel.hotspots, source_map)
            kernel.inconsistencies = check_figures(kernel, catalog)
            kernel.hints = evaluate_rules(kernel, catalog, rules)
    except ReportUnreadable as error:
        print(str(error), file=sys.stderr)
        return EXIT_UNREADABLE
    except ReaderUnavailable as error:
        print(str(error), file=sys.stderr)
        return EXIT_NO_READER
    if args.charts and any(k.roofline.precision for k in analysis.kernels):
        # Imported here: matplotlib costs a second, and only charted analyses need it.
        from profsvc.report.roofline_chart import render_roofline

        for kind, data in render_roofline(analysis.kernels).items():
            (Path(args.charts) / f"roofline.{kind}").write_bytes(data)
    sys.stdout.write(analysis.model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
