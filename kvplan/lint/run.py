"""`kvplan lint` as a library call: walk paths, extract launches, check them, filter, suppress, report."""
from __future__ import annotations

import contextlib
import contextvars
import difflib
import fnmatch
import os
import re
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from kvplan import __version__
from kvplan.backends.capabilities import EngineVersion
from kvplan.errors import KvplanInputError
from kvplan.ingest.limits import InputLimitError, TimeBudgetExceeded, check_text, limits, read_bounded, time_budget
from kvplan.lint.config import LoadedConfig, engine_spec, find_config, load_config
from kvplan.lint.configs import attach_vllm_configs
from kvplan.lint.engine import Linter
from kvplan.lint.report import (
    FileResult,
    LaunchInfo,
    LintFinding,
    LintReport,
    Location,
    Settings,
    Summary,
    Suppressed,
)
from kvplan.lint.resolve import gpu_from_label, prefetch_hub_models
from kvplan.lint.shell import Tok
from kvplan.lint.sources import Extracted, RawFinding, extract_dockerfile, extract_text, extract_yaml, is_dockerfile
from kvplan.lint.suppress import Suppression, check_suppression, from_annotations, from_comments
from kvplan.model.plan import EngineRef
from kvplan.model.vocab import Severity
from kvplan.planner.context import ENGINE_NAME, ENGINE_VERSION
from kvplan.rules.base import LINT_SCOPES, PLANNER_SCOPES, rules_in

YAML_SUFFIXES = (".yaml", ".yml")
TEXT_SUFFIXES = (".sh", ".bash", ".zsh", ".txt", ".cmd", ".env")
SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache",
             ".ruff_cache", ".pytest_cache"}


@dataclass(frozen=True)
class _Candidate:
    path: Path
    display: str
    explicit: bool


def _display(p: Path, cwd: Path) -> str:
    try:
        return p.resolve().relative_to(cwd.resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def _matches(codes: Sequence[str], code: str) -> bool:
    return any(code.startswith(c.strip().upper()) for c in codes if c.strip())


def _excluded(p: Path, cfg: LoadedConfig) -> bool:
    if not cfg.config.exclude:
        return False
    try:
        rel = p.resolve().relative_to(cfg.root.resolve()).as_posix()
    except ValueError:
        rel = p.as_posix()
    return any(fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(p.name, pat) for pat in cfg.config.exclude)


class _Scope:
    """Settings for the files under one configuration file (CLI options applied on top)."""

    def __init__(self, cfg: LoadedConfig, gpu: str | None, select: Sequence[str] | None, ignore: Sequence[str],
                 plan_cache: dict, input_cache: dict):
        c = cfg.config
        self.cfg = cfg
        self.default_gpu = gpu or c.gpu
        if self.default_gpu:
            try:
                from kvplan.backends.gpus import resolve_gpu
                self.default_gpu = resolve_gpu(self.default_gpu).name
            except ImportError:  # pragma: no cover - GPU table not available
                self.default_gpu = None
        self.select = list(select) if select is not None else list(c.select)
        self.ignore = list(c.ignore) + list(ignore)
        for code in [*self.select, *self.ignore]:
            if not code.strip().upper().startswith("KV"):
                raise KvplanInputError(f"select/ignore value {code!r} in {cfg.path} is not a code prefix.",
                                       "Use codes like KV401 or prefixes like KV4.")
        self.linter = Linter(cfg, self.default_gpu)
        self.linter.plans, self.linter.inputs = plan_cache, input_cache  # shared across configurations
        self.root = cfg.root.resolve()
        self._rel: dict[str, str] = {}

    def enabled(self, code: str) -> bool:
        if self.select and not _matches(self.select, code):
            return False
        return not _matches(self.ignore, code)

    def per_file(self, code: str, path: Path | None, display: str) -> bool:
        pfi = self.cfg.config.per_file_ignores
        if not pfi:
            return False
        rel = self._rel.get(display)
        if rel is None:
            rel = display
            if path is not None:
                with contextlib.suppress(ValueError):
                    rel = path.resolve().relative_to(self.root).as_posix()
            self._rel[display] = rel
        return any(_matches(codes, code) and (fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(display, pat))
                   for pat, codes in pfi.items())


def _walk(paths: Sequence[str], cwd: Path, cfg: LoadedConfig, missing: list[tuple[str, str]],
          scope_for: Callable[[Path | None], _Scope]) -> list[_Candidate]:
    seen: set[str] = set()
    out: list[_Candidate] = []
    for raw in paths:
        p = Path(raw)
        if not p.is_absolute():
            p = cwd / p
        if not p.exists():
            missing.append((raw, "path not found"))
            continue
        if p.is_dir():
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")
                                 and not _excluded(Path(root) / d, scope_for(Path(root) / d / "_").cfg))
                base = _display(Path(root), cwd)
                for name in sorted(files):
                    fp = Path(root) / name
                    key = os.path.abspath(fp)
                    if key in seen or _excluded(fp, scope_for(fp).cfg):
                        continue
                    seen.add(key)
                    out.append(_Candidate(fp, f"{base}/{name}" if base != "." else name, explicit=False))
        elif os.path.abspath(p) not in seen:
            seen.add(os.path.abspath(p))
            out.append(_Candidate(p, _display(p, cwd), explicit=True))
    return out


