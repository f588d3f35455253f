"""An explore session without widgets: the controls' values, a recompile per change, totals vs the start.

`ExploreSession` owns the engine flags as the user passed them. Flags the controls do not cover
(`--dtype`, `--attention-config`, unknown flags, ...) travel verbatim; the controlled ones
(`--kv-cache-dtype`, `--kv-cache-dtype-skip-layers`, `--tensor-parallel-size`, `--max-model-len`)
are re-rendered from the controls, so `session.argv()` is always a launch-line fragment that
`kvplan plan PATH ARGV` turns into the same plan, byte for byte (`session.plan_command()`).

Every setter recompiles through `kvplan.compile` (the one pipeline; the session's policy is one of its
inputs), exactly as `kvplan plan` does; a change that is bad input (TP 0, max-model-len 'abc')
leaves the session unchanged and returns the one-line error.
"""
from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.engines import DEFAULT_ENGINE, ENGINE_VERSIONS, resolve_engine
from kvplan.errors import KvplanInputError
from kvplan.ingest.flags import MODELLED, parse_flags, scan_argv, validate_kv_cache_dtype
from kvplan.model.plan import Finding, LayerPlan, Plan
from kvplan.model.vocab import NO_KV_KINDS, VLLM_033_KV_CACHE_DTYPES

__all__ = ["DEFAULT_ENGINE", "KV_CACHE_DTYPES", "SORTS", "Controls", "ExploreSession", "TotalsChange",
           "engine_versions", "findings_sorted", "layer_fields", "strip_flags"]

# ServingFlags fields the controls own, and the spellings vLLM accepts for them.
_CONTROLLED_FIELDS = ("kv_cache_dtype", "kv_cache_dtype_skip_layers", "tensor_parallel_size", "max_model_len")
_CONTROLLED_FLAGS = frozenset(f for f, (field, _) in MODELLED.items() if field in _CONTROLLED_FIELDS)
SLIDING = "sliding_window"


def engine_versions(current: str | None = None) -> tuple[str, ...]:
    """The engine control's values: every modelled vLLM minor release, newest first (plus `current`)."""
    versions = tuple(ENGINE_VERSIONS)
    return versions if current is None or current in versions else (current, *versions)


def strip_flags(argv: Sequence[str], flags: frozenset[str] = _CONTROLLED_FLAGS) -> list[str]:
    """argv without `flags` and their values, read as vLLM's parser reads them (prefixes, aliases, `=`)."""
    drop: set[int] = set()
    for u in scan_argv(argv).uses:
        if u.option is not None and not u.synthetic and set(u.option.spellings) & flags:
            drop.update(u.indices())
    return [tok for i, tok in enumerate(argv) if i not in drop]


@dataclass(frozen=True)
class Controls:
    """What the explorer lets the user change; everything else is fixed by the command line."""

    kv_cache_dtype: str = "auto"
    """--kv-cache-dtype."""
    kv_cache_dtype_explicit: bool = False
    """--kv-cache-dtype is passed (even as 'auto': an explicit dtype wins over a checkpoint scheme, KV101)."""
    skip_layers: tuple[str, ...] = ()
    """--kv-cache-dtype-skip-layers tokens, in the user's order ('sliding_window' and layer indices)."""
    tensor_parallel_size: int = 1
    """--tensor-parallel-size."""
    max_model_len: int | None = None
    """--max-model-len (None: the model's maximum)."""
    gpu: str | None = None
    """kvplan's --gpu (None: no GPU, so no backends and no estimated budget)."""
    kv_budget_gib: float | None = None
    """kvplan's --kv-budget-gib."""
    engine: str = DEFAULT_ENGINE
    """kvplan's --engine (a modelled vLLM release)."""

    def engine_argv(self) -> list[str]:
        """The controlled engine flags, in launch-line spelling."""
        argv: list[str] = []
        if self.kv_cache_dtype_explicit or self.kv_cache_dtype != "auto":
            argv += ["--kv-cache-dtype", self.kv_cache_dtype]
        if self.skip_layers:
            argv += ["--kv-cache-dtype-skip-layers", *self.skip_layers]
        if self.tensor_parallel_size != 1:
            argv += ["--tensor-parallel-size", str(self.tensor_parallel_size)]
        if self.max_model_len is not None:
            argv += ["--max-model-len", str(self.max_model_len)]
        return argv


