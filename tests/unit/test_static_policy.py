"""Static-check policies: the default (the rule table's), per-request overrides, and policy files.

The default's expected severities are the ones issue-level behaviour asks for (a forward with no kernel of its
own fails, PyTorch operations next to the candidate's own kernels warn), written out here rather than read from
the table under test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from profsvc.report.static_text import static_check_summary
from profsvc.scheduler.evaluation import static_check
from profsvc.scheduler.jobs import SourceSpec
from profsvc.staticcheck import Level, PolicyError, Severity, check_source, make_policy
from profsvc_client.policy import build_policy, read_policy_file
from profsvc_contract import errors
from profsvc_contract.models import RuleSeverity, SourceKind, StaticPolicy

CORPUS = Path(__file__).resolve().parents[1] / "staticcheck_corpus"
PARTIAL = CORPUS / "honest" / "partial_replacement_maxpool.py"
NO_KERNEL = CORPUS / "gaming" / "no_custom_kernel__scalar_multiply.py"
STRICT = Path(__file__).resolve().parents[2] / "examples" / "strict_policy.toml"


def _severities(path: Path, **overrides: str) -> dict[str, set[str]]:
    findings = make_policy("", overrides).apply(check_source(path.read_text(), path.name))
    found: dict[str, set[str]] = {}
    for finding in findings:
        found.setdefault(finding.rule_id, set()).add(str(finding.severity))
    return found


def test_default_policy_fails_no_kernel_and_warns_a_partial_replacement():
    assert _severities(NO_KERNEL) == {"no_custom_kernel": {"error"}}
    assert _severities(PARTIAL) == {"torch_fallback": {"warning"}}


def test_default_policy_changes_nothing():
    text = PARTIAL.read_text()
    assert make_policy().apply(check_source(text)) == check_source(text)
    assert make_policy().name == "default" and make_policy().overrides == {}


def test_overrides_raise_lower_and_drop():
    assert _severities(PARTIAL, torch_fallback="error") == {"torch_fallback": {"error"}}
    assert _severities(PARTIAL, torch_fallback="info") == {"torch_fallback": {"info"}}
    assert _severities(PARTIAL, torch_fallback="off") == {}
    assert _severities(NO_KERNEL, no_custom_kernel="warning") == {"no_custom_kernel": {"warning"}}
    # Findings keep their place and message; only the severity changes.
    before = check_source(PARTIAL.read_text())
    after = make_policy("strict", {"torch_fallback": "ERROR "}).apply(before)
    assert [(f.line, f.column, f.message) for f in after] == [(f.line, f.column, f.message) for f in before]
    assert {f.severity for f in after} == {Severity.ERROR}


@pytest.mark.parametrize(
    ("overrides", "named"),
    [({"torch_fallbak": "error"}, "'torch_fallbak'"), ({"torch_fallback": "fatal"}, "'fatal'")],
    ids=["unknown-rule", "unknown-severity"],
)
def test_unknown_rule_or_severity_is_one_line_naming_it(overrides, named):
    with pytest.raises(PolicyError) as caught:
        make_policy("mine", overrides)
    assert named in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("name", ["has space", "x" * 65, "semi;colon"])
def test_malformed_name_is_rejected(name):
    with pytest.raises(PolicyError, match="policy name"):
        make_policy(name)


def test_the_result_names_the_policy_that_applied():
    source = SourceSpec(kind=SourceKind.PYTHON_PROBLEM, main_name=PARTIAL.name, main_text=PARTIAL.read_text())
    default = static_check(source)
    assert default.ok and default.policy == StaticPolicy(name="default")
    assert static_check_summary(default) == "2 warning(s)"
    strict = static_check(source, make_policy("strict", {"torch_fallback": "error", "cuda_vendor_library": "off"}))
    assert not strict.ok
    assert strict.policy == StaticPolicy(
        name="strict",
        overrides=[
            RuleSeverity(rule_id="torch_fallback", severity="error"),
            RuleSeverity(rule_id="cuda_vendor_library", severity="off"),
        ],
    )
    assert static_check_summary(strict) == (
        "2 error(s) (policy strict (torch_fallback=error, cuda_vendor_library=off))"
    )


def test_level_names_match_finding_severities():
    # A policy level other than off becomes a finding severity: every one must be a severity.
    assert {level.value for level in Level} - {"off"} <= {severity.value for severity in Severity}


# ---- policy files (client side) ---------------------------------------------


def test_policy_file_and_flags(tmp_path):
    shipped = read_policy_file(STRICT)
    assert shipped.name == "strict"
    assert {o.rule_id: o.severity for o in shipped.overrides} == {
        "torch_fallback": "error",
        "cuda_torch_fallback": "error",
        "cuda_vendor_library": "error",
    }
    path = tmp_path / "team.toml"
    path.write_text('[rules]\ntorch_fallback = "error"\nside_stream = "warning"\n')
    built = build_policy(path, [("torch_fallback", "warning"), ("dynamic_code", "off")])
    assert built is not None and built.name == "team"  # the file's name when it gives none
    # A flag wins over the file, and the order shown is the order the overrides came in.
    assert [(o.rule_id, o.severity) for o in built.overrides] == [
        ("side_stream", "warning"),
        ("torch_fallback", "warning"),
        ("dynamic_code", "off"),
    ]
    assert build_policy(None, []) is None
    flags_only = build_policy(None, [("torch_fallback", "error")])
    assert flags_only == StaticPolicy(overrides=[RuleSeverity(rule_id="torch_fallback", severity="error")])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[rules\n", "not valid TOML"),
        ('severity = "error"\n', "unknown key 'severity'"),
        ("name = 3\n", "name must be a string"),
        ('rules = "error"\n', "[rules] must be a table"),
        ("[rules]\ntorch_fallback = 1\n", "rule 'torch_fallback' needs a severity string"),
    ],
    ids=["not-toml", "unknown-key", "name-not-string", "rules-not-table", "severity-not-string"],
)
def test_malformed_policy_file_is_one_line(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(errors.InvalidRequest) as caught:
        read_policy_file(path)
    assert message in caught.value.message and "\n" not in caught.value.message
    assert caught.value.reason == errors.Reason.BAD_POLICY
