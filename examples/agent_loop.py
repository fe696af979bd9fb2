"""An agent harness loop over profsvc: compile -> correctness -> profile -> submit, as the seed trace does.

    python examples/agent_loop.py tests/fixtures/seed47.py --server gpu-host:50051

Each step prints the short text an LLM would read. A real harness would hand the
profile's top hints to the model and loop with its next candidate; this one
walks one candidate through the steps, stops at the first failing one, and
keeps a session so a second run shows the delta against the first.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from profsvc_client import ProfilerClient, ProfsvcError
from profsvc_client.client import load_source


def main() -> int:
    """Run the loop once; exit 0 when the submission passed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("candidate", type=Path, help="problem module with Model, ModelNew, get_inputs, get_init_inputs")
    parser.add_argument("--server", required=True, help="HOST:PORT of a profsvc server")
    parser.add_argument("--session", default="agent-loop", help="session id for the iteration delta")
    args = parser.parse_args()
    source = load_source(args.candidate)
    with ProfilerClient(args.server, timeout=900) as client:
        try:
            lint = client.static_check(source)
            print(lint.report_text, end="")
            for finding in lint.findings:
                print(f"  line {finding.line}: [{finding.rule_id}] {finding.message}")
            built = client.compile(source)
            print(f"compile_kernel {'PASSED' if built.ok else 'FAILED'}")
            if not built.ok:
                for d in built.diagnostics:
                    print(f"  {d.file}:{d.line}:{d.column}: {d.message}")
                return 1
            correctness = client.check_correctness(source)
            print(correctness.report_text, end="")
            if not correctness.ok:
                return 1
            # The loop reads figures and hints, not pictures: no roofline chart is drawn.
            profile = client.profile(source, session_id=args.session, skip_charts=True)
            print(profile.report_text)
            submission = client.evaluate(source, session_id=args.session, skip_charts=True)
            print(submission.report_text)
            return 0 if submission.ok else 1
        except ProfsvcError as error:
            print(f"profsvc error [{error.reason.value}]: {error.message}", file=sys.stderr)
            return 2


if __name__ == "__main__":
    sys.exit(main())