def _read(c: _Candidate) -> tuple[str | None, str | None, bool]:
    """(text, problem, is_finding): problem set when unreadable; is_finding when it must be reported."""
    deploy_like = c.path.suffix.lower() in YAML_SUFFIXES + TEXT_SUFFIXES
    try:
        data = read_bounded(c.path, "file", limits().max_lint_file_bytes, c.display)  # InputLimitError: KV820
    except OSError as e:
        return None, f"cannot read {c.display}: {e.strerror or e}.", True
    if b"\0" in data[:8192]:
        return None, f"{c.display} is a binary file, not a deployment config.", c.explicit or deploy_like
    try:
        return data.decode("utf-8-sig"), None, False
    except UnicodeDecodeError as e:
        return None, f"{c.display} is not UTF-8 text (byte {e.start}).", c.explicit or deploy_like


_HELM_SYNTAX = re.compile(
    r"\{\{-?\s*(?:\.Values|\.Release|\.Chart|include\b|template\b|toYaml\b|if\b|with\b|range\b|end\b|/\*)")


def _chart_root(path: Path) -> Path | None:
    """The Helm chart a template file belongs to (the nearest folder above with a Chart.yaml)."""
    for parent in list(path.parents)[:4]:
        if (parent / "Chart.yaml").is_file():
            return parent
    return None


def _render_chart(root: Path, cache: dict[Path, tuple[dict[str, str] | None, str]],
                  shown: str) -> tuple[dict[str, str] | None, str]:
    """`helm template` of a chart: ({template path relative to the chart: rendered YAML}, note)."""
    if root in cache:
        return cache[root]
    helm = shutil.which("helm")
    if helm is None:
        result: tuple[dict[str, str] | None, str] = (None, (
            f"Helm chart {shown}: its templates need rendering and `helm` is not on PATH; lint the output "
            f"of `helm template release {shown}` instead (launches in its values files are linted)."))
    else:
        try:
            proc = subprocess.run([helm, "template", "kvplan-lint", str(root)], capture_output=True, text=True,
                                  timeout=120, check=False)
        except (OSError, subprocess.SubprocessError) as e:
            proc = None
            err = str(e)
        if proc is None or proc.returncode != 0:
            first = (err if proc is None else (proc.stderr.strip().splitlines() or ["failed"])[0])
            result = (None, f"Helm chart {shown}: `helm template` failed ({first}); its templates were not linted.")
        else:
            docs: dict[str, str] = {}
            for part in re.split(r"(?m)^---\s*$", proc.stdout):
                m = re.search(r"(?m)^# Source: [^/\n]+/(.+?)\s*$", part)
                if m:
                    docs[m.group(1)] = docs.get(m.group(1), "") + "---\n" + part
            result = (docs, (f"Helm chart {shown}: rendered with `helm template` (default values); findings "
                             "on literal template lines point at the template, findings in text a template "
                             "action produced at the rendered output (marked rendered)."))
    cache[root] = result
    return result


def _prerender(c: _Candidate, charts: dict | None) -> None:
    """Render the chart of a template file (when it is one) into the run's chart cache."""
    if charts is None or c.path.suffix.lower() not in YAML_SUFFIXES:
        return
    root = _chart_root(c.path)
    if root is None or root in charts:
        return
    try:
        rel = c.path.resolve().relative_to(root.resolve())
        if "templates" not in rel.parts or c.path.stat().st_size > limits().max_lint_file_bytes:
            return
        text = c.path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError, ValueError):
        return  # the file's own read reports it
    if "{{" in text and _HELM_SYNTAX.search(text):
        shown = c.display[:-len(rel.as_posix())].rstrip("/") if c.display.endswith(rel.as_posix()) else root.as_posix()
        _render_chart(root, charts, shown or ".")


