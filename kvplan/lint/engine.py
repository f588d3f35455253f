"""One vLLM launch -> findings with positions: flag values, model rules (planner), GPU and parallelism.

Plans are cached per (model config, weight size, flags, GPU, budget) for the whole run, so a
thousand manifests of one model compile one plan.
"""
from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kvplan.backends.capabilities import EngineVersion
from kvplan.backends.engines import resolve_engine
from kvplan.errors import KvplanInputError
from kvplan.ingest.checkpoint import ModelInputs, load_model_inputs
from kvplan.ingest.flags import KNOWN_FLAGS, MODELLED, FlagValueError, parse_flags, scan_argv
from kvplan.lint.config import LoadedConfig, engine_spec
from kvplan.lint.report import LaunchInfo, Location
from kvplan.lint.resolve import ModelSource, gpu_from_label, resolve_model
from kvplan.lint.shell import Tok
from kvplan.lint.sources import RawFinding, Site
from kvplan.model.flags import ServingFlags
from kvplan.model.plan import Plan, Subject
from kvplan.pipeline import DraftPlan, draft_plan_layers, gpu_facts
from kvplan.planner.compile import apply_strict, compile_plan
from kvplan.releases import find_release, option_history, release
from kvplan.rules.base import PLANNER_SCOPES, Emit, Rule, rules_in
from kvplan.rules.context import FlagsOnlyContext
from kvplan.rules.lint_rules import (
    MODELLED_FIRST,
    LaunchFacts,
    image_release,
    modelled_engine,
    newest_engine,
    pinned_version,
)

# Flag rules that need no model: they run even when the model's config is unknown.
MODEL_FREE = ("KV001", "KV002", "KV003", "KV004", "KV006", "KV007", "KV301")

# Findings about the file, the pod or the variables, true whichever vLLM release runs: never upgrade findings.
RELEASE_INDEPENDENT = frozenset({"KV802", "KV804", "KV807", "KV808", "KV809", "KV811", "KV812", "KV813"})

# What makes vLLM's parser exit, and differs between releases (flags come and go, prefixes become ambiguous,
# choices change): in an image whose vLLM release kvplan cannot read, these are warnings, not errors.
RELEASE_DEPENDENT_EXITS = frozenset({"KV001", "KV002", "KV004", "KV006", "KV007"})
# What the release's own parser decides (unknown, ambiguous, rejected values): exact for a pinned release
# kvplan has the option table of, whether or not it plans for it.
PARSER_EXITS = frozenset({"KV001", "KV004", "KV006", "KV007"})

__all__ = ["Linter", "image_release", "index_flags"]  # image_release: kvplan.rules.lint_rules

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


def index_flags(args: Sequence[Tok], version: str | None = None) -> tuple[list[FlagUse], list[Tok]]:
    """Split engine arguments with the release's own option table (None: the default release's), as
    `kvplan.ingest.flags.parse_flags` reads them.

    `flag` is the option a prefix or alias resolved to (`--max-model` -> `--max-model-len`, `-tp` ->
    `--tensor-parallel-size`); unknown and ambiguous flags keep their written form.
    """
    scan = scan_argv([t.value for t in args], version)
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




# Short spellings vLLM accepts for the flags rules name (a use keeps the spelling it resolved to).
_ALIASES = {"--quantization": ("-q",), "--attention-config": ("-ac",), "--tensor-parallel-size": ("-tp",),
            "--pipeline-parallel-size": ("-pp",)}


