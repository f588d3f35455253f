"""docs/api.md runs: every `>>>` example is executed with doctest from the repository root."""
from __future__ import annotations

import doctest

import pytest

from tests.emit.helpers import ROOT


def test_docs_api_examples_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = doctest.testfile(str(ROOT / "docs" / "api.md"), module_relative=False, report=True,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 30
    assert result.failed == 0, f"{result.failed} example(s) in docs/api.md failed (see the output above)"


def test_docs_api_lists_every_emitter_and_policy_code() -> None:
    from kvplan.emit.codes import EMIT_RULES
    from kvplan.policy.codes import POLICY_RULES
    text = (ROOT / "docs" / "api.md").read_text()
    for code, rule in {**EMIT_RULES, **POLICY_RULES}.items():
        assert f"| {code} | {rule.name} | {rule.severity.value} |" in text, code
