"""The cluster command's pure parts: the summary, the progress bar, the missing extra.

The rules of the cluster are in ``test_rules.py``; the deployment runs on Ray in the other
modules here.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from relay._cluster._cli import _progress, _Tally, summary_table

ROOT = Path(__file__).resolve().parents[2]


def test_the_summary_table_lines_up() -> None:
    table = summary_table(_Tally(total=200, finished=200, turns=400, failures=1), 12.34)
    assert table.splitlines() == [
        "sessions  turns  failures  failovers    time",
        "     200    400         1          0  12.3 s",
    ]


def test_the_progress_bar_redraws_one_line_with_the_failures() -> None:
    out = io.StringIO()
    _progress(_Tally(total=4, finished=1), out)
    _progress(_Tally(total=4, finished=4, failures=1), out)
    assert out.getvalue() == (
        "\r[#######.......................] 1/4 sessions"
        "\r[##############################] 4/4 sessions · 1 failed"
    )


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def test_importing_the_runtime_and_its_cluster_module_does_not_import_ray() -> None:
    result = run_python(
        "import sys, runtime, relay.cluster, relay._cli._main; "
        "assert 'ray' not in sys.modules, 'ray imported'"
    )
    assert result.returncode == 0, result.stderr


def test_without_ray_the_command_fails_with_one_line_naming_the_extra(tmp_path: Path) -> None:
    script = tmp_path / "s.jsonl"
    script.write_text("", encoding="utf-8")
    result = run_python(
        "import sys; sys.modules['ray'] = None\n"
        "from relay._cli._main import main\n"
        f"sys.exit(main(['cluster', 'run', {str(script)!r}]))"
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "relay: the cluster needs Ray, which is not installed: pip install 'relay-runtime[ray]'"
    ]
