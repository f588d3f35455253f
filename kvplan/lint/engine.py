"""One vLLM launch -> findings with positions: flag values, model rules (planner), GPU and parallelism.

Plans are cached per (model config, weight size, flags, GPU, budget) for the whole run, so a
thousand manifests of one model compile one plan.
"""
from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.engines import SUPPORTED_ENGINES, resolve_engine
from kvplan.errors import KvplanInputError
from kvplan.ingest.checkpoint import ModelInputs, load_model_inputs
from kvplan.ingest.flags import KNOWN_FLAGS, MODELLED, parse_flags, scan_argv
from kvplan.lint.config import LoadedConfig, engine_spec
from kvplan.lint.report import LaunchInfo, Location
from kvplan.lint.resolve import ModelSource, gpu_from_label, resolve_model
from kvplan.lint.shell import Tok
from kvplan.lint.sources import RawFinding, Site
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import Plan
from kvplan.pipeline import gpu_facts
from kvplan.planner.compile import apply_strict, compile_plan
from kvplan.rules.base import all_rules
from kvplan.rules.context import FlagsOnlyContext

# Flag rules that need no model: they run even when the model's config is unknown.
MODEL_FREE = ("KV001", "KV002", "KV003", "KV006", "KV007", "KV301")

# Findings about the file, the pod or the variables, true whichever vLLM release runs: never upgrade findings.
RELEASE_INDEPENDENT = frozenset({"KV802", "KV804", "KV807", "KV808", "KV809", "KV811", "KV812", "KV813"})

# What makes vLLM's parser exit, and differs between releases (flags come and go, prefixes become ambiguous,
# choices change): in an image whose vLLM release kvplan cannot read, these are warnings, not errors.
RELEASE_DEPENDENT_EXITS = frozenset({"KV001", "KV002", "KV006", "KV007"})

MODELLED_FIRST = (0, 18, 0)
_MODELLED = "vLLM 0.18 to 0.33"

# vLLM's own release images: their tag is the vLLM version (v0.10.0, v0.25.0-ubuntu2404, 0.11.0).
_VLLM_RELEASE_REPO = re.compile(r"(?:^|/)vllm/vllm-openai(?:-[a-z0-9]+)?$", re.I)
_RELEASE_TAG = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:(?:\.post\d+)|(?:[-+.][\w.-]*))?$")