# Helm charts rendered during one lint_paths() call (chart root -> rendered templates, note).
_CHARTS: contextvars.ContextVar[dict | None] = contextvars.ContextVar("kvplan_lint_charts", default=None)


def _extract(c: _Candidate, text: str) -> tuple[Extracted | None, str | None]:
    """Extracted launches, or (None, note) when the file is not a deployment config."""
    charts = _CHARTS.get()
    suffix = c.path.suffix.lower()
    if suffix in (*YAML_SUFFIXES, ".tpl") and "{{" in text and _HELM_SYNTAX.search(text):
        root = _chart_root(c.path)
        if root is None or suffix == ".tpl" or "templates" not in c.path.resolve().relative_to(root.resolve()).parts:
            # Go template actions inside values (a controller fills them in) parse as YAML and are
            # unknown values; a file that is not YAML until rendered gets a note, not a parse error.
            ex = extract_yaml(text) if suffix != ".tpl" else None
            if ex is not None and not any(f.code == "KV801" for f in ex.findings):
                return ex, None
            return Extracted(kind="helm-template", note=(
                "Helm/Go template syntax ({{ }}) that is not YAML until rendered: render it first "
                "(`helm template`) and lint the output")), None
        rel = c.path.resolve().relative_to(root.resolve()).as_posix()
        shown = c.display[:-len(rel)].rstrip("/") if c.display.endswith(rel) else root.as_posix()
        docs, note = _render_chart(root, charts if charts is not None else {}, shown or ".")
        if docs is None:
            return Extracted(kind="helm-template", note=note), None
        if rel not in docs:
            return Extracted(kind="helm-template",
                             note=f"{note} (this template renders nothing with default values)"), None
        ex = extract_yaml(docs[rel])
        ex.kind = "helm-template"
        ex.note = note
        ex.line_map = template_line_map(text, docs[rel])
        return ex, None
    if suffix in YAML_SUFFIXES:
        return extract_yaml(text, c.path), None
    if suffix != ".json" and is_dockerfile(text):  # Dockerfile, Dockerfile.h100, vllm.Dockerfile, ...
        return extract_dockerfile(text), None
    if suffix == ".json":
        if '"apiVersion"' in text or '"services"' in text:
            return extract_yaml(text, c.path), None
        return None, "JSON file that is not a Kubernetes manifest or compose file (model configs are not linted)"
    if suffix in TEXT_SUFFIXES or not suffix or text.startswith("#!") or c.explicit:
        check_text(text, c.display)  # line and word limits: InputLimitError (KV820)
        ex = extract_text(text)
        if ex.sites or ex.findings or suffix in TEXT_SUFFIXES or c.explicit:
            return ex, None
        return None, "no vLLM launch in this file"
    return None, f"not a deployment config ({suffix})"


Prepared = tuple[str | None, str | None, bool, Extracted | None, str | None]
"""One file read and extracted: (text, problem, is_finding, extracted, note)."""
Outcome = tuple[FileResult, list[RawFinding], list[Suppression]]
"""One file linted: its result, its raw findings and its suppressions (nothing is recorded before)."""


