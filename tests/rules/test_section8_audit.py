"""docs/rules.md maps every vLLM 0.33 startup error/warning (reference §8) to a rule and its cases.

Each row must name a real rule and at least one case that fires it and one that does not; every
case it names must exist (a YAML rule case with the matching `fires`, or a pytest test function).
The cases themselves run in test_rule_cases.py / their own test modules.
"""
from __future__ import annotations

import re

import pytest
import yaml

from kvplan.rules.base import all_rules
from tests.conftest import ROOT

DOC = ROOT / "docs" / "rules.md"
CASES_DIR = ROOT / "tests" / "rules" / "cases"
MIN_ROWS = 27  # section 8 lists 24 lines; three of them are split into two rows here


def _rows() -> list[dict[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    m = re.search(r"<!-- section8-audit:start -->\n(.*?)<!-- section8-audit:end -->", text, re.S)
    assert m, "docs/rules.md lost its section-8 audit table"
    lines = [ln for ln in m.group(1).splitlines() if ln.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = []
    for ln in lines[2:]:
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        assert len(cells) == len(head), f"malformed audit row: {ln}"
        rows.append(dict(zip(head, cells, strict=False)))
    return rows


ROWS = _rows()


def _refs(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def _yaml_case(code: str, name: str) -> dict | None:
    path = CASES_DIR / f"{code}.yaml"
    if not path.is_file():
        return None
    return next((c for c in yaml.safe_load(path.read_text())["cases"] if c.get("name") == name), None)


def _check_ref(ref: str, codes: set[str], fires: bool) -> str | None:
    if "::" in ref:
        path, test = ref.split("::", 1)
        f = ROOT / path
        if not f.is_file() or not re.search(rf"^def {re.escape(test)}\(", f.read_text(), re.M):
            return f"{ref}: no such test"
        return None
    code, _, name = ref.partition(":")
    if code not in codes:
        return f"{ref}: case of {code}, but the row's rule is {sorted(codes)}"
    case = _yaml_case(code, name)
    if case is None:
        return f"{ref}: no case {name!r} in tests/rules/cases/{code}.yaml"
    if bool(case.get("fires", True)) is not fires:
        listed = "firing" if fires else "not firing"
        return f"{ref}: listed as {listed} but the case says fires={case.get('fires', True)}"
    return None


def test_audit_covers_every_section8_line() -> None:
    assert len(ROWS) >= MIN_ROWS
    assert [r["#"] for r in ROWS] == [str(i) for i in range(1, len(ROWS) + 1)]


@pytest.mark.parametrize("row", ROWS, ids=[f"{r['#']}-{r['vLLM 0.33 (where)'][:40]}" for r in ROWS])
def test_audit_row_has_firing_and_non_firing_cases(row: dict[str, str]) -> None:
    known = {r.code for r in all_rules()}
    codes = set(re.findall(r"KV\d{3}", row["rule"]))
    assert codes and codes <= known, f"row {row['#']}: unknown rule in {row['rule']!r}"
    fires, quiet = _refs(row["fires"]), _refs(row["does not fire"])
    assert fires, f"row {row['#']} has no firing case"
    assert quiet, f"row {row['#']} has no non-firing case"
    problems = [p for r in fires if (p := _check_ref(r, codes, True))]
    problems += [p for r in quiet if (p := _check_ref(r, codes, False))]
    assert not problems, "\n".join(problems)
