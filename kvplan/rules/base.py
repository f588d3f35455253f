"""The rule shape and the one registry: every code kvplan can report is a declared `Rule`.

A rule is a small declared object with a stable code, name, severity and documentation. Decision
rules set per-layer (or global) fields and record the input fact; check rules emit findings. The
scope says what a rule looks at and who runs it:

- `global`, `layer`, `plan`: the planner (`kvplan.planner.compile`) runs them;
- `flags`, `launch`, `file`: the deployment-file linter (`kvplan.lint`), KV8xx;
- `emit`: the emitters (`kvplan.emit`), KV980-KV987;
- `policy`: the policy engine (`kvplan.policy`), KV990-KV993; a policy file's own rules and
  constraints take codes from the reserved range KV900-KV979 (`RESERVED`).

Metadata is validated when the rule is declared, so a malformed rule fails at import. Every rule
family lives in `kvplan.rules` and `kvplan.rules.catalog` imports them all, so the catalogue is
complete whatever else was imported. The order decision rules run in is not import order: it is
`kvplan.planner.precedence.DECISION_ORDER`.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from kvplan.model.plan import Subject as Subject  # re-exported: rule bodies import it with Emit
from kvplan.model.vocab import Severity
from kvplan.rules.state import Set  # noqa: F401 (the decision type, typed in kvplan.rules.state)

_CODE = re.compile(r"^KV\d{3}$")
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_VERSIONS = re.compile(r"^(?:>=|<=|==|!=|>|<)\d+(?:\.\d+){0,2}(?:,(?:>=|<=|==|!=|>|<)\d+(?:\.\d+){0,2})*$")

Scope = Literal["global", "layer", "plan", "flags", "launch", "file", "emit", "policy"]
PLANNER_SCOPES: tuple[Scope, ...] = ("global", "layer", "plan")
LINT_SCOPES: tuple[Scope, ...] = ("flags", "launch", "file")
SCOPES: tuple[Scope, ...] = (*PLANNER_SCOPES, *LINT_SCOPES, "emit", "policy")


@dataclass(frozen=True)
class Emit:
    """A finding a check rule raises; severity/fix default to the rule's own."""

    message: str
    layers: tuple[int, ...] = ()
    fix: str | None = None
    severity: Severity | None = None
    subject: Subject | None = None
    """What the finding is about (`kvplan.model.plan.Subject`); without one it is about the rule's
    `subject_flags`, else the served model."""


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
    scope: Scope
    references: tuple[str, ...] = ()
    fn: Callable[..., Iterable[Any]] = field(default=lambda *a: (), repr=False, compare=False)
    versions: str = "*"
    """Engine releases the rule holds in (`>=0.19,<0.20`; `*` = every modelled release). The planner
    runs a rule only for a release in this range (kvplan.backends.vllm_rows.ENGINE_FEATURES dates them)."""
    subject_flags: tuple[str, ...] = ()
    """The flags the rule's findings are about, first present wins, when a finding names no subject of
    its own (the linter points there; none present: at the served model)."""

    def doc(self) -> dict[str, Any]:
        """What `kvplan rule CODE` prints and `kvplan rules --format json` lists."""
        return {"code": self.code, "name": self.name, "severity": self.severity.value,
                "kind": self.kind, "scope": self.scope, "family": self.family,
                "summary": self.summary, "why": self.why, "fix": self.fix,
                "references": list(self.references), "engine_versions": self.versions}


@dataclass(frozen=True)
class CodeRange:
    """A block of codes kvplan reserves for others to assign (a policy file's rules and constraints)."""

    first: str
    last: str
    name: str
    scope: Scope
    family: str
    summary: str
    why: str
    fix: str
    references: tuple[str, ...] = ()

    def covers(self, code: str) -> bool:
        return bool(_CODE.match(code)) and self.first <= code <= self.last

    def rule_for(self, code: str) -> Rule:
        """The documentation `kvplan rule CODE` prints for one code of the range."""
        return Rule(code=code, name=self.name, severity=Severity.warning, summary=self.summary, why=self.why,
                    fix=self.fix, family=self.family, kind="check", scope=self.scope, references=self.references)

    def doc(self) -> dict[str, Any]:
        return {"codes": f"{self.first}-{self.last}", "name": self.name, "scope": self.scope,
                "family": self.family, "summary": self.summary, "why": self.why, "fix": self.fix,
                "references": list(self.references)}


REGISTRY: dict[str, Rule] = {}
_NAMES: set[str] = set()