def lint_paths(paths: Sequence[str], *, select: Sequence[str] | None = None, ignore: Sequence[str] = (),
               gpu: str | None = None, config: Path | None = None, fail_level: str | None = None,
               cwd: Path | None = None, isolated: bool = False,
               on_file: Callable[[str], None] | None = None, file_timeout: float | None = None,
               offline: bool = False, strict: bool = False) -> LintReport:
    """Lint deployment files and folders. Input errors (bad config, unknown --gpu) raise KvplanInputError.

    `file_timeout`: seconds one file may take (default: the configuration's `file-timeout`, 5 s;
    0 = none); a file over it, or over a size/alias limit, is a finding and the next file goes on.
    `offline` turns Hugging Face id resolution off (as `hub = false` does); launches naming an id
    then get KV804 saying so. `strict` makes KV604 (an architecture not verified against vLLM, or
    geometry keys not used) an error, as `strict = true` in a configuration does."""
    cwd = cwd or Path.cwd()
    if not paths:
        raise KvplanInputError("no path to lint.", "Pass files or folders, e.g. `kvplan lint deploy/`.")
    for code in [*(select or ()), *ignore]:
        if not code.strip().upper().startswith("KV"):
            raise KvplanInputError(f"--select/--ignore value {code!r} is not a code prefix.",
                                   "Use codes like KV401 or prefixes like KV4.")
    run = _Run(paths, cwd, select=select, ignore=ignore, gpu=gpu, config=config, isolated=isolated,
               file_timeout=file_timeout, offline=offline, strict=strict)
    charts_token = _CHARTS.set({})  # `helm template` once per chart in this run
    try:
        run.lint_all(on_file)
    finally:
        _CHARTS.reset(charts_token)
    return run.report(fail_level)


