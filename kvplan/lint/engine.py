"""One vLLM launch -> findings with positions: flag values, model rules (planner), GPU and parallelism.

Plans are cached per (model config, weight size, flags, GPU, budget) for the whole run, so a
thousand manifests of one model compile one plan.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from kvplan.api import gpu_facts
from kvplan.errors import KvplanInputError
from kvplan.ingest.checkpoint import ModelInputs, load_model_inputs
from kvplan.ingest.flags import KNOWN_FLAGS, MODELLED, parse_flags, scan_argv
from kvplan.backends.engines import resolve_engine
from kvplan.lint.config import LoadedConfig, engine_spec
from kvplan.lint.report import LaunchInfo, Location
from kvplan.lint.resolve import ModelSource, gpu_from_label, resolve_model
from kvplan.lint.shell import Tok
from kvplan.lint.sources import RawFinding, Site
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import Plan
from kvplan.planner.compile import compile_plan
from kvplan.rules.base import all_rules
from kvplan.rules.context import FlagsOnlyContext

# Flag rules that need no model: they run even when the model's config is unknown.
MODEL_FREE = ("KV001", "KV002", "KV003", "KV006", "KV007", "KV301")

# KServe huggingfaceserver's own flags (kserve/python/huggingfaceserver/__main__.py); vLLM flags pass on.
KSERVE_HF_FLAGS: dict[str, bool] = {  # flag -> takes a value
    "--model_name": True, "--model_id": True, "--model_dir": True, "--model_revision": True,
    "--tokenizer_revision": True, "--backend": True, "--task": True, "--max_length": True,
    "--http_port": True, "--grpc_port": True, "--workers": True, "--predictor_host": True,
    "--protocol": True, "--return_probabilities": False, "--return_token_type_ids": False,
    "--return_raw_logits": False, "--disable_lower_case": False, "--disable_special_tokens": False,
    "--trust_remote_code": False, "--enable_docs_url": False,
}


@dataclass
class FlagUse:
    """A flag as written, its value tokens, and every token it spans."""

    flag: str
    tok: Tok
    values: list[Tok] = field(default_factory=list)
    inline: bool = False
    written: str = ""
    """The flag as written (dashes for underscores); `flag` is the option it resolved to."""

    def tokens(self) -> list[Tok]:
        return [self.tok] if self.inline else [self.tok, *self.values]


def _norm(flag: str) -> str:
    return flag.replace("_", "-") if flag.startswith("--") else flag


def index_flags(args: Sequence[Tok]) -> tuple[list[FlagUse], list[Tok]]:
    """Split engine arguments with vLLM's own option table, as `kvplan.ingest.flags.parse_flags` reads them.

    `flag` is the option a prefix or alias resolved to (`--max-model` -> `--max-model-len`, `-tp` ->
    `--tensor-parallel-size`); unknown and ambiguous flags keep their written form.
    """
    scan = scan_argv([t.value for t in args])
    uses: list[FlagUse] = []
    seen: set[int] = set()
    for u in scan.uses:
        if u.index in seen and not u.synthetic:
            continue
        t = args[u.index]
        if u.synthetic:  # --attention-config.backend X: the dotted tokens themselves
            vals = [args[k] for k in u.value_indices if k != u.index]
            uses.append(FlagUse(u.flag, t, vals, inline=not vals, written=u.written))
            continue
        seen.add(u.index)
        if u.inline:
            eq = t.value.find("=")
            off = eq + 1 if eq >= 0 else min(2, len(t.value))  # -O3
            uses.append(FlagUse(u.flag, t, [t.at(off)], inline=True, written=u.written))
        else:
            uses.append(FlagUse(u.flag, t, [args[k] for k in u.value_indices], written=u.written))
    positionals = [args[i] for i in scan.positionals]
    return uses, positionals


def _argv(uses: list[FlagUse], positionals: list[Tok]) -> list[str]:
    toks = sorted([t for u in uses for t in u.tokens()] + positionals, key=lambda t: (t.line, t.col))
    return [t.value for t in toks]


def _last(uses: list[FlagUse], *flags: str) -> Optional[FlagUse]:
    for u in reversed(uses):
        if u.flag in flags:
            return u
    return None


@dataclass
class LaunchResult:
    findings: list[RawFinding]
    info: LaunchInfo


class Linter:
    """Checks launches; holds the per-run caches."""

    def __init__(self, cfg: LoadedConfig, default_gpu: Optional[str]):
        self.cfg = cfg
        self.default_gpu = default_gpu
        self.plans: dict[tuple[Any, ...], Plan | KvplanInputError] = {}
        self.inputs: dict[tuple[str, Optional[str]], ModelInputs | KvplanInputError] = {}
        self.budget = int(cfg.config.kv_budget_gib * 2**30) if cfg.config.kv_budget_gib is not None else None
        self.engine = resolve_engine(engine_spec(cfg.config.engine_version))
        rules = all_rules()
        self.rules = {r.code: r for r in rules}
        self.model_rules = sorted(r.code for r in rules if r.kind == "check" and r.code not in MODEL_FREE
                                  and r.family != "lint")

    # ------------------------------------------------------------------ one launch
    def lint_site(self, site: Site, file: Any, display: str) -> LaunchResult:
        out: list[RawFinding] = []
        uses, positionals = index_flags(site.launch.args)
        model_tok: Optional[Tok] = site.model_hint
        if site.launch.dialect == "kserve-hf":
            kept = []
            for u in uses:
                raw = u.tok.value.split("=")[0]
                if raw in KSERVE_HF_FLAGS:
                    if raw == "--model_id" and u.values:
                        model_tok = u.values[0]
                    if not KSERVE_HF_FLAGS[raw] and u.values and not u.inline:  # booleans take no value
                        positionals += u.values
                    continue
                kept.append(u)
            uses = kept
        # Values only known at run time ($(VAR) from a Secret, ${VAR} in a script): drop, say so for KV flags.
        unresolved = {(t.line, t.col) for t in site.unresolved}
        kept = []
        for u in uses:
            # (an unknown or ambiguous flag is wrong whatever its value: it stays)
            if u.flag in KNOWN_FLAGS and (any((v.line, v.col) in unresolved or "$" in v.value for v in u.values)
                                          or (u.inline and (u.tok.line, u.tok.col) in unresolved)):  # --port=$PORT
                if u.flag in MODELLED:
                    out.append(RawFinding("KV811", f"{u.flag} {u.values[0].value} is set from a variable kvplan cannot "
                                                   "resolve, so its value was not checked.", u.values[0]))
                continue
            kept.append(u)
        uses = kept
        # A word only known at run time ($EXTRA_ARGS, "$@") may expand to any flags, taking the words after it
        # as their values: then no word past the model is a stray argument vLLM would reject.
        if any((p.line, p.col) in unresolved or "$" in p.value for p in positionals[1:]):
            positionals = positionals[:1]

        sf = self._parse(uses, positionals, out)
        model = sf.model
        if sf.model is not None:
            use = _last(uses, "--model")
            model_tok = use.values[0] if use and use.values else next((p for p in positionals if p.value == sf.model), model_tok)
        elif model_tok is not None:
            model = model_tok.value
        anchor = site.anchor

        # GPU: node selector label, else the run's default.
        gpu_name = self.default_gpu
        if site.gpu_label is not None:
            named = gpu_from_label(site.gpu_label.value)
            if named is None:
                out.append(RawFinding("KV807", f"GPU label {site.gpu_label.value!r} names no GPU kvplan models; "
                                               + (f"using the default GPU {self.default_gpu}." if self.default_gpu
                                                  else "GPU-dependent rules were skipped."), site.gpu_label))
            else:
                gpu_name = named

        # Parallelism vs GPUs requested.
        need = sf.tensor_parallel_size * sf.pipeline_parallel_size
        if site.gpu_count is not None and need > site.gpu_count * site.group_size:
            have = site.gpu_count * site.group_size
            where = f"{site.group_size} pods x {site.gpu_count} = {have}" if site.group_size > 1 else f"{have}"
            use = _last(uses, "--tensor-parallel-size", "-tp") or _last(uses, "--pipeline-parallel-size", "-pp")
            out.append(RawFinding(
                "KV808", f"TP {sf.tensor_parallel_size} x PP {sf.pipeline_parallel_size} needs {need} GPUs but the "
                         f"{'group' if site.group_size > 1 else 'pod'} requests {where}.",
                use.tok if use else anchor))

        info_gpu = gpu_name
        src: Optional[ModelSource] = None
        if model is not None:
            try:
                src = resolve_model(model, file, self.cfg)
            except KvplanInputError as e:
                out.append(RawFinding("KV804", str(e), model_tok or anchor, model=model))
                src = None  # reported; the model-free rules still run
        if src is None:
            if not any(f.code == "KV804" for f in out):
                what = f"model {model!r} has no config.json kvplan can find" if model else "the launch names no model"
                out.append(RawFinding(
                    "KV804", f"{what}; skipped {len(self.model_rules)} rules that need it: "
                             f"{', '.join(self.model_rules)}.", model_tok or anchor, model=model))
            ctx = FlagsOnlyContext(flags=sf, engine=self.engine)
            for code in MODEL_FREE:
                r = self.rules[code]
                if not self.engine.satisfies(r.versions):
                    continue
                for e in r.fn(ctx):
                    out.append(self._anchored(code, e.message, e.fix or r.fix, (), uses, model_tok, anchor, model,
                                              positionals=positionals))
        else:
            plan = self._plan(src, sf, gpu_name)
            if isinstance(plan, KvplanInputError):
                out.append(RawFinding("KV804", f"the config for model {model!r} ({src.label}) cannot be read: {plan}",
                                      model_tok or anchor, model=model))
            else:
                for f in plan.findings:
                    out.append(self._anchored(f.code, f.message, f.fix, tuple(f.layers), uses, model_tok, anchor, model,
                                              f.severity.value, positionals=positionals))
        # Consequences of problems already reported: a flag and value in one argv entry (KV809) is not
        # also an unknown flag, and a skip list is not "without quantization" when the dtype was invalid.
        bad_dtype = any(f.code == "KV803" and "--kv-cache-dtype " in f.message for f in out)
        out = [f for f in out if not (f.code == "KV001" and re.match(r"unknown flag [^\s:;]+\s+[^\s:;]+:", f.message))
               and not (bad_dtype and f.code in ("KV305", "KV306"))]
        info = LaunchInfo(location=Location(path=display, line=anchor.line, column=anchor.col, yaml_path=anchor.yaml_path),
                          model=model, config=src.label if src else None, gpu=info_gpu,
                          gpu_count=(site.gpu_count * site.group_size) if site.gpu_count is not None else None)
        return LaunchResult(out, info)

    # ------------------------------------------------------------------ flags
    def _parse(self, uses: list[FlagUse], positionals: list[Tok], out: list[RawFinding]) -> ServingFlags:
        for _ in range(len(uses) + 1):
            try:
                return parse_flags(_argv(uses, positionals))
            except KvplanInputError as e:
                m = re.search(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", e.problem)
                flag = m.group(1) if m else None
                use = _last(uses, flag) if flag else None
                if use is None:
                    # The flag may be spelled with underscores or as a short alias.
                    field_ = MODELLED.get(flag or "", ("",))[0]
                    use = next((u for u in reversed(uses) if MODELLED.get(u.flag, ("?",))[0] == field_), None)
                if use is None:
                    out.append(RawFinding("KV803", e.problem, positionals[0] if positionals else Tok("", 1, 1), fix=e.fix))
                    return ServingFlags()
                tok = use.values[0] if use.values else use.tok
                out.append(RawFinding("KV803", e.problem, tok, fix=e.fix))
                uses.remove(use)
        return ServingFlags()

    # ------------------------------------------------------------------ anchoring
    def _anchored(self, code: str, message: str, fix: Optional[str], layers: tuple[int, ...], uses: list[FlagUse],
                  model_tok: Optional[Tok], anchor: Tok, model: Optional[str],
                  severity: Optional[str] = None, positionals: Sequence[Tok] = ()) -> RawFinding:
        tok = _anchor(code, message, uses, positionals) or model_tok or anchor
        return RawFinding(code, message, tok, fix=fix, model=model, layers=layers, severity=severity)

    # ------------------------------------------------------------------ plans
    def _plan(self, src: ModelSource, sf: ServingFlags, gpu_name: Optional[str]) -> Plan | KvplanInputError:
        key = (str(src.path), src.weight_bytes, sf.model_dump_json(exclude={"model"}), gpu_name, self.budget,
               self.engine.version_str)
        if key not in self.plans:
            try:
                inputs = self._inputs(src, sf.quantization)
                gpu = gpu_facts(gpu_name) if gpu_name else None
                weight = src.weight_bytes if src.weight_bytes is not None else inputs.weight_bytes
                self.plans[key] = compile_plan(inputs.arch, inputs.quant, sf, gpu, source=src.label,
                                               weight_bytes=weight, kv_budget_bytes=self.budget, engine=self.engine)
            except KvplanInputError as e:
                self.plans[key] = e
        return self.plans[key]

    def _inputs(self, src: ModelSource, quantization: Optional[str]) -> ModelInputs:
        key = (str(src.path), quantization)
        if key not in self.inputs:
            try:
                self.inputs[key] = load_model_inputs(src.path, quantization_flag=quantization)
            except KvplanInputError as e:
                self.inputs[key] = e
        v = self.inputs[key]
        if isinstance(v, KvplanInputError):
            raise v
        return v


_KV_FLAG = ("--kv-cache-dtype",)


def _anchor(code: str, message: str, uses: list[FlagUse], positionals: Sequence[Tok] = ()) -> Optional[Tok]:
    """The token a planner finding is about: the flag it names, else --kv-cache-dtype, else None."""
    if code == "KV001" and message.startswith("unexpected argument '"):  # a stray positional word
        word = message[len("unexpected argument '"):].split("':", 1)[0]
        return next((t for t in reversed(positionals) if t.value == word), None)
    if code in ("KV001", "KV006", "KV007"):
        m = re.match(r"(?:unknown flag|ambiguous flag|invalid value for) (\S+?):", message)
        flag = _norm(m.group(1)) if m else None
        hits = [u for u in uses if flag in (u.written, u.flag)]
        return hits[0].tok if hits else None
    if code in ("KV002", "KV003"):
        u = _last(uses, "--calculate-kv-scales")
        return u.tok if u else None
    if code.startswith("KV3"):
        u = _last(uses, "--kv-cache-dtype-skip-layers")
        if u is None:
            return _kv(uses)
        m = re.search(r"token '([^']*)'|index (\S+?) ", message)
        want = (m.group(1) or m.group(2)) if m else None
        for u2 in reversed(uses):
            if u2.flag != "--kv-cache-dtype-skip-layers" or want is None:
                continue
            for v in u2.values:
                if v.value == want:
                    return v
                if want in [p.strip() for p in v.value.split(",")]:
                    return v.at(v.value.find(want))
        return u.tok
    if code in ("KV501", "KV502"):
        u = _last(uses, "--max-model-len")
        return u.tok if u else _kv(uses)
    if code.startswith("KV7"):
        u = _last(uses, "--attention-backend") or _last(uses, "--attention-config", "-ac")
        return u.tok if u else _kv(uses)
    if code == "KV201" and _kv(uses) is None:
        u = _last(uses, "--dtype")
        return u.tok if u else None
    if code.startswith(("KV1", "KV2", "KV4")):
        u = _last(uses, "--kv-cache-dtype")
        if u is not None:
            return u.tok
        q = _last(uses, "--quantization", "-q")
        return q.tok if q else None
    return None


def _kv(uses: list[FlagUse]) -> Optional[Tok]:
    u = _last(uses, *_KV_FLAG)
    return u.tok if u else None