@dataclass(frozen=True)
class TotalsChange:
    """One number of the totals bar: its value now, at the start, and the change as text."""

    label: str
    now: float | None
    start: float | None
    text: str
    """Formatted value now."""
    delta: str
    """Change against the starting plan ('' when unchanged or unknown)."""


SORTS = ("severity", "severity (info first)", "code", "layer")
"""Orders of the findings table, cycled by its sort key."""


def findings_sorted(findings: Sequence[Finding], order: str = "severity") -> list[Finding]:
    """Findings in one of `SORTS` (ties: code, then first layer)."""
    def tie(f: Finding) -> tuple:
        return (f.code, f.layers[0] if f.layers else -1)
    if order == "severity":
        return sorted(findings, key=lambda f: (-f.severity.rank, *tie(f)))
    if order == "severity (info first)":
        return sorted(findings, key=lambda f: (f.severity.rank, *tie(f)))
    if order == "code":
        return sorted(findings, key=tie)
    if order == "layer":
        return sorted(findings, key=lambda f: (f.layers[0] if f.layers else 1 << 30, -f.severity.rank, f.code))
    raise ValueError(f"unknown findings order {order!r}")


def _fmt_int(n: float | None) -> str:
    return "-" if n is None else f"{int(n):,}"


def _delta(now: float | None, start: float | None, *, integer: bool) -> str:
    if now is None or start is None or now == start:
        return ""
    diff = now - start
    sign = "+" if diff > 0 else "−"
    amount = f"{abs(int(diff)):,}" if integer else f"{abs(diff):.2f}"
    pct = f" ({sign}{abs(diff) / start:.1%})" if start else ""
    return f"{sign}{amount}{pct}"