class _Run:
    """One `lint_paths` call: the configurations in play, the files, and what was reported."""

    def __init__(self, paths: Sequence[str], cwd: Path, *, select: Sequence[str] | None, ignore: Sequence[str],
                 gpu: str | None, config: Path | None, isolated: bool, file_timeout: float | None,
                 offline: bool, strict: bool):
        self.cwd, self.select, self.ignore, self.gpu = cwd, select, ignore, gpu
        self.file_timeout, self.offline, self.strict = file_timeout, offline, strict
        # One configuration for the run (--config, --isolated), else the nearest one above each file (like ruff).
        self.fixed: LoadedConfig | None = (load_config(None) if isolated else
                                           (load_config(config) if config is not None else None))
        first = Path(paths[0]) if Path(paths[0]).is_absolute() else cwd / paths[0]
        self.base_cfg = self.fixed or load_config(find_config(first if first.exists() else cwd))
        self.configs: dict[Path | None, _Scope] = {}
        self.dir_cfg: dict[str, _Scope] = {}
        self.plan_cache: dict = {}
        self.input_cache: dict = {}
        self.base = self.scope_of(self.base_cfg)
        # the codes `kvplan lint` reports (a suppression naming another is KV810)
        self.declared = {r.code: r for r in rules_in(*PLANNER_SCOPES, *LINT_SCOPES)}
        self.missing: list[tuple[str, str]] = []
        self.candidates = _walk(paths, cwd, self.base_cfg, self.missing, self.scope_for)
        self.files: list[FileResult] = []
        self.reported: list[LintFinding] = []
        self.suppressed: list[Suppressed] = []

    # ------------------------------------------------------------------ configurations
    def scope_of(self, loaded: LoadedConfig) -> _Scope:
        loaded.offline = self.offline
        loaded.strict = loaded.strict or self.strict
        if loaded.path not in self.configs:
            self.configs[loaded.path] = _Scope(loaded, self.gpu, self.select, self.ignore, self.plan_cache,
                                               self.input_cache)
        return self.configs[loaded.path]

    def scope_for(self, path: Path | None) -> _Scope:
        if self.fixed is not None or path is None:
            return self.base
        d = os.path.dirname(os.path.abspath(path))
        if d not in self.dir_cfg:
            found = find_config(Path(d))
            self.dir_cfg[d] = self.base if found == self.base_cfg.path else self.scope_of(load_config(found))
        return self.dir_cfg[d]

    def budget_of(self, cand: _Candidate) -> float:
        return self.file_timeout if self.file_timeout is not None else self.scope_for(cand.path).cfg.config.file_timeout

    # ------------------------------------------------------------------ the files
    def lint_all(self, on_file: Callable[[str], None] | None) -> None:
        for raw, problem in self.missing:
            disp = Path(raw).as_posix()
            self.files.append(FileResult(path=disp, kind="unknown", status="error", note=problem))
            self.finish(disp, None, [RawFinding("KV800", f"cannot lint {disp}: {problem}.", Tok("", 1, 1))], [])
        # Helm charts with templates are rendered first, once each, outside the files' time budgets (`helm
        # template` has its own time limit): a slow helm is not a file taking too long.
        for cand in self.candidates:
            _prerender(cand, _CHARTS.get())
        # Pass 1: read and extract every file (each under its time budget).
        staged: list[tuple[_Candidate, Prepared | None, Outcome | None, float]] = []
        for cand in self.candidates:
            t0 = time.monotonic()
            value, failed = self.guarded(cand, self.budget_of(cand), lambda c=cand: _prepare(c))  # type: ignore[misc]
            staged.append((cand, value, failed, time.monotonic() - t0))  # type: ignore[arg-type]
        # vLLM --config files passed by a launch in the run become part of that launch.
        attach_vllm_configs([(c.path, c.display, p[3]) for c, p, _, _ in staged if p is not None and p[3] is not None])
        # The Hugging Face ids the launches name: resolved together, concurrently, outside the files' budgets.
        prefetch_hub_models([(c.path, self.scope_for(c.path).cfg, site) for c, p, _, _ in staged
                             if p is not None and p[3] is not None for site in p[3].sites])
        # Pass 2: lint (each file gets what is left of its budget). Findings on a --config file's keys are
        # reported in that file, so every file is finished once all are linted.
        done: list[tuple[_Candidate, Outcome]] = []
        for cand, prepared, failed, spent in staged:
            if on_file:
                on_file(cand.display)
            outcome = failed
            if outcome is None:
                budget = self.budget_of(cand)
                left = max(budget - spent, 0.001) if budget and budget > 0 else budget
                value, outcome = self.guarded(cand, left, lambda c=cand, p=prepared: self.lint_one(c, p))  # type: ignore[misc]
                if outcome is None:
                    outcome = value  # type: ignore[assignment]
            done.append((cand, outcome))  # type: ignore[arg-type]
        foreign: dict[str, list[RawFinding]] = {}
        for cand, (_, raw_findings, _) in done:
            for f in raw_findings:
                if f.tok.file is not None and f.tok.file != cand.display:
                    foreign.setdefault(f.tok.file, []).append(f)
        for cand, (result, raw_findings, sups) in done:
            own = [f for f in raw_findings if f.tok.file is None or f.tok.file == cand.display]
            self.files.append(result)
            self.finish(cand.display, cand.path, own + foreign.get(cand.display, []), sups)

    def guarded(self, cand: _Candidate, budget: float,
                step: Callable[[], Prepared | Outcome]) -> tuple[object, Outcome | None]:
        """Run one step under the file's time budget: (its value, None), or (None, the outcome of a limit)."""
        try:
            with time_budget(budget):
                return step(), None
        except InputLimitError as e:  # a size / depth / alias limit: KV820 / KV821, and the next file goes on
            return None, (FileResult(path=cand.display, kind="unknown", status="error", note="over an input limit"),
                          [RawFinding(e.code, e.detail, Tok("", e.line, e.column), fix=e.fix)], [])
        except TimeBudgetExceeded:
            return None, (FileResult(path=cand.display, kind="unknown", status="error", note="over the time budget"),
                          [RawFinding("KV822", f"linting {cand.display} took longer than its time budget of "
                                      f"{self.budget_of(cand):g} s; it was not checked.", Tok("", 1, 1))], [])

    def lint_one(self, cand: _Candidate, prepared: Prepared) -> Outcome:
        """One prepared file: lint its launches (nothing is recorded until it is done)."""
        text, problem, is_finding, ex, note = prepared
        if text is None:
            if is_finding:
                return (FileResult(path=cand.display, kind="unknown", status="error", note=problem),
                        [RawFinding("KV800", problem or "unreadable", Tok("", 1, 1))], [])
            return FileResult(path=cand.display, kind="unknown", status="skipped", note=problem), [], []
        if ex is None:
            return FileResult(path=cand.display, kind="unknown", status="skipped", note=note), [], []
        raw_findings: list[RawFinding] = list(ex.findings)
        launches: list[LaunchInfo] = []
        for i, site in enumerate(ex.sites):
            res = self.scope_for(cand.path).linter.lint_site(site, cand.path, cand.display)
            raw_findings += [replace(f, launch=i) for f in res.findings]
            launches.append(res.info)
        if ex.line_map is not None:  # a rendered Helm template: template lines where exact, else marked rendered
            raw_findings, launches = _on_template(ex.line_map, raw_findings, launches)
        sups, ann_bad = _suppressions(text, ex)
        raw_findings += ann_bad
        status, fnote = _file_status(ex, launches, raw_findings)
        return (FileResult(path=cand.display, kind=ex.kind, status=status, note=fnote, launches=launches),  # type: ignore[arg-type]
                raw_findings, sups)

    # ------------------------------------------------------------------ filtering and suppressions
    def active(self, code: str, display: str, path: Path | None) -> bool:
        """Selected and not ignored for this file (by select/ignore or per-file-ignores)."""
        scope = self.scope_for(path)
        return scope.enabled(code) and not scope.per_file(code, path, display)

    def finish(self, display: str, path: Path | None, raw: Iterable[RawFinding], sups: list[Suppression]) -> None:
        scope = self.scope_for(path)
        kept: list[RawFinding] = []
        for f in raw:
            if not scope.enabled(f.code):
                continue
            hit = next((s for s in sups if s.covers(f)), None)
            if hit is not None:
                hit.used.add(f.code)
                self.suppressed.append(Suppressed(code=f.code, location=_loc(display, f.tok), reason=hit.reason,
                                                  via=hit.via))  # type: ignore[arg-type]
            elif scope.per_file(f.code, path, display):
                self.suppressed.append(Suppressed(code=f.code, location=_loc(display, f.tok), reason=None,
                                                  via="per-file-ignores"))
            else:
                kept.append(f)
        known = frozenset(self.declared)
        for s in sups:
            kept += [f for f in check_suppression(s, known, lambda c: self.active(c, display, path))
                     if self.active(f.code, display, path)]
        seen: set[tuple] = set()
        for f in kept:
            key = (f.code, f.tok.line, f.tok.col, f.message)
            if key in seen:  # two launches of one script sharing the line a finding is about: say it once
                continue
            seen.add(key)
            self.reported.append(self._reported(display, f))

    def _reported(self, display: str, f: RawFinding) -> LintFinding:
        r = self.declared.get(f.code)
        sev = Severity(f.severity) if f.severity else (r.severity if r else Severity.warning)
        return LintFinding(code=f.code, name=r.name if r else f.code.lower(), severity=sev, message=f.message,
                           fix=f.fix or (r.fix if r else None), location=_loc(display, f.tok),
                           model=f.model, layers=list(f.layers), launch=f.launch,
                           upgrade_to=f.upgrade, skipped_rules=list(f.skipped_rules))

    # ------------------------------------------------------------------ the report
    def report(self, fail_level: str | None) -> LintReport:
        suppressed, files = self.suppressed, self.files
        reported = _one_kv804_per_model(self.reported)
        reported.sort(key=lambda f: (f.location.path, f.location.line, f.location.column, f.code, f.message))
        suppressed.sort(key=lambda s: (s.location.path, s.location.line, s.location.column, s.code))
        files.sort(key=lambda f: f.path)
        by_code = Counter(f.code for f in reported)
        summary = Summary(files=len(files), linted=sum(f.status == "linted" for f in files),
                          skipped=sum(f.status == "skipped" for f in files),
                          launches=sum(len(f.launches) for f in files), findings=len(reported),
                          errors=sum(f.severity is Severity.error for f in reported),
                          warnings=sum(f.severity is Severity.warning for f in reported),
                          infos=sum(f.severity is Severity.info for f in reported),
                          suppressed=len(suppressed), by_code=dict(sorted(by_code.items())))
        base_cfg = self.base_cfg
        settings = Settings(config_file=_display(base_cfg.path, self.cwd) if base_cfg.path else None,
                            fail_level=fail_level or base_cfg.config.fail_level,  # type: ignore[arg-type]
                            select=self.base.select, ignore=self.base.ignore, gpu=self.base.default_gpu,
                            strict=base_cfg.strict)
        engine_version = EngineVersion.parse(engine_spec(base_cfg.config.engine_version)).version_str or ENGINE_VERSION
        return LintReport(kvplan_version=__version__, engine=EngineRef(name=ENGINE_NAME, version=engine_version),
                          settings=settings, summary=summary, files=files, findings=reported, suppressed=suppressed)


