"""What a source reader yields: launch sites with positions, raw findings, suppression annotations."""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

import yaml

from kvplan.lint.shell import Launch, Tok
from kvplan.model.plan import Subject

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Environment variables that images and charts commonly read extra engine arguments from.
EXTRA_ARGS_ENV = re.compile(
    r"^(?:VLLM_)?(?:EXTRA_|ADDITIONAL_|SERVE_|ENGINE_|SERVER_)?ARGS$|^VLLM_\w*ARGS$|\w*EXTRA_ARGS$")
IGNORE_ANNOTATIONS = ("kvplan.dev/ignore", "kvplan.io/ignore")
# A Go template action ({{ .Spec.Model.Name }}, {{- if ... }}) that a controller or Helm fills in later.
GO_TEMPLATE = re.compile(r"\{\{-?\s*[.$A-Za-z(/\"]")
GO_ACTION = re.compile(r"\{\{.*?\}\}", re.S)


@dataclass(frozen=True)
class RawFinding:
    """A lint finding before filtering: code, message and the token it points at."""

    code: str
    message: str
    tok: Tok
    fix: str | None = None
    model: str | None = None
    layers: tuple[int, ...] = ()
    severity: str | None = None  # a planner finding's own severity when it differs from its rule's
    skipped_rules: tuple[str, ...] = ()  # KV804: the rules that need the model (listed in JSON and -v)
    upgrade: str | None = None  # the modelled release a finding is about when the image pins an older one
    launch: int | None = None  # index of the launch (in the file) the finding belongs to
    subject: Subject | None = None  # what the finding is about (kvplan.model.plan.Subject), as data


@dataclass
class Site:
    """One vLLM launch and the facts around it (GPU hints, model hints)."""

    launch: Launch
    anchor: Tok
    model_hint: Tok | None = None
    gpu_label: Tok | None = None
    gpu_count: int | None = None
    group_size: int = 1
    image: Tok | None = None
    """The container image (its tag names the vLLM release), when the launch runs in one."""
    partial: bool = False
    """A Kustomize patch or Helm values entry: the rest of the launch (model, GPUs) lives elsewhere."""
    unknown_kwargs: tuple[Tok, ...] = ()
    """Ray Serve LLM `engine_kwargs` keys that are no vLLM engine argument (keyword arguments: no prefixes)."""


@dataclass(frozen=True)
class Annotation:
    """A `kvplan.dev/ignore` annotation (or compose label) and the lines it covers."""

    value: str
    tok: Tok
    first_line: int
    last_line: int


@dataclass
class Extracted:
    """What one file yields."""

    kind: str = "unknown"
    sites: list[Site] = field(default_factory=list)
    findings: list[RawFinding] = field(default_factory=list)
    annotations: list[Annotation] = field(default_factory=list)
    note: str | None = None
    line_map: dict[int, int] | None = None
    """A rendered Helm template: line of the `helm template` output -> line of the template, where exact."""
    attached_to: list[str] = field(default_factory=list)
    """A vLLM `--config` file: the launches (path:line) that pass it, whose argv its keys were linted in."""


class LineIndex:
    """Character offset -> 1-based (line, column)."""

    def __init__(self, text: str):
        self.text = text
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def pos(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset) - 1
        return line + 1, offset - self.starts[line] + 1