def image_release(image: str) -> tuple[str, tuple[int, int, int] | str | None] | None:
    """("pinned", (0, 10, 0)) for vllm/vllm-openai:v0.10.0, ("unpinned", "latest"|"nightly"|None) for a
    vLLM image without a release tag, None for other images (their tag says nothing about vLLM)."""
    ref = image.strip()
    name = ref.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    repo, tag = (name.rsplit(":", 1) if ":" in last else (name, None))
    if not _VLLM_RELEASE_REPO.search(repo):
        return None
    m = _RELEASE_TAG.match(tag or "")
    if m:
        return "pinned", (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    return "unpinned", tag


def _pinned_str(image: str) -> str | None:
    rel = image_release(image)
    if rel and rel[0] == "pinned" and isinstance(rel[1], tuple):
        return ".".join(str(x) for x in rel[1])
    return None

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


def _argv(uses: list[FlagUse], positionals: list[Tok], order: Sequence[Tok] = ()) -> list[str]:
    """The kept arguments in launch order (a substituted value keeps its place, wherever it was written)."""
    index = {id(t): i for i, t in enumerate(order)}
    toks = sorted([t for u in uses for t in u.tokens()] + positionals,
                  key=lambda t: (index[id(t)], 0, 0) if id(t) in index else (len(index), t.line, t.col))
    return [t.value for t in toks]


def _last(uses: list[FlagUse], *flags: str) -> FlagUse | None:
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

    def __init__(self, cfg: LoadedConfig, default_gpu: str | None):
        self.cfg = cfg
        self.default_gpu = default_gpu
        self.plans: dict[tuple[Any, ...], Plan | KvplanInputError] = {}
        self.inputs: dict[tuple[str, str | None], ModelInputs | KvplanInputError] = {}
        self.budget = int(cfg.config.kv_budget_gib * 2**30) if cfg.config.kv_budget_gib is not None else None
        self.engine = resolve_engine(engine_spec(cfg.config.engine_version))
        self.newest = resolve_engine(SUPPORTED_ENGINES[0])  # what :latest and upgrades mean
        rules = all_rules()
        self.rules = {r.code: r for r in rules}
        self.model_rules = sorted(r.code for r in rules if r.kind == "check" and r.code not in MODEL_FREE
                                  and r.family != "lint")

    # ------------------------------------------------------------------ which vLLM
    def release_unknown(self, site: Site) -> bool:
        """The launch runs in an image whose tag names no vLLM release (a vendor's `pytorch-vllm-serve:DATE`,
        `lmcache/vllm-openai:DATE`, your own build) and the configuration does not say which release it is."""
        return (site.image is not None and image_release(site.image.value) is None
                and "engine_version" not in self.cfg.config.model_fields_set)

    def engine_for(self, site: Site) -> tuple[EngineVersion, str | None, list[RawFinding]]:
        """The release to lint a launch against, the pinned release when it is older than kvplan
        models (its findings become upgrade findings), and the note saying so."""
        if site.image is None:
            return self.engine, None, []
        rel = image_release(site.image.value)
        if rel is None:
            return self.engine, None, []
        kind, version = rel
        latest = self.newest  # the image's own release when modelled, else the newest modelled one
        newest = latest.version_str
        if kind == "pinned" and isinstance(version, tuple):
            v = ".".join(str(x) for x in version)
            try:
                return resolve_engine(f"vllm=={v}"), None, []
            except KvplanInputError:
                pass
            if version < MODELLED_FIRST:
                return latest, v, [RawFinding(
                    "KV812", f"image {site.image.value} runs vLLM {v}, older than the releases kvplan models "
                             f"({_MODELLED}); findings marked 'on upgrade' are what vLLM {newest} would reject or "
                             "change, not errors of the pinned release.", site.image,
                    fix=f"Upgrade the image to a modelled release (vllm/vllm-openai:v{newest}) and fix the upgrade "
                        "findings, or suppress KV812 with a reason.")]
            return latest, None, [RawFinding(
                "KV812", f"image {site.image.value} runs vLLM {v}, newer than the releases kvplan models "
                         f"({_MODELLED}); linted against vLLM {newest}, the newest one.", site.image,
                fix="Upgrade kvplan to a release that models it, or suppress KV812 with a reason.")]
        what = f"tag {version!r}" if version else "no release tag"
        return latest, None, [RawFinding(
            "KV813", f"image {site.image.value} has {what}, so the vLLM release is not pinned; linted against "
                     f"vLLM {newest}, the newest release kvplan models.", site.image,
            fix=f"Pin the image to a release (vllm/vllm-openai:v{newest}) so deployments are reproducible.")]

    # ------------------------------------------------------------------ one launch
    def lint_site(self, site: Site, file: Any, display: str) -> LaunchResult:
        engine, pinned_old, notes = self.engine_for(site)
        out: list[RawFinding] = []
        for t in site.unknown_kwargs:  # Ray Serve LLM engine_kwargs: AsyncEngineArgs(**kwargs) takes exact names
            close = difflib.get_close_matches(t.value, sorted(s[2:].replace("-", "_") for s in KNOWN_FLAGS
                                                              if s.startswith("--") and not s.startswith("--no-")), n=1)
            out.append(RawFinding(
                "KV001", f"engine_kwargs key {t.value!r} is not a vLLM {engine.version_str} engine argument: the "
                         f"replica fails with \"unexpected keyword argument '{t.value}'\""
                         + (f"; did you mean {close[0]}?" if close else "."), t,
                fix=(f"Rename it to {close[0]}" if close else "Remove it") + " (engine_kwargs keys are vLLM's "
                    "engine arguments, `vllm serve` flags with underscores, matched exactly)."))
        uses, positionals = index_flags(site.launch.args)
        model_tok: Tok | None = site.model_hint
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
        # Values only known at run time ($(VAR) from a Secret, ${VAR} in a script, $(cmd)): never checked,
        # never shifting the arguments around them; KV811 says so for the flags kvplan models.
        unknown_model: Tok | None = None
        kept = []
        for u in uses:
            if u.tok.unknown and "$" in u.tok.value.split("=", 1)[0]:
                continue  # the flag's own name is a variable
            bad = next((v for v in u.values if v.unknown), None)
            # (an unknown or ambiguous flag is wrong whatever its value: it stays, and vLLM exits on it)
            if bad is not None and (u.flag in KNOWN_FLAGS or u.flag == "--model"):
                if u.flag == "--model":
                    unknown_model = bad
                elif u.flag in MODELLED:
                    out.append(RawFinding("KV811", f"{u.flag} {bad.value} is set from a value kvplan cannot resolve "
                                                   "statically, so it was not checked.", bad))
                continue
            kept.append(u)
        uses = kept
        if positionals and positionals[0].unknown:
            unknown_model = unknown_model or positionals[0]
            positionals = []
        elif any(p.unknown for p in positionals[1:]):
            # A word only known at run time ($EXTRA_ARGS, "$@") may expand to any flags, taking the words after
            # it as their values: then no word past the model is a stray argument vLLM would reject.
            positionals = positionals[:1]

        sf = self._parse(uses, positionals, out, site.launch.args)
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
            label = site.gpu_label.value.strip().lower()
            named = gpu_from_label(label)
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
        src: ModelSource | None = None
        if model is not None:
            try:
                src = resolve_model(model, file, self.cfg, revision=sf.revision)
            except KvplanInputError as e:
                fix = (f"{e.fix.rstrip('.')}; or map it in pyproject.toml: [tool.kvplan.lint.models] "
                       f'"{model}" = "path/to/config.json".') if e.fix else None
                n_rules = len(self.model_rules)
                why = e.problem.rstrip(".")
                why += (f" ({n_rules} rules)." if "skipped" in why else
                        f"; {n_rules} rules that need the model's config.json were skipped.")
                out.append(RawFinding("KV804", why, model_tok or anchor,
                                      fix=fix, model=model, skipped_rules=tuple(self.model_rules)))
                src = None  # reported; the model-free rules still run
        if src is None:
            n = len(self.model_rules)
            if any(f.code == "KV804" for f in out) or (site.partial and model is None and unknown_model is None):
                pass  # a patch or values entry: the model is set where the rest of the launch is
            elif unknown_model is not None:
                out.append(RawFinding(
                    "KV804", f"the served model comes from {unknown_model.value}, which is only known at run time; "
                             f"{n} rules that need the model's config.json were skipped.", unknown_model,
                    fix="Give the variable a literal value in the same file (env value), or lint the rendered "
                        "manifest; map the model in [tool.kvplan.lint.models] to check it.",
                    skipped_rules=tuple(self.model_rules)))
            elif model:
                out.append(RawFinding(
                    "KV804", f"model {model!r} has no config.json kvplan can find; {n} rules that need it were "
                             "skipped.", model_tok or anchor, model=model,
                    fix=f'Map it in pyproject.toml: [tool.kvplan.lint.models] "{model}" = "path/to/config.json" '
                        "(or a checkpoint folder); `kvplan lint --list-models` lists the bundled ids.",
                    skipped_rules=tuple(self.model_rules)))
            else:
                out.append(RawFinding(
                    "KV804", f"the launch names no model (vLLM would serve its default); {n} rules that need the "
                             "model's config.json were skipped.", anchor,
                    fix="Pass the model (vllm serve MODEL or --model MODEL).", skipped_rules=tuple(self.model_rules)))
            ctx = FlagsOnlyContext(flags=sf, engine=engine)
            for code in MODEL_FREE:
                r = self.rules[code]
                if not engine.satisfies(r.versions):
                    continue
                for em in r.fn(ctx):
                    out.append(self._anchored(code, em.message, em.fix or r.fix, (), uses, model_tok, anchor, model,
                                              positionals=positionals))
        else:
            plan = self._plan(src, sf, gpu_name, engine)
            if isinstance(plan, KvplanInputError):
                out.append(RawFinding("KV804", f"the config for model {model!r} ({src.label}) cannot be read: {plan}",
                                      model_tok or anchor, model=model, skipped_rules=tuple(self.model_rules)))
            else:
                if self.cfg.strict:  # KV604 (unverified architecture, unused geometry keys) is an error
                    plan = apply_strict(plan)
                for f in plan.findings:
                    out.append(self._anchored(f.code, f.message, f.fix, tuple(f.layers), uses, model_tok, anchor, model,
                                              f.severity.value, positionals=positionals))
        # Consequences of problems already reported: a flag and value in one argv entry (KV809) is not
        # also an unknown flag, and a skip list is not "without quantization" when the dtype was invalid.
        bad_dtype = any(f.code == "KV803" and "--kv-cache-dtype " in f.message for f in out)
        out = [f for f in out if not (f.code == "KV001" and re.match(r"unknown flag [^\s:;]+\s+[^\s:;]+:", f.message))
               and not (bad_dtype and f.code in ("KV305", "KV306"))]
        if pinned_old is not None:  # what the modelled release would reject: upgrade findings, not errors today
            out = [f if f.code in RELEASE_INDEPENDENT else replace(
                f, message=f"on upgrade from vLLM {pinned_old} to {engine.version_str}: {f.message}", severity="info",
                upgrade=engine.version_str) for f in out]
        elif self.release_unknown(site) and site.image is not None:
            # The parser that runs is the image's, whose release is unknown: a flag vLLM 0.33 rejects may be one
            # that release accepts (--swap-space in older releases). A warning, not an error that fails CI on a pod that
            # starts; set engine-version (or pin a vllm/vllm-openai:vX.Y.Z image) to make it an error again.
            img = site.image.value
            out = [replace(
                f, severity="warning",
                message=f"image {img} does not name its vLLM release (linted against vLLM {engine.version_str}, "
                        f"the default engine-version): {f.message}",
                fix=(f"{f.fix.rstrip('.')}; " if f.fix else "")
                    + "if the image runs an older vLLM that accepts it, set engine-version in the kvplan "
                      "configuration to that release (findings are then errors or pass)."
            ) if f.code in RELEASE_DEPENDENT_EXITS and (f.severity or self._sev(f.code)) == "error" else f
                for f in out]
        out = notes + out
        info = LaunchInfo(location=Location(path=display, line=anchor.line, column=anchor.col, yaml_path=anchor.yaml_path),
                          model=model if model is not None else (unknown_model.value if unknown_model else None),
                          config=src.label if src else None, gpu=info_gpu,
                          gpu_count=(site.gpu_count * site.group_size) if site.gpu_count is not None else None,
                          image=site.image.value if site.image else None, engine=engine.version_str,
                          pinned=pinned_old or (None if site.image is None or image_release(site.image.value) is None
                                                else _pinned_str(site.image.value)))
        return LaunchResult(out, info)

    def _sev(self, code: str) -> str:
        r = self.rules.get(code)
        return r.severity.value if r else "warning"

    # ------------------------------------------------------------------ flags
    def _parse(self, uses: list[FlagUse], positionals: list[Tok], out: list[RawFinding],
               order: Sequence[Tok] = ()) -> ServingFlags:
        for _ in range(len(uses) + 1):
            try:
                return parse_flags(_argv(uses, positionals, order))
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
    def _anchored(self, code: str, message: str, fix: str | None, layers: tuple[int, ...], uses: list[FlagUse],
                  model_tok: Tok | None, anchor: Tok, model: str | None,
                  severity: str | None = None, positionals: Sequence[Tok] = ()) -> RawFinding:
        tok = _anchor(code, message, uses, positionals) or model_tok or anchor
        return RawFinding(code, message, tok, fix=fix, model=model, layers=layers, severity=severity)

    # ------------------------------------------------------------------ plans
    def _plan(self, src: ModelSource, sf: ServingFlags, gpu_name: str | None,
              engine: EngineVersion | None = None) -> Plan | KvplanInputError:
        engine = engine or self.engine
        key = (str(src.path), src.weight_bytes, sf.model_dump_json(exclude={"model"}), gpu_name, self.budget,
               engine.version_str)
        if key not in self.plans:
            try:
                inputs = self._inputs(src, sf.quantization, sf.hf_overrides)
                gpu = gpu_facts(gpu_name) if gpu_name else None
                weight = src.weight_bytes if src.weight_bytes is not None else inputs.weight_bytes
                self.plans[key] = compile_plan(inputs.arch, inputs.quant, sf, gpu, source=src.label,
                                               weight_bytes=weight, kv_budget_bytes=self.budget, engine=engine)
            except KvplanInputError as e:
                self.plans[key] = e
        return self.plans[key]

    def _inputs(self, src: ModelSource, quantization: str | None, hf_overrides: Any = None) -> ModelInputs:
        key = (str(src.path), quantization, json.dumps(hf_overrides or {}, sort_keys=True))
        if key not in self.inputs:
            try:
                self.inputs[key] = load_model_inputs(src.path, quantization_flag=quantization,
                                                     hf_overrides=hf_overrides)
            except KvplanInputError as e:
                self.inputs[key] = e
        v = self.inputs[key]
        if isinstance(v, KvplanInputError):
            raise v
        return v


_KV_FLAG = ("--kv-cache-dtype",)


def _anchor(code: str, message: str, uses: list[FlagUse], positionals: Sequence[Tok] = ()) -> Tok | None:
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


def _kv(uses: list[FlagUse]) -> Tok | None:
    u = _last(uses, *_KV_FLAG)
    return u.tok if u else None