_KV804_PLACES = 10  # places a merged KV804 lists; the JSON report's launches list every one


def _one_kv804_per_model(reported: list[LintFinding]) -> list[LintFinding]:
    """One KV804 per unresolved model per run, at its first launch, listing every place it is launched (one
    per launch drowns the rest in CI). A model only known at run time is grouped per file and variable."""
    groups: dict[tuple[str, ...], list[LintFinding]] = {}
    for f in reported:
        if f.code == "KV804":
            key = ("model", f.model) if f.model else ("file", f.location.path, f.message)
            groups.setdefault(key, []).append(f)
    merged: dict[int, LintFinding | None] = {}
    for fs in groups.values():
        if len(fs) < 2:
            continue
        fs.sort(key=lambda f: (f.location.path, f.location.line, f.location.column))
        places = ", ".join(f"{f.location.path}:{f.location.line}" for f in fs[:_KV804_PLACES])
        if len(fs) > _KV804_PLACES:
            places += f" and {len(fs) - _KV804_PLACES} more"
        merged[id(fs[0])] = fs[0].model_copy(update={
            "message": f"{fs[0].message.rstrip('.')}; launched {len(fs)} times: {places}."})
        merged.update({id(f): None for f in fs[1:]})
    out = [merged.get(id(f), f) for f in reported]
    return [f for f in out if f is not None]