@dataclass
class Anchors:
    """Maps what a finding is about (its `Subject`, else its rule's `subject_flags`) to a token of the file.

    Nothing here reads a finding's message: positions come from the launch's own tokens."""

    uses: list[FlagUse]
    """The flags the plan was made from."""
    all_uses: list[FlagUse]
    """Every flag as written, those whose value is only known at run time included."""
    positionals: Sequence[Tok]
    facts: dict[str, Tok | None]
    """Tokens of launch facts outside the flags: the container image, the GPU node label."""

    def flag(self, flag: str) -> FlagUse | None:
        return _last(self.uses, flag, *_ALIASES.get(flag, ()))

    def subject(self, s: Subject) -> Tok | None:
        if s.launch_fact is not None:
            return self.facts.get(s.launch_fact)
        if s.argument is not None:  # a stray positional word: its last occurrence
            return next((t for t in reversed(self.positionals) if t.value == s.argument), None)
        if s.flag is None:
            return None
        if s.value is None:  # a flag as written (unknown, ambiguous, rejected): its first use
            want = _norm(s.flag)
            return next((u.tok for u in self.uses if want in (u.written, u.flag)), None)
        hits = [_value_tok(pool, s.flag, s.value) for pool in (self.uses, self.all_uses)]
        return next((hit for hit, _ in hits if hit is not None), None) or next((u.tok for _, u in hits if u), None)

    def token(self, rule: Rule | None, subject: Subject | None, default: Tok) -> Tok:
        """The finding's subject, else the first of its rule's subject flags the launch sets, else `default`."""
        tok = self.subject(subject) if subject is not None else None
        if tok is None and rule is not None:
            tok = next((u.tok for u in map(self.flag, rule.subject_flags) if u is not None), None)
        return tok or default


def _value_tok(uses: list[FlagUse], flag: str, value: str) -> tuple[Tok | None, FlagUse | None]:
    """The token holding `value` in the last use of `flag` that has it (a word of a comma list too), and
    that flag's last use."""
    last = None
    for u in reversed(uses):
        if u.flag != flag:
            continue
        last = last or u
        for v in u.values:
            if v.value == value:
                return v, last
            if value in [p.strip() for p in v.value.split(",")]:
                return v.at(v.value.find(value)), last
    return None, last


@dataclass
class Launch:
    """One launch's arguments, split and filtered for planning."""

    uses: list[FlagUse]
    all_uses: list[FlagUse]
    positionals: list[Tok]
    model_tok: Tok | None
    unknown_model: Tok | None = None
    """The token the served model comes from when it is only known at run time."""
    unresolved: list[tuple[str, str]] = field(default_factory=list)
    """(flag, value) of modelled flags whose value is only known at run time."""


@dataclass
class LaunchResult:
    findings: list[RawFinding]
    info: LaunchInfo


def split_launch(site: Site, version: str | None = None) -> Launch:
    """Split a launch's arguments with release `version`'s option table; drop KServe's own flags and values
    only known at run time (never checked, never shifting the arguments around them)."""
    uses, positionals = index_flags(site.launch.args, version)
    known = release(version).options.by_spelling
    all_uses = list(uses)
    model_tok: Tok | None = site.model_hint
    if site.launch.dialect == "kserve-hf":
        kept = []
        for u in uses:
            raw = u.tok.value.split("=")[0]
            if raw not in KSERVE_HF_FLAGS:
                kept.append(u)
                continue
            if raw == "--model_id" and u.values:
                model_tok = u.values[0]
            if not KSERVE_HF_FLAGS[raw] and u.values and not u.inline:  # booleans take no value
                positionals += u.values
        uses = kept
    launch = Launch(uses=[], all_uses=all_uses, positionals=positionals, model_tok=model_tok)
    for u in uses:
        if u.tok.unknown and "$" in u.tok.value.split("=", 1)[0]:
            continue  # the flag's own name is a variable
        bad = next((v for v in u.values if v.unknown), None)
        # (an unknown or ambiguous flag is wrong whatever its value: it stays, and vLLM exits on it)
        if bad is not None and (u.flag in known or u.flag == "--model"):
            if u.flag == "--model":
                launch.unknown_model = bad
            elif u.flag in MODELLED:
                launch.unresolved.append((u.flag, bad.value))
            continue
        launch.uses.append(u)
    if positionals and positionals[0].unknown:
        launch.unknown_model = launch.unknown_model or positionals[0]
        launch.positionals = []
    elif any(p.unknown for p in positionals[1:]):
        # A word only known at run time ($EXTRA_ARGS, "$@") may expand to any flags, taking the words after
        # it as their values: then no word past the model is a stray argument vLLM would reject.
        launch.positionals = positionals[:1]
    return launch


