"""Add a vLLM release to kvplan in one command, and write what changed for KV plans for review.

    python scripts/add_vllm_release.py 0.35.0 [--previous 0.34.0] [--no-oracle] [--make-default]

Run by hand (never in CI), from the repository root. In order, it

1. downloads the wheel and regenerates kvplan's tables from it (scripts/gen_vllm_release.py: options,
   registry, facts, config model types; the parser's argv cases into tests/data/vllm_argv_cases/VERSION.json);
2. compares the release with the previous known one: `vllm serve` options (added, removed, changed
   choices / defaults / nargs, abbreviations that became ambiguous), `--kv-cache-dtype` values,
   quantization methods, the model registry and its previously-supported list, the config model types
   vLLM loads itself, attention backend names, the defaults that feed a plan; the backend capability
   code touched (every file under vllm/v1/attention/, vllm/attention/, vllm/platforms/ that differs
   between the two wheels) and the other source kvplan's rules mirror, with changed-line counts;
3. installs the release for the oracle (its wheel without dependencies, `pip --target` into
   $ORACLE_WORK/vllm-VERSION, in front of the oracle venv of scripts/oracle/setup_venv.sh) and asks
   that release's own code: the per-layer corpus under the six flag sets (scripts/oracle/release_oracle.sh
   -> tests/data/vllm_oracle_releases/VERSION/), the capacity oracle and the backend oracle where those
   scripts take a release (a step whose script does not yet is reported as skipped, naming the hook);
4. runs kvplan's own comparison against the answers (tests/planner/test_vllm_parity.py for that release,
   and the capacity / backend parity tests where the release has cases);
5. writes docs/releases/vllm-VERSION.md: sorted, no timestamps, the same text for the same inputs.

`--no-oracle` skips step 3 (the report says so; step 4 still compares kvplan with answers stored by an
earlier run). `--make-default` makes the release kvplan's default (once its plans are exact: rules and
backend rows updated, parity cases passing, golden plans reviewed).
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import gen_vllm_release as gen  # noqa: E402

ORACLE_DIR = HERE / "oracle"
TESTS = ROOT / "tests"
CORPUS = TESTS / "data" / "corpus"
RELEASE_ANSWERS = TESTS / "data" / "vllm_oracle_releases"
REFERENCE_ANSWERS = TESTS / "data" / "vllm_oracle"  # the 0.33.0 answers, one file per model and flag set
CAPACITY_CASES = TESTS / "data" / "vllm_oracle_capacity" / "cases.json"
ARCH_CASES = TESTS / "data" / "vllm_oracle_arch"
DEFAULT_VENV = Path(os.environ.get("ORACLE_VENV", tempfile.gettempdir() + "/vllm-oracle-venv"))
DEFAULT_WORK = Path(os.environ.get("ORACLE_WORK", tempfile.gettempdir() + "/kvplan-oracle-releases"))
SETUP = "scripts/oracle/setup_venv.sh"
# The six flag sets of tests/conftest.py CASES, as scripts/oracle/release_corpus.py runs them.
FLAG_SETS = ("auto", "bf16", "fp8", "fp8-skip-0-2", "fp8-skip-sw", "int8pth")
VERSION_RE = re.compile(r"^\d+\.\d+\.\d+(\.\d+)?(\.post\d+)?$")

# Backend capability code: which attention backend a layer gets, the block sizes and cache dtypes it
# accepts (vllm/v1/attention/ from 0.9, vllm/attention/ before, the platforms' backend choice).
BACKEND_CODE = ("vllm/v1/attention/", "vllm/attention/", "vllm/platforms/")
# Other vLLM source kvplan's KV rules and defaults mirror (prefixes; each release's layout).
WATCHED = (
    "vllm/config/cache.py", "vllm/config/vllm.py", "vllm/config/scheduler.py", "vllm/config/model.py",
    "vllm/config/attention.py", "vllm/config.py", "vllm/engine/arg_utils.py",
    "vllm/model_executor/layers/attention/",
    "vllm/v1/kv_cache_interface.py", "vllm/v1/core/kv_cache_utils.py",
    "vllm/model_executor/layers/quantization/kv_cache.py", "vllm/model_executor/layers/quantization/__init__.py",
    "vllm/model_executor/models/registry.py", "vllm/model_executor/models/config.py",
    "vllm/transformers_utils/config.py", "vllm/utils/torch_utils.py",
)


class InputError(Exception):
    """A bad argument or a missing prerequisite: one line, exit 2, nothing written."""


def log(msg: str) -> None:
    print(f"add_vllm_release: {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- arguments
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="scripts/add_vllm_release.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("version", help="the release, as the package index spells it (0.35.0, 0.10.1.1)")
    ap.add_argument("--previous", help="release to compare with (default: the newest known release before it)")
    ap.add_argument("--python", default=gen.DEFAULT_PYTHON, help="interpreter with torch (CPU) for the extraction")
    ap.add_argument("--oracle-venv", type=Path, default=DEFAULT_VENV,
                    help=f"the oracle venv of {SETUP} (default $ORACLE_VENV or %(default)s)")
    ap.add_argument("--oracle-work", type=Path, default=DEFAULT_WORK,
                    help="where the release is installed for the oracle (default $ORACLE_WORK or %(default)s)")
    ap.add_argument("--no-oracle", action="store_true", help="skip the oracle steps (the report says so)")
    ap.add_argument("--cases", nargs="+", default=list(FLAG_SETS), metavar="FLAG_SET",
                    help=f"flag sets the corpus oracle runs (default all: {' '.join(FLAG_SETS)})")
    ap.add_argument("--only", nargs="+", metavar="MODEL", help="corpus models the oracle runs (default all)")
    ap.add_argument("--arch-cases", nargs="+", metavar="NAME",
                    help="also run these architecture-oracle cases (tests/data/vllm_oracle_arch) with the release")
    ap.add_argument("--wheel-dir", type=Path, default=gen.DEFAULT_WHEELS)
    ap.add_argument("--make-default", action="store_true", help="make it kvplan's default release")
    ap.add_argument("--no-generate", action="store_true", help="the tables are already generated")
    ap.add_argument("--report", type=Path, help="write the report here (default docs/releases/vllm-VERSION.md)")
    return ap.parse_args(argv)


def check_args(a: argparse.Namespace, known: Iterable[str], corpus_models: Iterable[str]) -> None:
    """Every argument error, before anything is downloaded or written (InputError: one line)."""
    if not VERSION_RE.match(a.version):
        raise InputError(f"version {a.version!r} is not a release number like 0.35.0: pass it as pip spells it")
    known = set(known)
    if a.previous is not None:
        if a.previous not in known:
            ordered = sorted(known, key=gen.version_key)
            raise InputError(f"--previous {a.previous}: kvplan has no tables for it (it knows {ordered[0]} to "
                             f"{ordered[-1]}): generate it first (scripts/gen_vllm_release.py {a.previous})")
        if gen.version_key(a.previous) >= gen.version_key(a.version):
            raise InputError(f"--previous {a.previous} is not older than {a.version}")
    elif not any(gen.version_key(v) < gen.version_key(a.version) for v in known):
        raise InputError(f"no known release before {a.version} to compare with: pass --previous")
    if a.no_generate and a.version not in known:
        raise InputError(f"--no-generate: kvplan has no tables for {a.version} yet; drop --no-generate")
    bad = sorted(set(a.cases) - set(FLAG_SETS))
    if bad:
        raise InputError(f"--cases {' '.join(bad)}: unknown flag set (known: {' '.join(FLAG_SETS)})")
    missing = sorted(set(a.only or ()) - set(corpus_models))
    if missing:
        raise InputError(f"--only {' '.join(missing)}: not a corpus model (tests/data/corpus/<model>/config.json)")
    if not a.no_generate and not Path(a.python).is_file():
        raise InputError(f"no extraction interpreter at {a.python}: build the oracle venv with {SETUP} "
                         "or pass --python (an interpreter with torch on the CPU)")
    if not a.no_oracle and not (a.oracle_venv / "bin" / "python").is_file():
        raise InputError(f"no oracle interpreter at {a.oracle_venv}/bin/python: build it with "
                         f"`ORACLE_VENV={a.oracle_venv} {SETUP}`, or pass --no-oracle to skip the oracle steps")


def previous_of(version: str, known: Iterable[str]) -> str:
    older = [v for v in known if gen.version_key(v) < gen.version_key(version)]
    return max(older, key=gen.version_key)


# ----------------------------------------------------------------------------- tables
def read_release(version: str) -> dict[str, Any]:
    entry = gen.load_index()["releases"][version]
    d = gen.DATA
    return {
        "options": json.loads((d / "options" / f"{entry['options']}.json").read_text()),
        "registry": json.loads((d / "registry" / f"{entry['registry']}.json").read_text()),
        "facts": json.loads((d / "facts" / f"{entry['facts']}.json").read_text()),
        "model_types": read_model_types(version),
        "entry": entry,
    }


def read_model_types(version: str) -> dict[str, Any] | None:
    """The config model types a release loads (gen_vllm_release.py, from 0.18), or None."""
    entry = gen.load_model_types_index()["releases"].get(version)
    if entry is None:
        return None
    tf = json.loads((gen.DATA / "transformers" / f"{entry['transformers']}.json").read_text())
    own = json.loads((gen.DATA / "config_types" / f"{entry['vllm_config']}.json").read_text())["model_types"]
    return {"vllm_config": own, "transformers": entry["transformers"],
            "transformers_requirement": entry["transformers_requirement"], "transformers_types": tf["model_types"]}


def model_type_changes(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[str]:
    """What configs the release loads: vLLM's own config classes, the transformers its users get."""
    if old is None or new is None:
        return ["### Config model types", "", "Not compared (no config model types for one of the releases).", ""]
    lines = set_diff("Config model types vLLM loads with its own config classes", old["vllm_config"],
                     new["vllm_config"])
    head = (f"transformers {old['transformers']} (`{old['transformers_requirement']}`) -> "
            f"{new['transformers']} (`{new['transformers_requirement']}`)")
    if old["transformers"] == new["transformers"]:
        return [*lines, "### Transformers model types (AutoConfig)", "", f"{head}: no change.", ""]
    body = set_diff("Transformers model types (AutoConfig)", old["transformers_types"], new["transformers_types"])
    return [*lines, *body[:2], head + ":", "", *body[2:]]