RESERVED: tuple[CodeRange, ...] = (
    CodeRange(first="KV900", last="KV979", name="policy-file-rule", scope="policy", family="policy",
              summary="A rule or constraint of your policy file: you choose its code, name, severity and reason.",
              why="Policy files (`--policy`) add rules of the same shape as kvplan's (selector -> setting, with a "
                  "reason) and capacity constraints; each carries a code from KV900-KV979 that the file assigns. "
                  "Its finding says which policy file and entry raised it.",
              fix="Read the rule or constraint with that code in the policy file the finding names.",
              references=("docs/api.md#policy-files",)),
)


def _check_metadata(code: str, name: str, summary: str, why: str, fix: str, versions: str, scope: str) -> None:
    if not _CODE.match(code):
        raise ValueError(f"rule code {code!r} must look like KV followed by three digits")
    if not _NAME.match(name):
        raise ValueError(f"rule name {name!r} must be kebab-case")
    if code in REGISTRY or name in _NAMES:
        raise ValueError(f"duplicate rule {code} / {name}")
    if any(r.covers(code) for r in RESERVED):
        raise ValueError(f"rule code {code} is in a range reserved for policy files")
    if scope not in SCOPES:
        raise ValueError(f"rule {code} scope {scope!r} must be one of {', '.join(SCOPES)}")
    for label, text in (("summary", summary), ("why", why), ("fix", fix)):
        if not text or not text.strip():
            raise ValueError(f"rule {code} needs a {label}")
    if len(summary) > 120 or "\n" in summary:
        raise ValueError(f"rule {code} summary must be one short line")
    if versions != "*" and not _VERSIONS.match(versions):
        raise ValueError(f"rule {code} versions {versions!r} must look like '>=0.19,<0.20'")


def default_subject_flags(code: str) -> tuple[str, ...]:
    """The flags a planner rule's findings are about when they name no subject, by code block."""
    if code in ("KV002", "KV003"):
        return ("--calculate-kv-scales",)
    if code.startswith("KV3"):
        return ("--kv-cache-dtype-skip-layers", "--kv-cache-dtype")
    if code in ("KV501", "KV502"):
        return ("--max-model-len", "--kv-cache-dtype")
    if code.startswith("KV7"):
        return ("--attention-backend", "--attention-config", "--kv-cache-dtype")
    if code == "KV201":
        return ("--kv-cache-dtype", "--dtype")
    if code.startswith(("KV1", "KV2", "KV4")):
        return ("--kv-cache-dtype", "--quantization")
    return ()


def declare(*, code: str, name: str, severity: str | Severity = Severity.warning, summary: str,
            why: str, fix: str, family: str, kind: Literal["decision", "check"] = "check",
            scope: Scope = "plan", references: Iterable[str] = (), versions: str = "*",
            subject_flags: Iterable[str] | None = None) -> Callable[[Callable[..., Iterable[Any]]], Rule]:
    """Declare a rule; the decorated function becomes its body. Metadata is checked here."""

    def wrap(fn: Callable[..., Iterable[Any]]) -> Rule:
        _check_metadata(code, name, summary, why, fix, versions, scope)
        flags = tuple(subject_flags) if subject_flags is not None else default_subject_flags(code)
        r = Rule(code=code, name=name, severity=Severity(severity), summary=summary, why=why,
                 fix=fix, family=family, kind=kind, scope=scope, references=tuple(references), fn=fn,
                 versions=versions, subject_flags=flags)
        REGISTRY[code] = r
        _NAMES.add(name)
        return r

    return wrap


def _no_body(*_: Any) -> Iterable[Any]:
    return ()


def define(**metadata: Any) -> Rule:
    """Declare a rule whose findings its owner builds where it works (an emitter, the policy engine, the
    linter's file reader): the same metadata and checks as `declare`, no body."""
    return declare(**metadata)(_no_body)


def all_rules() -> list[Rule]:
    """Every declared rule, sorted by code (imports the rule families)."""
    import kvplan.rules.catalog  # noqa: F401 (declares the built-in rules)
    return [REGISTRY[c] for c in sorted(REGISTRY)]


def rules_in(*scopes: Scope) -> list[Rule]:
    """The declared rules of the given scopes, sorted by code."""
    return [r for r in all_rules() if r.scope in scopes]


def get_rule(code_or_name: str) -> Rule | None:
    """The rule with this code or name; a code of a reserved range gets the range's documentation."""
    key = code_or_name.strip()
    for r in all_rules():
        if r.code == key.upper() or r.name == key:
            return r
    return next((rng.rule_for(key.upper()) for rng in RESERVED if rng.covers(key.upper())), None)
