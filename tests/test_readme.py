"""The README's examples are true: its Python block runs, its lint transcript is what lint prints."""
from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()


def test_readme_python_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert blocks, "README has no python example"
    for code in blocks:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 0, r.stderr


def test_readme_lint_transcript_matches_the_tool() -> None:
    m = re.search(r"\$ kvplan lint (\S+)\n(.*?)```", README, re.S)
    assert m, "README lost its lint example"
    r = subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", "lint", m.group(1)],
                       capture_output=True, text=True, cwd=ROOT,
                       env={"NO_COLOR": "1", "COLUMNS": "400", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 1
    assert r.stdout == m.group(2)


def test_readme_ci_workflow_is_valid_yaml_that_uploads_sarif() -> None:
    import yaml
    m = re.search(r"```yaml\n(name: kvplan lint.*?)```", README, re.S)
    assert m
    wf = yaml.safe_load(m.group(1))
    steps = wf["jobs"]["kvplan-lint"]["steps"]
    runs = [s.get("run", "") for s in steps]
    assert any("--format sarif" in r for r in runs)
    assert any(s.get("uses", "").startswith("github/codeql-action/upload-sarif") for s in steps)
    assert wf["permissions"]["security-events"] == "write"


def test_quickstart_matches_ci() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    quick = re.search(r"```bash\n(.*?)```", README, re.S).group(1)
    test_cmd = [line for line in quick.splitlines() if line.strip() and not line.startswith("#")][1]
    ci_lines = [line.replace(" -q ", " ") for line in ci.splitlines()]
    assert test_cmd.strip() in ci_lines, "README quickstart command 2 and .ci/run differ"


def test_readme_explain_transcript_matches_the_tool() -> None:
    m = re.search(r"\$ kvplan explain (examples/gpt-oss-20b/config.json [^\n]+)\n(.*?)```", README, re.S)
    assert m, "README lost its explain example"
    argv = [sys.executable, "-c", "from kvplan.cli.main import main; main()", "explain", *m.group(1).split()]
    r = subprocess.run(argv,
                       capture_output=True, text=True, cwd=ROOT,
                       env={"NO_COLOR": "1", "COLUMNS": "150", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    got = "\n".join(line.rstrip() for line in r.stdout.splitlines()) + "\n"
    assert got == m.group(2)