def _prepare(cand: _Candidate) -> Prepared:
    """Read and extract one file: (text, problem, is_finding, extracted, note)."""
    text, problem, is_finding = _read(cand)
    ex, note = _extract(cand, text) if text is not None else (None, None)
    return text, problem, is_finding, ex, note


def _on_template(m: dict[int, int], raw: list[RawFinding],
                 launches: list[LaunchInfo]) -> tuple[list[RawFinding], list[LaunchInfo]]:
    """Positions in a rendered Helm template moved to the template's lines where exact, else marked rendered."""
    raw = [replace(f, tok=_to_template(f.tok, m)) for f in raw]
    launches = [li.model_copy(update={"location": li.location.model_copy(update=(
        {"line": m[li.location.line]} if li.location.line in m else {"rendered": True}))}) for li in launches]
    return raw, launches


def _suppressions(text: str, ex: Extracted) -> tuple[list[Suppression], list[RawFinding]]:
    """A file's suppressions (comments and annotations) and the findings about malformed annotations."""
    sups = from_comments(text)
    ann_sups, ann_bad = from_annotations(ex.annotations)
    if ex.line_map is not None:  # an annotation in a template covers the template file
        ann_sups = [replace(s, tok=_to_template(s.tok, ex.line_map), first_line=1,
                            last_line=max(len(text.splitlines()), 1)) for s in ann_sups]
        ann_bad = [replace(f, tok=_to_template(f.tok, ex.line_map)) for f in ann_bad]
    return sups + ann_sups, ann_bad


def _file_status(ex: Extracted, launches: list[LaunchInfo], raw: list[RawFinding]) -> tuple[str, str | None]:
    if launches or ex.attached_to:
        return "linted", ex.note if ex.kind == "helm-template" or ex.attached_to else None
    if any(f.code in ("KV801", "KV802") for f in raw):
        return "error", "could not be parsed completely"
    return "skipped", ex.note or ("no vLLM launch found" if ex.kind != "unknown" else
                                  "not a Kubernetes manifest, compose file, vLLM config or launch script")


def _loc(display: str, t: Tok) -> Location:
    return Location(path=display, line=max(t.line, 1), column=max(t.col, 1), yaml_path=t.yaml_path or None,
                    rendered=t.rendered)


def template_line_map(template: str, rendered: str) -> dict[int, int]:
    """Lines of a Helm template's `helm template` output -> lines of the template, where that is exact: a
    rendered line that is a literal line of the template (no `{{ }}` action, found once in the template),
    aligned in order. Helm copies such lines byte for byte, so the column is the same too."""
    tl, rl = template.splitlines(), rendered.splitlines()
    count = Counter(tl)
    m: dict[int, int] = {}
    for a, b, n in difflib.SequenceMatcher(None, tl, rl, autojunk=False).get_matching_blocks():
        for k in range(n):
            line = tl[a + k]
            if line.strip() and count[line] == 1 and "{{" not in line and "}}" not in line:
                m[b + k + 1] = a + k + 1
    return m


def _to_template(t: Tok, m: dict[int, int]) -> Tok:
    return replace(t, line=m[t.line]) if t.line in m else replace(t, rendered=True)


def exit_code(report: LintReport, fail_level: str | None = None, exit_zero: bool = False) -> int:
    """0 clean, 1 when a reported finding is at or above the fail level."""
    if exit_zero:
        return 0
    floor = Severity(fail_level or report.settings.fail_level).rank
    return 1 if any(f.severity.rank >= floor for f in report.findings) else 0


__all__ = ["exit_code", "gpu_from_label", "lint_paths"]