class ExploreSession:
    """The explorer's model: controls -> plan, with the starting plan kept for comparison."""

    def __init__(self, path: str | Path, argv: Sequence[str] = (), *, gpu: str | None = None,
                 kv_budget_gib: float | None = None, policy: Path | None = None,
                 engine: str | None = None) -> None:
        self.path = str(path)
        self.policy = policy
        sf = parse_flags(list(argv), resolve_engine(engine).version_str)  # bad flags fail here, as in `kvplan plan`
        self.passthrough = strip_flags(list(argv))
        self.controls = Controls(
            kv_cache_dtype=sf.kv_cache_dtype, kv_cache_dtype_explicit=sf.kv_cache_dtype_explicit,
            skip_layers=tuple(sf.kv_cache_dtype_skip_layers), tensor_parallel_size=sf.tensor_parallel_size,
            max_model_len=sf.max_model_len, gpu=gpu, kv_budget_gib=kv_budget_gib,
            engine=engine or DEFAULT_ENGINE)
        self.plan: Plan = self._compile(self.controls)
        self.start_controls = self.controls
        self.start: Plan = self.plan
        self.compiles = 1

    # ---- compiling -------------------------------------------------------------------------
    def argv(self, controls: Controls | None = None) -> list[str]:
        """Engine flags for the current (or given) controls, as `kvplan plan` takes them after the path."""
        return [*self.passthrough, *(controls or self.controls).engine_argv()]

    def _compile(self, c: Controls) -> Plan:
        budget = int(c.kv_budget_gib * 2**30) if c.kv_budget_gib is not None else None
        from kvplan.pipeline import compile as compile_plan
        return compile_plan(self.path, self.argv(c), c.gpu, policy=self.policy, kv_budget_bytes=budget,
                            engine=c.engine)

    def apply(self, **changes: Any) -> str | None:
        """Change controls and recompile; on bad input keep the current plan and return the error line."""
        new = replace(self.controls, **changes)
        if new == self.controls:
            return None
        try:
            plan = self._compile(new)
        except KvplanInputError as e:
            return str(e)
        except Exception as e:
            return (f"kvplan failed to plan this ({type(e).__name__}: {e}); the plan is unchanged. "
                    f"`{self.plan_command(new)}` reproduces it: please report it.")
        self.controls, self.plan = new, plan
        self.compiles += 1
        return None

    def reset(self) -> None:
        """Back to the starting controls and plan."""
        self.controls, self.plan = self.start_controls, self.start

    # ---- setters: one per control ---------------------------------------------------------
    def set_kv_cache_dtype(self, value: str) -> str | None:
        try:
            validate_kv_cache_dtype(value, EngineVersion.parse(self.controls.engine).version_str)
        except KvplanInputError as e:
            return str(e)
        return self.apply(kv_cache_dtype=value, kv_cache_dtype_explicit=True)

    def set_tensor_parallel_size(self, value: str | int) -> str | None:
        try:
            n = parse_flags(["--tensor-parallel-size", str(value).strip()]).tensor_parallel_size
        except KvplanInputError as e:
            return str(e)
        return self.apply(tensor_parallel_size=n)

    def set_max_model_len(self, value: str | int | None) -> str | None:
        """'32k', '131072', or '' / None for the model's own maximum."""
        text = "" if value is None else str(value).strip()
        if not text or text == "auto":
            return self.apply(max_model_len=None)
        try:
            n = parse_flags(["--max-model-len", text]).max_model_len
        except KvplanInputError as e:
            return str(e)
        return self.apply(max_model_len=n)

    def set_gpu(self, value: str | None) -> str | None:
        return self.apply(gpu=value or None)

    def set_kv_budget_gib(self, value: str | float | None) -> str | None:
        text = "" if value is None else str(value).strip()
        if not text:
            return self.apply(kv_budget_gib=None)
        try:
            gib = float(text)
        except ValueError:
            return f"KV budget expects GiB as a number, got {text!r}. Pass e.g. 40."
        if gib <= 0:
            return f"KV budget must be positive, got {text}. Pass e.g. 40."
        return self.apply(kv_budget_gib=gib)

    def set_engine(self, value: str) -> str | None:
        """A vLLM release such as vllm==0.19.0 (the planner refuses what it does not model)."""
        return self.apply(engine=value.strip())

    # ---- skip layers ----------------------------------------------------------------------
    def sliding_layers(self) -> list[int]:
        """Layers the 'sliding_window' skip keyword selects (vLLM: windowed attention, never MLA)."""
        return [lp.index for lp in self.plan.layers
                if lp.sliding_window is not None and lp.kind != "mla" and lp.kind not in NO_KV_KINDS]

    def _covered(self) -> set[int]:
        """Layers the current skip tokens name (by index, or by the 'sliding_window' keyword)."""
        tokens = self.controls.skip_layers
        covered = {int(t) for t in tokens if t.isdigit()}
        if SLIDING in tokens:
            covered |= set(self.sliding_layers())
        return covered

    def toggle_sliding_window(self) -> str | None:
        """Skip every sliding-window layer, or stop skipping them all if they all are skipped."""
        sliding = set(self.sliding_layers())
        if not sliding:
            return "this model has no sliding-window layers."
        all_on = sliding <= self._covered()
        tokens = [t for t in self.controls.skip_layers if not (t == SLIDING or (t.isdigit() and int(t) in sliding))]
        if not all_on:
            tokens.insert(0, SLIDING)
        return self.apply(skip_layers=tuple(tokens))

    def toggle_layers(self, indices: Sequence[int]) -> str | None:
        """Skip these layers, or stop skipping them if all are (a covering keyword is expanded to indices)."""
        want = set(indices)
        covered = self._covered()
        tokens = list(self.controls.skip_layers)
        if want <= covered:
            if SLIDING in tokens and want & set(self.sliding_layers()):
                listed = {int(t) for t in tokens if t.isdigit()}
                tokens.remove(SLIDING)
                tokens += [str(i) for i in self.sliding_layers() if i not in want and i not in listed]
            tokens = [t for t in tokens if not (t.isdigit() and int(t) in want)]
        else:
            tokens += [str(i) for i in sorted(want - covered)]
        return self.apply(skip_layers=tuple(tokens))

    # ---- what the app shows ---------------------------------------------------------------
    def findings_for(self, indices: Sequence[int]) -> list[Finding]:
        """Findings that name any of these layers."""
        want = set(indices)
        return [f for f in self.plan.findings if want & set(f.layers)]

    def flagged_layers(self) -> set[int]:
        return {i for f in self.plan.findings for i in f.layers}

    def totals(self) -> list[TotalsChange]:
        """The totals bar: bytes per token, tokens that fit, concurrency at max-model-len, vs start."""
        now, start = self.plan.totals, self.start.totals
        bpt = TotalsChange("KV B/token", now.bytes_per_token, start.bytes_per_token, _fmt_int(now.bytes_per_token),
                           _delta(now.bytes_per_token, start.bytes_per_token, integer=True))
        fit = TotalsChange("tokens that fit", now.tokens_capacity, start.tokens_capacity,
                           _fmt_int(now.tokens_capacity) if now.tokens_capacity is not None else "- (no KV budget)",
                           _delta(now.tokens_capacity, start.tokens_capacity, integer=True))
        mml = f"{now.max_model_len:,}" if now.max_model_len else "?"
        conc = TotalsChange(f"concurrency @ {mml}", now.max_concurrency, start.max_concurrency,
                            f"{now.max_concurrency:.2f}" if now.max_concurrency is not None else "-",
                            _delta(now.max_concurrency, start.max_concurrency, integer=False))
        saving = TotalsChange("saving vs bf16", now.saving_vs_bf16, start.saving_vs_bf16, f"{now.saving_vs_bf16:.1%}",
                              "" if now.saving_vs_bf16 == start.saving_vs_bf16 else
                              f"was {start.saving_vs_bf16:.1%}")
        return [bpt, fit, conc, saving]

    def changes(self) -> list[str]:
        """What differs from the starting controls, one phrase each."""
        a, b = self.start_controls, self.controls
        out = []
        if (a.kv_cache_dtype, a.kv_cache_dtype_explicit) != (b.kv_cache_dtype, b.kv_cache_dtype_explicit):
            out.append(f"kv-cache-dtype {a.kv_cache_dtype} → {b.kv_cache_dtype}")
        if a.skip_layers != b.skip_layers:
            out.append(f"skip [{' '.join(a.skip_layers) or '-'}] → [{' '.join(b.skip_layers) or '-'}]")
        for label, field in (("TP", "tensor_parallel_size"), ("max-model-len", "max_model_len"), ("GPU", "gpu"),
                             ("KV budget GiB", "kv_budget_gib"), ("engine", "engine")):
            x, y = getattr(a, field), getattr(b, field)
            if x != y:
                out.append(f"{label} {x if x is not None else '-'} → {y if y is not None else '-'}")
        return out

    def options(self, controls: Controls | None = None) -> list[str]:
        """kvplan's own options for the current (or given) controls (after the engine flags)."""
        c, out = controls or self.controls, []
        if c.gpu:
            out += ["--gpu", c.gpu]
        if c.kv_budget_gib is not None:
            out += ["--kv-budget-gib", f"{c.kv_budget_gib:g}"]
        if c.engine != DEFAULT_ENGINE:
            out += ["--engine", c.engine]
        if self.policy is not None:
            out += ["--policy", str(self.policy)]
        return out

    def plan_command(self, controls: Controls | None = None) -> str:
        """The `kvplan plan` command line that prints `export_json()` (for the current or given controls)."""
        return shlex.join(["kvplan", "plan", self.path, *self.argv(controls), *self.options(controls),
                           "--format", "json"])

    def export_json(self) -> str:
        """The current plan, byte-equal to `kvplan plan ... --format json` for the same flags."""
        from kvplan.report.json_report import dumps
        return dumps(self.plan)

    def vllm_flags(self) -> tuple[str, list[Finding]]:
        """The vLLM launch flags that realise the current plan, and the emitter's findings."""
        from kvplan.emit import emit
        result = emit(self.plan, "vllm")
        return result.command, list(result.findings)


def layer_fields(lp: LayerPlan) -> list[tuple[str, str]]:
    """Every LayerPlan field except the provenance lists (and the state fields of a layer without one), as
    (name, text)."""
    out = []
    for name in LayerPlan.model_fields:
        if name in ("decisions", "decided_by"):
            continue
        v = getattr(lp, name)
        v = getattr(v, "value", v)
        if v is None and name.startswith("state_"):
            continue  # attention layers keep no state: no rows for it
        if v is None:
            out.append((name, "-"))
        else:
            out.append((name, f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)))
    return out


KV_CACHE_DTYPES: tuple[str, ...] = VLLM_033_KV_CACHE_DTYPES
"""Values of the kv-cache-dtype control (vLLM 0.33's CacheDType, in vLLM's order)."""
