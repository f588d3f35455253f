"""The rule shape: a small declared object with stable code, name, severity and documentation.

Decision rules set per-layer (or global) fields and record the input fact; check rules emit
findings. Metadata is validated when the rule is declared, so a malformed rule fails at import.
The order decision rules run in is not import order: it is `kvplan.planner.precedence.DECISION_ORDER`.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from kvplan.model.vocab import Severity
from kvplan.rules.state import Set  # noqa: F401 (the decision type, typed in kvplan.rules.state)

if TYPE_CHECKING:  # pragma: no cover
    pass

_CODE = re.compile(r"^KV\d{3}$")
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_VERSIONS = re.compile(r"^(?:>=|<=|==|!=|>|<)\d+(?:\.\d+){0,2}(?:,(?:>=|<=|==|!=|>|<)\d+(?:\.\d+){0,2})*$")


@dataclass(frozen=True)
class Emit:
    """A finding a check rule raises; severity/fix default to the rule's own."""

    message: str
    layers: tuple[int, ...] = ()
    fix: str | None = None
    severity: Severity | None = None


@dataclass(frozen=True)
class Rule:
    """A declared rule. `check` yields Emit; `decide` (global or per layer) yields Set."""

    code: str
    name: str
    severity: Severity
    summary: str
    why: str
    fix: str
    family: str
    kind: Literal["decision", "check"]
    scope: Literal["global", "layer", "plan"]
    references: tuple[str, ...] = ()
    fn: Callable[..., Iterable[Any]] = field(default=lambda *a: (), repr=False, compare=False)
    versions: str = "*"
    """Engine releases the rule holds in (`>=0.19,<0.20`; `*` = every modelled release). The planner
    runs a rule only for a release in this range (kvplan.backends.vllm_033.ENGINE_FEATURES dates them)."""

    def doc(self) -> dict[str, Any]:
        """What `kvplan rule CODE` prints and `kvplan rules --format json` lists."""
        return {"code": self.code, "name": self.name, "severity": self.severity.value,
                "kind": self.kind, "scope": self.scope, "family": self.family,
                "summary": self.summary, "why": self.why, "fix": self.fix,
                "references": list(self.references), "engine_versions": self.versions}


REGISTRY: dict[str, Rule] = {}
_NAMES: set[str] = set()


def declare(*, code: str, name: str, severity: str | Severity = Severity.warning, summary: str,
            why: str, fix: str, family: str, kind: Literal["decision", "check"] = "check",
            scope: Literal["global", "layer", "plan"] = "plan",
            references: Iterable[str] = (), versions: str = "*") -> Callable[[Callable[..., Iterable[Any]]], Rule]:
    """Declare a rule; the decorated function becomes its body. Metadata is checked here."""

    def wrap(fn: Callable[..., Iterable[Any]]) -> Rule:
        if not _CODE.match(code):
            raise ValueError(f"rule code {code!r} must look like KV123")
        if not _NAME.match(name):
            raise ValueError(f"rule name {name!r} must be kebab-case")
        if code in REGISTRY or name in _NAMES:
            raise ValueError(f"duplicate rule {code} / {name}")
        for label, text in (("summary", summary), ("why", why), ("fix", fix)):
            if not text or not text.strip():
                raise ValueError(f"rule {code} needs a {label}")
        if len(summary) > 120 or "\n" in summary:
            raise ValueError(f"rule {code} summary must be one short line")
        if versions != "*" and not _VERSIONS.match(versions):
            raise ValueError(f"rule {code} versions {versions!r} must look like '>=0.19,<0.20'")
        r = Rule(code=code, name=name, severity=Severity(severity), summary=summary, why=why,
                 fix=fix, family=family, kind=kind, scope=scope, references=tuple(references), fn=fn,
                 versions=versions)
        REGISTRY[code] = r
        _NAMES.add(name)
        return r

    return wrap


def all_rules() -> list[Rule]:
    """Every declared rule, sorted by code (imports the rule families)."""
    import kvplan.rules.catalog  # noqa: F401 (registers the built-in rules)
    return [REGISTRY[c] for c in sorted(REGISTRY)]


def get_rule(code_or_name: str) -> Rule | None:
    for r in all_rules():
        if r.code == code_or_name.upper() or r.name == code_or_name:
            return r
    return None