def _drop_consequences(out: list[RawFinding]) -> list[RawFinding]:
    """Consequences of problems already reported: a flag and value in one argv entry (KV809) is not also an
    unknown flag, and a skip list is not "without quantization" when the dtype given was invalid."""
    bad_dtype = any(f.code == "KV803" and f.subject is not None and f.subject.flag == "--kv-cache-dtype"
                    and f.subject.value is not None for f in out)
    return [f for f in out
            if not (f.code == "KV001" and f.subject is not None and len((f.subject.flag or "").split()) > 1)
            and not (bad_dtype and f.code in ("KV305", "KV306"))]


class Linter:
    """Checks launches; holds the per-run caches."""

    def __init__(self, cfg: LoadedConfig, default_gpu: str | None):
        self.cfg = cfg
        self.default_gpu = default_gpu
        self.plans: dict[tuple[Any, ...], Plan | KvplanInputError] = {}
        self.inputs: dict[tuple[str, str | None, str, str | None], ModelInputs | KvplanInputError] = {}
        self.budget = int(cfg.config.kv_budget_gib * 2**30) if cfg.config.kv_budget_gib is not None else None
        self.newest = newest_engine()  # what :latest and upgrades mean
        # engine-version may name a release older than the plans go (launch lines judged by its own parser,
        # plan findings as upgrade findings, as for a pinned image of that release)
        self.configured_old: str | None = None
        configured = release(EngineVersion.parse(engine_spec(cfg.config.engine_version)).version)
        if configured.version_tuple < MODELLED_FIRST:
            self.engine, self.configured_old = self.newest, configured.version
        else:
            self.engine = resolve_engine(engine_spec(cfg.config.engine_version))
        rules = rules_in(*PLANNER_SCOPES)
        self.rules = {r.code: r for r in rules}
        self.launch_rules = rules_in("flags", "launch")  # bodies read LaunchFacts (kvplan.rules.lint_rules)
        self.model_rules = sorted(r.code for r in rules if r.kind == "check" and r.code not in MODEL_FREE)

    # ------------------------------------------------------------------ which vLLM
    def release_unknown(self, site: Site) -> bool:
        """The launch runs in an image whose tag names no vLLM release (a vendor's `pytorch-vllm-serve:DATE`,
        `lmcache/vllm-openai:DATE`, your own build) and the configuration does not say which release it is."""
        return (site.image is not None and image_release(site.image.value) is None
                and "engine_version" not in self.cfg.config.model_fields_set)

    def engine_for(self, site: Site) -> tuple[EngineVersion, str | None]:
        """The release to lint a launch against, and the pinned release when it is one kvplan does not model
        and older than those it does (its findings become upgrade findings). KV812/KV813 say so."""
        v = pinned_version(site.image.value) if site.image is not None else None
        if site.image is None or image_release(site.image.value) is None:
            return self.engine, self.configured_old
        if v is None:  # an unpinned vLLM image: the newest modelled release
            return self.newest, None
        modelled = modelled_engine(v)
        if modelled is not None:
            return modelled, None
        older = tuple(int(x) for x in v.split(".")) < MODELLED_FIRST
        return self.newest, (v if older else None)

    def flags_release(self, site: Site, engine: EngineVersion) -> str:
        """The release whose own parser judges the launch line: the image's pinned release whenever kvplan has
        its option table (0.6 on, older than the plans go too), else the release linted against."""
        v = pinned_version(site.image.value) if site.image is not None else None
        rel = find_release(v) if v is not None else None
        if rel is not None:
            return rel.version
        if self.configured_old is not None and (site.image is None or image_release(site.image.value) is None):
            return self.configured_old
        return release(engine.version_str).version

    def release_unset(self, site: Site) -> bool:
        """Nothing says which vLLM release runs the launch: no image, no engine-version setting."""
        return "engine_version" not in self.cfg.config.model_fields_set and site.image is None

    # ------------------------------------------------------------------ one launch
    def lint_site(self, site: Site, file: Any, display: str) -> LaunchResult:
        engine, pinned_old = self.engine_for(site)
        flags_release = self.flags_release(site, engine)
        out = self._kwarg_findings(site, engine)
        launch = split_launch(site, flags_release)
        sf = self._parse(launch.uses, launch.positionals, out, site.launch.args, flags_release)
        model, model_tok = self._served_model(sf, launch)
        gpu_named = gpu_from_label(site.gpu_label.value.strip().lower()) if site.gpu_label is not None else None
        gpu_name = gpu_named or self.default_gpu  # GPU: node selector label, else the run's default
        anchors = Anchors(launch.uses, launch.all_uses, launch.positionals,
                          {"image": site.image, "gpu_label": site.gpu_label})
        facts = LaunchFacts(flags=sf, image=site.image.value if site.image else None,
                            gpu_label=site.gpu_label.value if site.gpu_label else None, gpu_from_label=gpu_named,
                            default_gpu=self.default_gpu, gpu_count=site.gpu_count, group_size=site.group_size,
                            unresolved=tuple(launch.unresolved))
        for r in self.launch_rules:
            out += [RawFinding(r.code, em.message, anchors.token(r, em.subject, site.anchor), fix=em.fix,
                               subject=em.subject) for em in r.fn(facts)]
        src = self._model_source(model, model_tok, launch, site, file, sf, out)
        default = model_tok or site.anchor
        if src is None:
            out += self._model_free_findings(sf, engine, anchors, default, model)
        else:
            out += self._plan_findings(src, sf, gpu_name, engine, anchors, default, model, file)
        out = self._for_release(_drop_consequences(out), site, pinned_old, engine, flags_release)
        return LaunchResult(out, self._info(site, display, model, launch, src, gpu_name, engine, pinned_old))

    def _kwarg_findings(self, site: Site, engine: EngineVersion) -> list[RawFinding]:
        """Ray Serve LLM engine_kwargs: AsyncEngineArgs(**kwargs) takes exact names (KV001)."""
        out = []
        names = sorted(s[2:].replace("-", "_") for s in KNOWN_FLAGS if s.startswith("--") and not s.startswith("--no-"))
        for t in site.unknown_kwargs:
            close = difflib.get_close_matches(t.value, names, n=1)
            out.append(RawFinding(
                "KV001", f"engine_kwargs key {t.value!r} is not a vLLM {engine.version_str} engine argument: the "
                         f"replica fails with \"unexpected keyword argument '{t.value}'\""
                         + (f"; did you mean {close[0]}?" if close else "."), t,
                fix=(f"Rename it to {close[0]}" if close else "Remove it") + " (engine_kwargs keys are vLLM's "
                    "engine arguments, `vllm serve` flags with underscores, matched exactly)."))
        return out

    @staticmethod
    def _served_model(sf: ServingFlags, launch: Launch) -> tuple[str | None, Tok | None]:
        """The served model as written and its token."""
        model_tok = launch.model_tok
        if sf.model is None:
            return (model_tok.value if model_tok is not None else None), model_tok
        use = _last(launch.uses, "--model")
        if use and use.values:
            return sf.model, use.values[0]
        return sf.model, next((p for p in launch.positionals if p.value == sf.model), model_tok)

    def _model_source(self, model: str | None, model_tok: Tok | None, launch: Launch, site: Site, file: Any,
                      sf: ServingFlags, out: list[RawFinding]) -> ModelSource | None:
        """Where the model's config.json is; None after a KV804 (or for a patch that names no model)."""
        anchor, n = model_tok or site.anchor, len(self.model_rules)
        skipped = tuple(self.model_rules)
        if model is not None:
            try:
                src = resolve_model(model, file, self.cfg, revision=sf.revision)
            except KvplanInputError as e:
                fix = (f"{e.fix.rstrip('.')}; or map it in pyproject.toml: [tool.kvplan.lint.models] "
                       f'"{model}" = "path/to/config.json".') if e.fix else None
                why = e.problem.rstrip(".")
                why += (f" ({n} rules)." if "skipped" in why else
                        f"; {n} rules that need the model's config.json were skipped.")
                out.append(RawFinding("KV804", why, anchor, fix=fix, model=model, skipped_rules=skipped))
                return None  # reported; the model-free rules still run
            if src is not None:
                return src
        elif site.partial and launch.unknown_model is None:
            return None  # a patch or values entry: the model is set where the rest of the launch is
        if launch.unknown_model is not None:
            out.append(RawFinding(
                "KV804", f"the served model comes from {launch.unknown_model.value}, which is only known at run "
                         f"time; {n} rules that need the model's config.json were skipped.", launch.unknown_model,
                fix="Give the variable a literal value in the same file (env value), or lint the rendered "
                    "manifest; map the model in [tool.kvplan.lint.models] to check it.", skipped_rules=skipped))
        elif model:
            out.append(RawFinding(
                "KV804", f"model {model!r} has no config.json kvplan can find; {n} rules that need it were "
                         "skipped.", anchor, model=model,
                fix=f'Map it in pyproject.toml: [tool.kvplan.lint.models] "{model}" = "path/to/config.json" '
                    "(or a checkpoint folder); `kvplan lint --list-models` lists the bundled ids.",
                skipped_rules=skipped))
        else:
            out.append(RawFinding(
                "KV804", f"the launch names no model (vLLM would serve its default); {n} rules that need the "
                         "model's config.json were skipped.", site.anchor,
                fix="Pass the model (vllm serve MODEL or --model MODEL).", skipped_rules=skipped))
        return None

    def _model_free_findings(self, sf: ServingFlags, engine: EngineVersion, anchors: Anchors, default: Tok,
                             model: str | None) -> list[RawFinding]:
        """The flag rules that need no model, for a launch whose model config is unknown."""
        ctx = FlagsOnlyContext(flags=sf, engine=engine)
        out = []
        for code in MODEL_FREE:
            r = self.rules[code]
            if engine.satisfies(r.versions):
                out += [self._raw(r, em, anchors, default, model) for em in r.fn(ctx)]
        return out

    def _plan_findings(self, src: ModelSource, sf: ServingFlags, gpu_name: str | None, engine: EngineVersion,
                       anchors: Anchors, default: Tok, model: str | None, file: Any = None) -> list[RawFinding]:
        draft = self._draft(src, sf, gpu_name, engine, file)
        out = []
        if isinstance(draft, KvplanInputError):  # the target is still planned, without the draft's caches
            use = anchors.flag("--speculative-config")
            out.append(RawFinding("KV804", f"{draft.problem.rstrip('.')}; the draft's KV cache is not counted "
                                  "in the capacity findings.", use.tok if use is not None else default,
                                  fix=draft.fix, model=sf.speculative_model))
            draft = None
        plan = self._plan(src, sf, gpu_name, engine, draft)
        if isinstance(plan, KvplanInputError):
            return [RawFinding("KV804", f"the config for model {model!r} ({src.label}) cannot be read: {plan}",
                               default, model=model, skipped_rules=tuple(self.model_rules))]
        if self.cfg.strict:  # KV604 (unverified architecture, unused geometry keys) is an error
            plan = apply_strict(plan)
        return out + [RawFinding(f.code, f.message, anchors.token(self.rules.get(f.code), f.subject, default),
                                 fix=f.fix, model=model, layers=tuple(f.layers), severity=f.severity.value,
                                 subject=f.subject) for f in plan.findings]

    def _draft(self, src: ModelSource, sf: ServingFlags, gpu_name: str | None, engine: EngineVersion,
               file: Any) -> DraftPlan | KvplanInputError | None:
        """The draft model's layers --speculative-config names (an EAGLE head or draft model: its config found
        as the served model's is, the deployment's model map and the Hub included), as plan/explain plan them;
        the reason where its config cannot be read; None without a draft model (or the target unreadable)."""
        release = engine.version_str if engine.engine == "vllm" else None
        try:
            inputs = self._inputs(src, sf.quantization, sf.hf_overrides, release)
        except KvplanInputError:
            return None  # the target's own KV804 says it

        def load(model: str, dflags: ServingFlags) -> ModelInputs:
            found = resolve_model(model, file, self.cfg)
            if found is None:
                raise KvplanInputError(f"model {model!r} has no config.json kvplan can find",
                                       f'Map it in pyproject.toml: [tool.kvplan.lint.models] "{model}" = '
                                       '"path/to/config.json" (or a checkpoint folder).')
            got = self._inputs(found, None, None, release)
            return got if found.weight_bytes is None else replace(got, weight_bytes=found.weight_bytes)

        try:
            return draft_plan_layers(inputs, sf, gpu_facts(gpu_name) if gpu_name else None, engine, load)
        except KvplanInputError as e:
            return e

    def _raw(self, r: Rule, em: Emit, anchors: Anchors, default: Tok, model: str | None) -> RawFinding:
        return RawFinding(r.code, em.message, anchors.token(r, em.subject, default), fix=em.fix or r.fix,
                          model=model, subject=em.subject)

    def _for_release(self, out: list[RawFinding], site: Site, pinned_old: str | None,
                     engine: EngineVersion, flags_release: str) -> list[RawFinding]:
        """Findings of a launch whose image runs another vLLM release than the one linted against."""
        if pinned_old is not None:  # what the modelled release would reject: upgrade findings, not errors today
            # (the launch line itself was judged by the pinned release's own parser: those findings stand)
            pinned = find_release(pinned_old)
            exact = PARSER_EXITS if pinned is not None and pinned.version == flags_release else frozenset()
            return [f if f.code in RELEASE_INDEPENDENT or f.code in exact else replace(
                f, message=f"on upgrade from vLLM {pinned_old} to {engine.version_str}: {f.message}",
                severity="info", upgrade=engine.version_str) for f in out]
        if not (self.release_unknown(site) and site.image is not None):
            return self._other_releases_accept(out, site) if self.release_unset(site) else out
        # The parser that runs is the image's, whose release is unknown: a flag vLLM 0.33 rejects may be one
        # that release accepts (--swap-space in older releases). A warning, not an error that fails CI on a pod
        # that starts; set engine-version (or pin a vllm/vllm-openai:vX.Y.Z image) to make it an error again.
        img = site.image.value
        return [replace(
            f, severity="warning",
            message=f"image {img} does not name its vLLM release (linted against vLLM {engine.version_str}, "
                    f"the default engine-version): {f.message}",
            fix=(f"{f.fix.rstrip('.')}; " if f.fix else "")
                + "if the image runs an older vLLM that accepts it, set engine-version in the kvplan "
                  "configuration to that release (findings are then errors or pass)."
        ) if f.code in RELEASE_DEPENDENT_EXITS and (f.severity or self._sev(f.code)) == "error" else f
            for f in out]

    def _other_releases_accept(self, out: list[RawFinding], site: Site) -> list[RawFinding]:
        """No release named: an unknown flag that another known vLLM release accepts is a warning (the launch
        starts on that release), worded with the releases that accept it; a flag no release has stays an error."""
        kept = []
        for f in out:
            flag = f.subject.flag if f.subject is not None else None
            hist = option_history(flag) if f.code in ("KV001", "KV004") and flag else None
            if hist is None or (f.severity or self._sev(f.code)) != "error":
                kept.append(f)
                continue
            runs = ", ".join(a if a == b else f"{a} to {b}" for a, b in hist.accepted)
            kept.append(replace(
                f, severity="warning",
                message=f"{f.message.rstrip('.')}; no release is set (linted against vLLM {self.engine.version_str}, "
                        f"the default), and vLLM {runs} accept {flag}.",
                fix=(f"{f.fix.rstrip('.')}; " if f.fix else "") + "if the launch runs one of those releases, set "
                    "engine-version in the kvplan configuration (or pin a vllm/vllm-openai:vX.Y.Z image) to make "
                    "the finding exact."))
        return kept

    def _info(self, site: Site, display: str, model: str | None, launch: Launch, src: ModelSource | None,
              gpu_name: str | None, engine: EngineVersion, pinned_old: str | None) -> LaunchInfo:
        anchor = site.anchor
        image = site.image.value if site.image else None
        if model is None and launch.unknown_model is not None:
            model = launch.unknown_model.value
        return LaunchInfo(location=Location(path=display, line=anchor.line, column=anchor.col,
                                            yaml_path=anchor.yaml_path),
                          model=model,
                          config=src.label if src else None, gpu=gpu_name,
                          gpu_count=(site.gpu_count * site.group_size) if site.gpu_count is not None else None,
                          image=image, engine=engine.version_str,
                          pinned=pinned_old or (None if image is None or image_release(image) is None
                                                else pinned_version(image)))

    def _sev(self, code: str) -> str:
        r = self.rules.get(code)
        return r.severity.value if r else "warning"

    # ------------------------------------------------------------------ flags
    def _parse(self, uses: list[FlagUse], positionals: list[Tok], out: list[RawFinding],
               order: Sequence[Tok] = (), version: str | None = None) -> ServingFlags:
        """ServingFlags of the launch; each value vLLM rejects is a KV803 at its token, and planning goes on
        without that flag."""
        for _ in range(len(uses) + 1):
            try:
                return parse_flags(_argv(uses, positionals, order), version)
            except FlagValueError as e:
                use = _last(uses, e.flag, *_ALIASES.get(e.flag, ()))
                if use is None:  # spelled with underscores or a short alias
                    field_ = MODELLED.get(e.flag, ("",))[0]
                    use = next((u for u in reversed(uses) if MODELLED.get(u.flag, ("?",))[0] == field_), None)
                if use is None:
                    out.append(RawFinding("KV803", e.problem, positionals[0] if positionals else Tok("", 1, 1),
                                          fix=e.fix, subject=Subject(flag=e.flag, value=e.value)))
                    return ServingFlags()
                out.append(RawFinding("KV803", e.problem, use.values[0] if use.values else use.tok, fix=e.fix,
                                      subject=Subject(flag=use.flag, value=e.value)))
                uses.remove(use)
            except KvplanInputError as e:  # a value no one flag owns (pydantic limits): at the model
                out.append(RawFinding("KV803", e.problem, positionals[0] if positionals else Tok("", 1, 1), fix=e.fix))
                return ServingFlags()
        return ServingFlags()

    # ------------------------------------------------------------------ plans
    def _plan(self, src: ModelSource, sf: ServingFlags, gpu_name: str | None,
              engine: EngineVersion | None = None, draft: DraftPlan | None = None) -> Plan | KvplanInputError:
        engine = engine or self.engine
        key = (str(src.path), src.weight_bytes, sf.model_dump_json(exclude={"model"}), gpu_name, self.budget,
               engine.version_str, draft is not None)
        if key not in self.plans:
            try:
                inputs = self._inputs(src, sf.quantization, sf.hf_overrides,
                                     engine.version_str if engine.engine == "vllm" else None)
                gpu = gpu_facts(gpu_name) if gpu_name else None
                weight = src.weight_bytes if src.weight_bytes is not None else inputs.weight_bytes
                self.plans[key] = compile_plan(inputs.arch, inputs.quant, sf, gpu, source=src.label,
                                               weight_bytes=weight, kv_budget_bytes=self.budget, engine=engine,
                                               draft=draft.layers if draft is not None else None,
                                               draft_weight_bytes=draft.weight_bytes if draft is not None else None)
            except KvplanInputError as e:
                self.plans[key] = e
        return self.plans[key]

    def _inputs(self, src: ModelSource, quantization: str | None, hf_overrides: Any = None,
                release: str | None = None) -> ModelInputs:
        key = (str(src.path), quantization, json.dumps(hf_overrides or {}, sort_keys=True), release)
        if key not in self.inputs:
            try:
                self.inputs[key] = load_model_inputs(src.path, quantization_flag=quantization,
                                                     hf_overrides=hf_overrides, release=release)
            except KvplanInputError as e:
                self.inputs[key] = e
        v = self.inputs[key]
        if isinstance(v, KvplanInputError):
            raise v
        return v
