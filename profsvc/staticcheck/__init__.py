"""Static checks of candidate kernels: the known ways LLM-written candidates game a benchmark.

A pure layer: it parses the candidate's Python (and greps its C++/CUDA strings),
imports and runs nothing of it, and imports nothing of the server, scheduler or
worker. Rule metadata (severity, wording, advice) lives in metrics/static_rules.toml.

    from profsvc.staticcheck import check_source
    for finding in check_source(open("k.py").read(), "k.py"):
        print(finding.line, finding.rule_id, finding.message)

A request's policy (profsvc.staticcheck.policy) sets each rule's severity; the
default is the table's own.
"""

from profsvc.staticcheck.analyzer import check_source
from profsvc.staticcheck.findings import Finding, Severity
from profsvc.staticcheck.policy import DEFAULT_NAME, Level, Policy, PolicyError, make_policy
from profsvc.staticcheck.rules import Rule, RuleId, RuleTable, RuleTableError, load_rules, parse_rules

__all__ = [
    "DEFAULT_NAME",
    "Finding",
    "Level",
    "Policy",
    "PolicyError",
    "Rule",
    "RuleId",
    "RuleTable",
    "RuleTableError",
    "Severity",
    "check_source",
    "load_rules",
    "make_policy",
    "parse_rules",
]
