"""Suppressions: `# kvplan: ignore[KV401] reason` comments and `kvplan.dev/ignore` annotations.

A comment covers its own line; a comment alone on its line also covers the next line that is not
a comment. An annotation (Kubernetes metadata.annotations, compose labels) covers its whole YAML
document: `kvplan.dev/ignore: "KV401: scales calibrated offline; KV105: pinned to bf16"`.
A suppression without a reason still applies but is finding KV806; one that hides nothing is KV805;
one naming no rule is KV810.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from kvplan.lint.shell import Tok
from kvplan.lint.sources import Annotation, RawFinding
from kvplan.rules.lint_rules import SUPPRESSION_RULES, SuppressionFacts

_COMMENT = re.compile(r"#\s*kvplan:\s*ignore\[([^\]]*)\](.*)$")
_CODE = re.compile(r"^KV\d{3}$")
_ENTRY = re.compile(r"^\s*((?:[A-Za-z]{2}\d{3}\s*,\s*)*[A-Za-z]{2}\d{3})\b\s*[:=\-—]?\s*(.*?)\s*$", re.S)
# Suppressions do not hide findings about suppressions (no loops).
UNSUPPRESSIBLE = frozenset({"KV805", "KV806", "KV810"})


@dataclass
class Suppression:
    """One suppression: the codes it names, its reason, where it is, and what it covers."""

    codes: list[str]
    reason: str | None
    tok: Tok
    via: str  # comment | annotation
    lines: frozenset[int] = frozenset()
    first_line: int = 0
    last_line: int = 0
    used: set[str] = field(default_factory=set)

    def covers(self, f: RawFinding) -> bool:
        if f.code not in self.codes or f.code in UNSUPPRESSIBLE:
            return False
        if self.via == "comment":
            return f.tok.line in self.lines
        return self.first_line <= f.tok.line <= self.last_line


def _clean_reason(text: str) -> str | None:
    r = text.strip().lstrip(":-—=").strip()
    return r or None


def from_comments(text: str) -> list[Suppression]:
    if "kvplan:" not in text:
        return []
    lines = text.splitlines()
    out: list[Suppression] = []
    for n, line in enumerate(lines, 1):
        m = _COMMENT.search(line)
        if not m:
            continue
        codes = [c.strip().upper() for c in m.group(1).split(",") if c.strip()]
        covered = {n}
        if not line[:m.start()].strip():
            for k in range(n, len(lines)):
                nxt = lines[k].strip()
                if nxt and not nxt.startswith("#"):
                    covered.add(k + 1)
                    break
        out.append(Suppression(codes, _clean_reason(m.group(2)), Tok(m.group(0), n, m.start() + 1), "comment",
                               frozenset(covered)))
    return out


def from_annotations(annotations: list[Annotation]) -> tuple[list[Suppression], list[RawFinding]]:
    out: list[Suppression] = []
    bad: list[RawFinding] = []
    for a in annotations:
        for entry in re.split(r"[;\n]", a.value):
            if not entry.strip():
                continue
            m = _ENTRY.match(entry)
            if not m:
                bad.append(RawFinding("KV810", f"kvplan.dev/ignore entry {entry.strip()!r} names no rule code.", a.tok,
                                      fix="Write entries as 'KV401: reason', separated by ';'."))
                continue
            codes = [c.strip().upper() for c in m.group(1).split(",")]
            out.append(Suppression(codes, _clean_reason(m.group(2)), a.tok, "annotation",
                                   first_line=a.first_line, last_line=a.last_line))
    return out, bad


def check_suppression(s: Suppression, known: frozenset[str], active: Callable[[str], bool]) -> list[RawFinding]:
    """The suppression rules (KV806, KV810, KV805: `kvplan.rules.lint_rules.SUPPRESSION_RULES`) on one
    suppression, after the file's findings were matched against it; each finding points at the suppression."""
    facts = SuppressionFacts(codes=tuple(s.codes), reason=s.reason, used=frozenset(s.used), known=known,
                             active=frozenset(c for c in s.codes if active(c)))
    return [RawFinding(r.code, em.message, s.tok, fix=em.fix) for r in SUPPRESSION_RULES for em in r.fn(facts)]
