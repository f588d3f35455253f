"""`kvplan lint` on real published deployment files: every finding is true (issue 24).

tests/data/lint_corpus/ holds deployment files copied from public repositories (PROVENANCE.md:
repository, commit, path, licence). EXPECTED.json lists every launch a reader of those files sees
and every finding, each reviewed by hand. This test counts the findings that are not in that
reviewed list as false positives and asserts that there are none, next to the real findings that
must stay and the launches that must be found.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kvplan.lint import lint_paths

CORPUS = Path(__file__).resolve().parents[1] / "data" / "lint_corpus"
EXPECTED = json.loads((CORPUS / "EXPECTED.json").read_text())


def _key(f: dict) -> tuple:
    # "N rules ... were skipped": N grows with the rule set, the finding stays the same
    message = re.sub(r"\b\d+ rules\b", "N rules", f["message"]) if f.get("message") else f.get("message")
    return f["file"], f["line"], f["column"], f["code"], message


@pytest.fixture(scope="module")
def report():
    # offline: no Hugging Face id is resolved, so KV804 says the same on every machine (air-gapped CI)
    return lint_paths(["."], cwd=CORPUS, isolated=True, offline=True)


def _actual(report) -> list[dict]:
    return [{"file": f.location.path, "line": f.location.line, "column": f.location.column, "code": f.code,
             "message": f.message} for f in report.findings]


def test_corpus_has_no_false_positive(report) -> None:
    reviewed = {_key(f) for f in EXPECTED["findings"]}
    # real flags the flag table (issue 21) stops calling unknown, and findings it will add (reviewed ahead)
    tolerated = {_key(f)[:4] for f in EXPECTED["pending_flag_table"] + EXPECTED["anticipated_with_flag_table"]}
    false_positives = [f for f in _actual(report) if _key(f) not in reviewed and _key(f)[:4] not in tolerated]
    assert len(false_positives) == 0, (
        "findings on the real-file corpus that nobody reviewed as true (fix the linter, or review them and add "
        "them to tests/data/lint_corpus/EXPECTED.json):\n" + "\n".join(map(str, false_positives)))


def test_corpus_keeps_its_true_findings(report) -> None:
    actual = {_key(f) for f in _actual(report)}
    must = [f for f in EXPECTED["findings"] if f["stable"]]
    assert all(f["verdict"] == "true" and f["why"] for f in EXPECTED["findings"])
    missing = [f for f in must if _key(f) not in actual]
    assert missing == []
    # the real findings it must keep: pinned-release notes and unknown run-time models, at least
    assert {f["code"] for f in must} >= {"KV804", "KV812", "KV813"} and len(must) >= 10


def test_corpus_errors_are_reviewed_and_every_launch_is_found(report) -> None:
    # the only errors are the reviewed ones (the release linted against exits on them), at the reviewed severity
    reviewed_errors = {_key(f)[:4] for f in EXPECTED["findings"] if f.get("severity") == "error"}
    errors = {_key(f)[:4] for f, lf in zip(_actual(report), report.findings, strict=False)
              if lf.severity.value == "error"}
    assert errors <= reviewed_errors and report.summary.errors == len(errors)
    got = {f.path: [[li.location.line, li.model, li.engine] for li in f.launches] for f in report.files if f.launches}
    assert got == EXPECTED["launches"]
    assert report.summary.launches == sum(len(v) for v in EXPECTED["launches"].values()) >= 100


def test_corpus_gives_every_file_a_readers_launch_count() -> None:
    # every file is listed with the launches a reader sees in it, or as one that holds none (issue 42)
    files = sorted(p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*")
                   if p.is_file() and p.name not in ("PROVENANCE.md", "EXPECTED.json"))
    assert sorted([*EXPECTED["launches"], *EXPECTED["no_launches"]]) == files
    assert not set(EXPECTED["launches"]) & set(EXPECTED["no_launches"])


def test_corpus_is_real_files_with_provenance() -> None:
    listed = (CORPUS / "PROVENANCE.md").read_text()
    files = sorted(p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*")
                   if p.is_file() and p.name not in ("PROVENANCE.md", "EXPECTED.json"))
    assert len(files) >= 80
    for f in files:
        row = next((line for line in listed.splitlines() if line.startswith(f"| `{f}` |")), None)
        assert row is not None, f"{f} has no provenance row"
        repo, commit = row.split("|")[2].strip(), row.split("|")[3].strip(" `")
        assert "/" in repo and len(commit) == 40 and all(c in "0123456789abcdef" for c in commit)


if __name__ == "__main__":  # python -m tests.lint.test_corpus: what changed since the last review
    current = lint_paths(["."], cwd=CORPUS, isolated=True, offline=True)
    actual = _actual(current)
    known = {_key(f) for f in EXPECTED["findings"]}
    tolerated = {_key(f)[:4] for f in EXPECTED["pending_flag_table"] + EXPECTED["anticipated_with_flag_table"]}
    new = [f for f in actual if _key(f) not in known and _key(f)[:4] not in tolerated]
    gone = [f for f in EXPECTED["findings"] if _key(f) not in {_key(a) for a in actual}]
    print(f"{len(actual)} findings; {len(new)} not reviewed, {len(gone)} reviewed ones gone")
    for f in new:  # review each; if true, add it to EXPECTED.json with verdict "true", stable and why
        print(json.dumps({**f, "verdict": "UNREVIEWED", "stable": True, "why": ""}, ensure_ascii=False))
    for f in gone:
        print("gone:", json.dumps(f, ensure_ascii=False))
