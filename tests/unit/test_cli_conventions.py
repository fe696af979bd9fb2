"""The command line's conventions: --version, completion, strict config, errors as JSON, live progress."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from profsvc_client import cli
from profsvc_contract.document import SCHEMA_VERSION
from profsvc_contract.models import Stage

ROOT = Path(__file__).parents[2]


def test_version_names_the_installed_packages_and_the_schema(capsys):
    with pytest.raises(SystemExit) as stopped:
        cli.main(["--version"])
    assert stopped.value.code == 0
    line = capsys.readouterr().out.strip()
    # The version as the client's own pyproject declares it.
    declared = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())["project"]["version"]
    assert f"profsvc-client {declared}" in line and line.endswith(f"(JSON schema {SCHEMA_VERSION})")
    assert "\n" not in line


def test_an_unknown_config_key_is_an_error_naming_it_as_json_too(tmp_path, monkeypatch, capsys):
    config = tmp_path / "client.toml"
    config.write_text('sever = "gpu-host:50051"\n')
    monkeypatch.setenv("PROFSVC_CONFIG", str(config))
    monkeypatch.delenv("PROFSVC_SERVER", raising=False)
    code = cli.main(["capabilities", "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "unknown key 'sever' (did you mean 'server'?)" in err and err.count("\n") == 1
    document = json.loads(out)
    assert document["schema_version"] == SCHEMA_VERSION and document["ok"] is False
    assert document["error"]["reason"] == "BAD_ARGUMENT" and document["error"]["exit_code"] == 2
    assert "sever" in document["error"]["message"]


def test_a_missing_file_with_json_format_is_a_document(tmp_path, capsys):
    code = cli.main(["compile", str(tmp_path / "absent.py"), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 2 and json.loads(out)["error"]["reason"] == "BAD_ARGUMENT"
    assert "absent.py" in json.loads(out)["error"]["message"] and err.startswith("profsvc: error:")


def test_the_progress_line_draws_on_a_terminal_only():
    import io

    from rich.console import Console

    from profsvc_contract.models import Progress

    event = Progress(stage=Stage.PROFILING, message="ncu on kernel[0] (gemm)", passes=9, elapsed_seconds=2.5)
    for terminal in (True, False):
        stream = io.StringIO()
        line = cli.ProgressLine()
        line.console = Console(file=stream, force_terminal=terminal)
        line(event)
        line.close()
        drawn = stream.getvalue()
        assert ("[profiling] ncu on kernel[0] (gemm) (9 passes)  2.5s" in drawn) is terminal, drawn


def test_the_shell_completes_commands_and_options():
    def complete(line: str) -> list[str]:
        env = {**os.environ, "_ARGCOMPLETE": "1", "_ARGCOMPLETE_IFS": "\n", "COMP_LINE": line}
        env["COMP_POINT"] = str(len(line))
        code = "import os, sys; from profsvc_client.cli import main; os.dup2(1, 8); sys.exit(main())"
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        return done.stdout.split()

    assert "profile" in complete("profsvc prof")
    assert "--format" in complete("profsvc profile x.py --for")
    assert set(complete("profsvc profile x.py --format ")) == {"text", "json", "md"}


def test_the_metric_set_help_names_the_sets_the_server_ships():
    shipped = [s["name"] for s in tomllib.loads((ROOT / "metrics" / "metric_sets.toml").read_text())["set"]]
    profile = next(
        action.choices["profile"] for action in cli.build_parser()._actions if getattr(action, "choices", None)
    )
    help_text = next(a.help for a in profile._actions if "--metric-set" in a.option_strings)
    listed = help_text.split(" (")[0].replace(" or ", ", ").split(", ")
    assert sorted(listed) == sorted(shipped)


def test_python_m_profsvc_still_runs_the_server_alone():
    from profsvc import __version__

    done = subprocess.run([sys.executable, "-m", "profsvc", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == f"profsvc {__version__}"
    served = subprocess.run(
        [sys.executable, "-m", "profsvc", "serve", "--help"], capture_output=True, text=True, timeout=60
    )
    assert served.returncode == 0 and "python -m profsvc serve" in served.stdout