def _spellings(options: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s: r for r in options["options"] for s in r["option_strings"] + r["hidden_option_strings"]}


def set_diff(title: str, old: Iterable[str], new: Iterable[str]) -> list[str]:
    old, new = set(old), set(new)
    added, removed = sorted(new - old), sorted(old - new)
    lines = [f"### {title}", ""]
    if not added and not removed:
        return [*lines, "No change.", ""]
    if added:
        lines.append(f"- added ({len(added)}): " + ", ".join(f"`{x}`" for x in added))
    if removed:
        lines.append(f"- removed ({len(removed)}): " + ", ".join(f"`{x}`" for x in removed))
    return [*lines, ""]


def _value_changes(s: str, a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    out = []
    for key in ("nargs", "kind", "choices", "default", "action", "deprecated"):
        if a.get(key) == b.get(key):
            continue
        if key == "choices" and a.get(key) and b.get(key):
            plus = [c for c in b[key] if c not in a[key]]
            minus = [c for c in a[key] if c not in b[key]]
            out.append(f"- `{s}` choices: added {plus or 'none'}, removed {minus or 'none'}")
        elif key == "choices" and a.get(key):
            out.append(f"- `{s}` choices: no longer checked by the parser (were {len(a[key])} values)")
        else:
            out.append(f"- `{s}` {key}: `{a.get(key)}` -> `{b.get(key)}`")
    return out


def ambiguous_abbreviations(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Prefixes that resolved to one option and now match several (vLLM exits 2 on them)."""
    both = set(_spellings(old)) & set(_spellings(new))
    out = []
    for s in sorted(both):
        for cut in range(3, len(s)):
            p = s[:cut]
            before = [x for x in old["registration_order"] if x.startswith(p)]
            after = [x for x in new["registration_order"] if x.startswith(p)]
            if len(before) == 1 and len(after) > 1:
                out.append(f"- `{p}` was `{before[0]}`, now ambiguous ({', '.join(after)})")
                break
    return out


def option_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    o, n = _spellings(old), _spellings(new)
    lines = set_diff("`vllm serve` option spellings", o, n)
    changed = []
    for s in sorted(set(o) & set(n)):
        if s in o[s]["option_strings"][1:]:
            continue  # an option is reported once, by its first spelling
        changed += _value_changes(s, o[s], n[s])
    lines += ["### Options whose values or defaults changed", "", *(changed or ["No change."]), ""]
    amb = ambiguous_abbreviations(old, new)
    lines += ["### Abbreviations that became ambiguous", "", *(amb[:40] or ["None."])]
    if len(amb) > 40:
        lines.append(f"- ... and {len(amb) - 40} more")
    return [*lines, ""]


def _flat_defaults(d: dict[str, Any]) -> dict[str, Any]:
    flat = {f"--{k.replace('_', '-')}": v for k, v in d.get("parser", {}).items()}
    for cls, fields in sorted(d.get("config", {}).items()):
        flat.update({f"{cls}.{k}": v for k, v in fields.items()})
    flat["--max-model-len auto accepted"] = d.get("max_model_len_auto")
    return flat


def defaults_changes(old_facts: dict[str, Any], new_facts: dict[str, Any]) -> list[str]:
    a, b = _flat_defaults(old_facts["defaults"]), _flat_defaults(new_facts["defaults"])
    rows = [f"- `{k}`: `{a.get(k)}` -> `{b.get(k)}`" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    return ["### Defaults that feed a plan", "", *(rows or ["No change."]), ""]


def table_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The report's table sections: every generated table of the two releases, compared."""
    of, nf = old["facts"], new["facts"]
    lines = option_changes(old["options"], new["options"])
    lines += set_diff("`--kv-cache-dtype` values", of["kv_cache_dtypes"] or [], nf["kv_cache_dtypes"] or [])
    lines += set_diff("Quantization methods", of["quantization_methods"] or [], nf["quantization_methods"] or [])
    lines += set_diff("Architectures (model registry)", old["registry"]["tables"].get("vllm_models") or [],
                      new["registry"]["tables"].get("vllm_models") or [])
    lines += set_diff("Previously supported (refused at startup)", old["registry"]["previously_supported"],
                      new["registry"]["previously_supported"])
    lines += model_type_changes(old.get("model_types"), new.get("model_types"))
    lines += set_diff("Attention backend names", of["attention_backends"]["names"], nf["attention_backends"]["names"])
    return lines + defaults_changes(of, nf)


# ----------------------------------------------------------------------------- source
@dataclass(frozen=True)
class FileChange:
    path: str
    state: str  # added / removed / changed
    added: int
    removed: int


def wheel_sources(wheel: Path, prefixes: tuple[str, ...]) -> dict[str, list[str]]:
    """The lines of the wheel's Python files under the prefixes."""
    with zipfile.ZipFile(wheel) as z:
        return {n: z.read(n).decode("utf-8", "replace").splitlines()
                for n in z.namelist() if n.endswith(".py") and n.startswith(prefixes)}


def diff_sources(old: dict[str, list[str]], new: dict[str, list[str]]) -> list[FileChange]:
    """Files whose content differs, sorted, with the lines a unified diff adds and removes."""
    out = []
    for f in sorted(set(old) | set(new)):
        a, b = old.get(f, []), new.get(f, [])
        if f in old and f in new and a == b:
            continue
        plus = minus = 0
        for ln in difflib.unified_diff(a, b, lineterm="", n=0):
            if ln.startswith("+") and not ln.startswith("+++"):
                plus += 1
            elif ln.startswith("-") and not ln.startswith("---"):
                minus += 1
        state = "added" if f not in old else "removed" if f not in new else "changed"
        out.append(FileChange(f, state, plus, minus))
    return out


def source_section(title: str, intro: str, changes: list[FileChange]) -> list[str]:
    lines = [f"## {title}", "", intro, ""]
    if not changes:
        return [*lines, "No change.", ""]
    total = sum(c.added + c.removed for c in changes)
    rows = [f"| `{c.path}` | {c.state} | +{c.added} | -{c.removed} |" for c in changes]
    return [*lines, f"{len(changes)} files, {total} changed lines.", "",
            "| file | | added | removed |", "|---|---|---|---|", *rows, ""]


# ----------------------------------------------------------------------------- oracle answers
def _runs_033(layers: list[dict[str, Any]]) -> list[list[Any]]:
    runs: list[list[Any]] = []
    for rec in layers:
        spec = rec.get("kv_cache_spec") or {}
        fields = [rec.get("kv_cache_dtype"), rec.get("kv_quant_mode"), rec.get("sliding_window"),
                  rec.get("num_kv_heads", spec.get("num_kv_heads")), rec.get("head_size", spec.get("head_size"))]
        i = rec.get("index")
        if runs and i == runs[-1][1] + 1 and runs[-1][2:] == fields:
            runs[-1][1] = i
        else:
            runs.append([i, i, *fields])
    return runs


def load_answers(version: str) -> dict[str, dict[str, dict[str, Any]]]:
    """{model: {flag set: {error, mode, model_dtype, layers}}} of a release's stored corpus answers (the
    compact per-release files, or the 0.33.0 reference answers in their per-layer form); {} if none."""
    vdir = RELEASE_ANSWERS / version
    if vdir.is_dir():
        return {p.stem: json.loads(p.read_text())["cases"] for p in sorted(vdir.glob("*.json"))}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for p in sorted(REFERENCE_ANSWERS.glob("*__*.json")):
        doc = json.loads(p.read_text())
        if doc.get("vllm_version") != version:
            return {}
        model, case = p.stem.split("__", 1)
        err = doc.get("error")
        out.setdefault(model, {})[case] = {
            "error": err and {"message": " ".join(str(err.get("message", "")).split())[:300]},
            "mode": doc.get("mode"), "model_dtype": (doc.get("engine") or {}).get("model_dtype"),
            "layers": _runs_033(doc.get("layers") or [])}
    return out


# vLLM errors that are the oracle machine's, not the release's answer (the same list as
# tests/planner/test_vllm_parity.py::_ORACLE_LIMITS): such a case is not compared.
ORACLE_LIMITS = ("failed to be inspected", "Can't load image processor", "the oracle child wrote no answer",
                 "is a per-layer attribute")


def oracle_limit(answer: dict[str, Any]) -> str | None:
    msg = str((answer.get("error") or {}).get("message", ""))
    return next((x for x in ORACLE_LIMITS if x in msg), None)


def _answer_diff(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    if bool(a.get("error")) != bool(b.get("error")):
        if b.get("error"):
            return f"now refused: {b['error']['message'][:120]}"
        return "no longer refused"
    if a.get("error"):
        return None
    if a.get("model_dtype") != b.get("model_dtype"):
        return f"model dtype {a.get('model_dtype')} -> {b.get('model_dtype')}"
    if a.get("layers") != b.get("layers"):
        return "per-layer KV caches differ (dtype, quant mode, window or geometry)"
    return None


def compare_answers(old: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]],
                    names: tuple[str, str] = ("previous", "new")) -> tuple[int, list[str], list[str]]:
    """(cases answered alike, the differing ones, the ones not compared because one side is an oracle
    limit) over the model/flag-set cases both releases answered."""
    same, differ, limited = 0, [], []
    for model in sorted(set(old) & set(new)):
        for case in sorted(set(old[model]) & set(new[model]) - {"geometry"}):
            a, b = old[model][case], new[model][case]
            limits = [f"{n}: {x}" for n, ans in zip(names, (a, b), strict=True) if (x := oracle_limit(ans))]
            if limits:
                limited.append(f"- `{model}` / `{case}`: the oracle could not run it here ({'; '.join(limits)})")
            elif (why := _answer_diff(a, b)) is None:
                same += 1
            else:
                differ.append(f"- `{model}` / `{case}`: {why}")
    return same, differ, limited


def changed_answer_files(before: dict[str, str], vdir: Path) -> list[str]:
    """Answer files the run added or changed, against the texts read before it."""
    after = {p.name: p.read_text() for p in sorted(vdir.glob("*.json"))} if vdir.is_dir() else {}
    return sorted(f"`{n}` ({'added' if n not in before else 'changed'})"
                  for n, t in after.items() if before.get(n) != t)


# ----------------------------------------------------------------------------- steps
@dataclass
class Step:
    """One oracle or parity step, as the report shows it."""

    name: str
    status: str  # ran / stored / skipped / failed
    note: str = ""
    lines: list[str] = field(default_factory=list)

    def render(self) -> list[str]:
        head = {"ran": "ran", "stored": "from stored answers", "skipped": "not run", "failed": "FAILED"}[self.status]
        return [f"### {self.name}: {head}", "", *([self.note, ""] if self.note else []),
                *self.lines, *([""] if self.lines else [])]


@dataclass(frozen=True)
class TestResult:
    test_id: str
    outcome: str  # passed / failed / skipped
    message: str = ""


def parse_junit(xml_text: str) -> list[TestResult]:
    """pytest's --junitxml: one result per test case, sorted by id."""
    out = []
    for tc in ET.fromstring(xml_text).iter("testcase"):
        name = tc.get("name", "")
        bad = tc.find("failure") if tc.find("failure") is not None else tc.find("error")
        skip = tc.find("skipped")
        if bad is not None:
            msg = (bad.get("message") or "").splitlines()[0] if bad.get("message") else ""
            out.append(TestResult(name, "failed", msg[:200]))
        elif skip is not None:
            out.append(TestResult(name, "skipped", (skip.get("message") or "")[:160]))
        else:
            out.append(TestResult(name, "passed"))
    return sorted(out, key=lambda r: r.test_id)


def parity_lines(results: list[TestResult], what: str) -> list[str]:
    """The report's lines for a parity run: counts, then every mismatch and every skip."""
    n = {k: sum(r.outcome == k for r in results) for k in ("passed", "failed", "skipped")}
    lines = [f"{len(results)} {what}: {n['passed']} match, {n['failed']} mismatch, {n['skipped']} skipped "
             "(the oracle could not run the case here).", ""]
    if n["failed"]:
        lines += ["Mismatches:", "", *[f"- `{r.test_id}`: {r.message}" for r in results if r.outcome == "failed"], ""]
    if n["skipped"]:
        lines += ["Skipped:", "", *[f"- `{r.test_id}`: {r.message}" for r in results if r.outcome == "skipped"], ""]
    return lines[:-1] if lines[-1] == "" else lines


def run_parity(test_file: str, select: str, what: str, name: str) -> Step:
    """kvplan's own comparison: pytest over the release's cases of one parity test file."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", select, test_file,
               f"--junitxml={xml}"]
        p = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True)
        if p.returncode == 5:
            return Step(name, "skipped", f"no cases for this release in `{test_file}`.")
        if not xml.is_file():
            return Step(name, "failed", f"pytest did not run (exit {p.returncode}): {p.stderr.strip()[-300:]}")
        results = parse_junit(xml.read_text())
    return Step(name, "ran", f"`pytest {test_file} -k \"{select}\"`", parity_lines(results, what))


def _oracle_env(site: Path, work: Path) -> dict[str, str]:
    return {**os.environ, "VLLM_TARGET_DEVICE": "cpu",
            "PYTHONPATH": os.pathsep.join([str(site), str(work / "deps")])}


def install_site(version: str, venv: Path, work: Path) -> Path:
    """The release's wheel without dependencies in $ORACLE_WORK/vllm-VERSION (release_oracle.sh --install-only)."""
    env = {**os.environ, "ORACLE_VENV": str(venv), "ORACLE_WORK": str(work)}
    subprocess.run([str(ORACLE_DIR / "release_oracle.sh"), version, "--install-only"], env=env, check=True)
    return work / f"vllm-{version}"


def run_corpus(version: str, a: argparse.Namespace, previous: str) -> list[Step]:
    vdir = RELEASE_ANSWERS / version
    before = {p.name: p.read_text() for p in sorted(vdir.glob("*.json"))} if vdir.is_dir() else {}
    env = {**os.environ, "ORACLE_VENV": str(a.oracle_venv), "ORACLE_WORK": str(a.oracle_work)}
    cmd = [str(ORACLE_DIR / "release_oracle.sh"), version, "--cases", *a.cases]
    cmd += ["--only", *a.only] if a.only else []
    p = subprocess.run(cmd, env=env, cwd=ROOT)
    name = "Per-layer corpus (scripts/oracle/release_corpus.py)"
    if p.returncode != 0:
        return [Step(name, "failed", f"`{' '.join(cmd[1:])}` exited {p.returncode}")]
    return [corpus_step(name, version, previous, a.cases, a.only, changed_answer_files(before, vdir))]


def corpus_step(name: str, version: str, previous: str, cases: Sequence[str], only: Sequence[str] | None,
                changed: list[str] | None) -> Step:
    """What the corpus answers say: how many, which changed in this run (None: no run), which differ from the
    previous release."""
    new = load_answers(version)
    n = sum(len([c for c in v if c in cases]) for v in new.values())
    sel = f"flag sets {', '.join(sorted(cases))}" + (f"; models {', '.join(sorted(only))}" if only else "")
    head = f"{len(new)} models, {n} answers ({sel}) in `tests/data/vllm_oracle_releases/{version}/`"
    if changed is None:
        lines = [head + ", stored by an earlier run.", ""]
    else:
        lines = [f"{head}; {len(changed)} answer files added or changed by this run" + (":" if changed else "."), ""]
        lines += [f"- {c}" for c in changed] + ([""] if changed else [])
    old = load_answers(previous)
    if old:
        same, differ, limited = compare_answers(old, new, (previous, version))
        lines += [f"Against vLLM {previous}'s own answers: {same} cases decide the same per-layer KV caches, "
                  f"{len(differ)} differ" + (":" if differ else "."), ""] + differ + ([""] if differ else [])
        if limited:
            lines += [f"{len(limited)} cases not compared:", "", *limited]
    else:
        lines.append(f"vLLM {previous} has no stored corpus answers to compare with.")
    return Step(name, "ran" if changed is not None else "stored", "", lines)


def _accepted_options(script: Path, python: str, env: dict[str, str]) -> set[str]:
    p = subprocess.run([python, str(script), "--help"], env=env, capture_output=True, text=True)
    return set(re.findall(r"--[a-z][a-z0-9-]*", p.stdout))


def release_aware_command(script: Path, python: str, env: dict[str, str], version: str, site: Path,
                          base: list[str]) -> list[str] | None:
    """The command that runs an oracle script with this release, or None when it takes no release yet."""
    if not script.is_file():
        return None
    opts = _accepted_options(script, python, env)
    extra = ["--release", version] if "--release" in opts else []
    extra += ["--site", str(site)] if "--site" in opts else []
    if not extra:
        return None
    return [python, str(script), *base, *extra]


def run_capacity(version: str, python: str, site: Path, env: dict[str, str]) -> list[Step]:
    """Hook `run_capacity`: scripts/oracle/capacity_oracle.py with the release, then its parity tests."""
    name = "Capacity oracle (scripts/oracle/capacity_oracle.py)"
    script = ORACLE_DIR / "capacity_oracle.py"
    # plain, extra caches, drafts, refusals, GPU backends, one per architecture config (cases_arch.json)
    case_files = sorted(CAPACITY_CASES.parent.glob("cases*.json"))
    for cases in case_files:
        cmd = release_aware_command(script, python, env, version, site, ["--cases", str(cases)])
        if cmd is None:
            return [Step(name, "skipped", "capacity_oracle.py takes no release option (--release / --site) yet: "
                         "hook `run_capacity` in scripts/add_vllm_release.py calls it once it does.")]
        p = subprocess.run(cmd, env=env, cwd=ROOT)
        if p.returncode not in (0, 1):  # 1: a case answered with vLLM's exception (recorded; parity judges it)
            return [Step(name, "failed", f"{cases.name}: exited {p.returncode}")]
    return [Step(name, "ran", ", ".join(c.name for c in case_files)),
            run_parity("tests/planner/test_vllm_capacity_parity.py", version, "capacity cases",
                       "kvplan against the capacity answers"),
            run_parity("tests/planner/test_vllm_capacity_layouts.py", version, "layout cases (drafts, extra "
                       "caches, refusals)", "kvplan against the capacity layout answers"),
            run_parity("tests/planner/test_vllm_capacity_gpu_backends.py", version, "GPU-backend layout cases",
                       "kvplan at --gpu against the answers of vLLM's CUDA platform"),
            run_parity("tests/planner/test_vllm_capacity_arch.py", version, "architecture capacity cases",
                       "kvplan against the capacity answers for every architecture config")]


def run_backend(version: str, a: argparse.Namespace, site: Path, env: dict[str, str]) -> list[Step]:
    """Hook `run_backend`: the backend oracle with the release (scripts/oracle/backend_oracle.sh VERSION, or
    backend_oracle.py where it takes --release / --site), then its parity tests for that release."""
    name = "Backend oracle (scripts/oracle/backend_oracle.sh)"
    wrapper, script = ORACLE_DIR / "backend_oracle.sh", ORACLE_DIR / "backend_oracle.py"
    python = str(a.oracle_venv / "bin" / "python")
    if wrapper.is_file():
        cmd = [str(wrapper), version]
        env = {**os.environ, "ORACLE_VENV": str(a.oracle_venv), "ORACLE_WORK": str(a.oracle_work)}
    else:
        cmd = release_aware_command(script, python, env, version, site, []) if script.is_file() else None
    if cmd is None:
        return [Step(name, "skipped", "no backend oracle that takes a release (scripts/oracle/backend_oracle.sh "
                     "VERSION, or backend_oracle.py --release/--site) yet: hook `run_backend` in "
                     "scripts/add_vllm_release.py calls it once there is.")]
    p = subprocess.run(cmd, env=env, cwd=ROOT)
    if p.returncode != 0:
        return [Step(name, "failed", f"`{' '.join(cmd[-2:])}` exited {p.returncode}")]
    tests = sorted(TESTS.glob("**/test_backend_oracle*.py")) + sorted(TESTS.glob("**/test_*backend*parity*.py"))
    if not tests:
        return [Step(name, "ran", "no backend parity test file found to compare kvplan with.")]
    return [Step(name, "ran"), run_parity(str(tests[0].relative_to(ROOT)), version, "backend cases",
                                          "kvplan against the backend answers")]


def run_arch(version: str, python: str, env: dict[str, str], only: list[str]) -> Step:
    """Optional: architecture-oracle cases with the release, against the stored (0.33) answers."""
    name = "Architecture oracle cases (scripts/oracle/arch_oracle.py)"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "cases"
        shutil.copytree(ARCH_CASES, work, ignore=shutil.ignore_patterns("answers"))
        cmd = [python, str(ORACLE_DIR / "arch_oracle.py"), "--cases", str(work / "cases.json"), "--only", *only]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            return Step(name, "failed", "; ".join(p.stderr.strip().splitlines()[-3:]))
        differ, same = [], 0
        for ans in sorted((work / "answers").glob("*.json")):
            stored = ARCH_CASES / "answers" / ans.name
            old = json.loads(stored.read_text()) if stored.exists() else {}
            new = json.loads(ans.read_text())
            if old.get("layers") == new.get("layers") and old.get("error") == new.get("error"):
                same += 1
            else:
                err = new.get("error") or {}
                differ.append(f"- `{ans.stem}`: " + (f"{err.get('type')}: {str(err.get('message', ''))[:160]}"
                                                     if err else "per-layer KV caches differ"))
    return Step(name, "ran", f"{len(only)} cases: {same} build the stored answers' KV caches, {len(differ)} differ.",
                differ)


def oracle_steps(a: argparse.Namespace, previous: str) -> list[Step]:
    site = install_site(a.version, a.oracle_venv, a.oracle_work)
    python = str(a.oracle_venv / "bin" / "python")
    env = _oracle_env(site, a.oracle_work)
    steps = run_corpus(a.version, a, previous)
    steps += run_capacity(a.version, python, site, env)
    steps += run_backend(a.version, a, site, env)
    if a.arch_cases:
        steps.append(run_arch(a.version, python, env, a.arch_cases))
    return steps


# ----------------------------------------------------------------------------- report
@dataclass
class ReportInput:
    version: str
    previous: str
    old: dict[str, Any]
    new: dict[str, Any]
    backend_code: list[FileChange]
    other_code: list[FileChange]
    oracle: list[Step] | None
    """None: --no-oracle."""
    parity: list[Step]


def build_report(r: ReportInput) -> str:
    entry = r.new["entry"]
    lines = [f"# vLLM {r.version}: what changed for KV plans (against {r.previous})", "",
             f"Generated by `python scripts/add_vllm_release.py {r.version}` from `{entry['wheel']}` "
             f"(sha256 `{entry['wheel_sha256'][:16]}…`); the tables are in kvplan/data/vllm/. Review each "
             "section; a change that alters a KV decision needs a rule or row with its release range.", "",
             "## Tables", ""]
    lines += table_changes(r.old, r.new)
    lines += source_section("Backend capability code touched",
                            "Files under vllm/v1/attention/, vllm/attention/ and vllm/platforms/ whose content "
                            f"differs between the {r.previous} and {r.version} wheels (lines added / removed): "
                            "which backend a layer gets, the block sizes and cache dtypes it accepts.",
                            r.backend_code)
    lines += source_section("Other source kvplan mirrors",
                            "Config, registry and KV cache code kvplan's rules and defaults follow.", r.other_code)
    lines += [f"## Oracle: vLLM {r.version}'s own code", ""]
    if r.oracle is None:
        lines += ["Not run (--no-oracle). Run the command without it, with the oracle venv of "
                  f"`{SETUP}`, to ask the release itself.", ""]
    else:
        for step in r.oracle:
            lines += step.render()
    lines += ["## kvplan against the answers", ""]
    for step in r.parity:
        lines += step.render()
    return "\n".join(lines).rstrip() + "\n"


def source_changes(previous: str, version: str, wheel_dir: Path) -> tuple[list[FileChange], list[FileChange]]:
    old_w, new_w = gen.wheel_for(previous, wheel_dir), gen.wheel_for(version, wheel_dir)
    backend = diff_sources(wheel_sources(old_w, BACKEND_CODE), wheel_sources(new_w, BACKEND_CODE))
    other_prefixes = tuple(p for p in WATCHED if not p.startswith(BACKEND_CODE))
    other = diff_sources(wheel_sources(old_w, other_prefixes), wheel_sources(new_w, other_prefixes))
    return backend, other


# ----------------------------------------------------------------------------- main
def _generate(a: argparse.Namespace) -> None:
    subprocess.run([sys.executable, str(HERE / "gen_vllm_release.py"), a.version, "--cases", "--python", a.python,
                    "--wheel-dir", str(a.wheel_dir)], check=True)


def run(a: argparse.Namespace) -> Path:
    t0 = time.monotonic()
    if not a.no_generate:
        log(f"regenerating the tables from the {a.version} wheel")
        _generate(a)
    if a.make_default:
        subprocess.run([sys.executable, str(HERE / "gen_vllm_release.py"), "--history", "--default", a.version],
                       check=True)
    known = gen.load_index()["releases"]
    previous = a.previous or previous_of(a.version, known)
    log(f"comparing with {previous}")
    backend, other = source_changes(previous, a.version, a.wheel_dir)
    oracle = None
    if not a.no_oracle:
        log(f"asking vLLM {a.version} itself (oracle, CPU heavy)")
        oracle = oracle_steps(a, previous)
    log("comparing kvplan with the release's answers")
    parity = [run_parity("tests/planner/test_vllm_parity.py", f"test_vllm_release_parity_per_layer and {a.version}",
                         "corpus cases", "kvplan against the corpus answers (tests/planner/test_vllm_parity.py)")]
    if oracle is None and load_answers(a.version):
        parity.insert(0, corpus_step("Corpus answers (not refreshed: --no-oracle)", a.version, previous,
                                     FLAG_SETS, None, None))
    text = build_report(ReportInput(a.version, previous, read_release(previous), read_release(a.version),
                                    backend, other, oracle, parity))
    out = a.report or ROOT / "docs" / "releases" / f"vllm-{a.version}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    log(f"wrote {out} in {time.monotonic() - t0:.0f} s: review it, then commit kvplan/data/vllm, "
        f"tests/data/vllm_argv_cases, tests/data/vllm_oracle_releases/{a.version} and the report")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    try:
        corpus = [p.name for p in CORPUS.iterdir() if (p / "config.json").is_file()]
        check_args(a, gen.load_index()["releases"], corpus)
        run(a)
    except InputError as e:
        print(f"add_vllm_release: error: {e}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as e:
        print(f"add_vllm_release: error: `{' '.join(map(str, e.cmd))}` exited {e.returncode} (its output is above)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
