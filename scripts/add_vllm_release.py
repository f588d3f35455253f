"""Add a vLLM release to kvplan in one command, and write what changed for KV plans for review.

    python scripts/add_vllm_release.py 0.35.0 [--oracle-python /path/to/venv-0.35/bin/python]
                                              [--previous 0.34.0] [--make-default]

1. downloads the wheel and regenerates kvplan's tables from it (scripts/gen_vllm_release.py, argv
   cases included: tests/data/vllm_argv_cases/VERSION.json);
2. compares the new release with the previous one: `vllm serve` options (added, removed, changed
   choices / defaults / nargs), `--kv-cache-dtype` values, quantization methods, the model registry
   and its previously-supported list, attention backend names, the defaults that feed a plan, and the
   source files of the code kvplan's rules and backend rows mirror (config/cache.py, the attention
   backends, kv_cache_interface.py, platforms, the registry), with changed-line counts;
3. with --oracle-python (an interpreter with that release installed, e.g. built by
   `VLLM_VERSION=X scripts/oracle/setup_venv.sh`), runs the differential oracle cases
   (scripts/oracle/arch_oracle.py over tests/data/vllm_oracle_arch/cases.json) with that release and
   lists the cases whose per-layer KV caches differ from the stored answers;
4. writes docs/releases/vllm-VERSION.md: the diff a person reviews instead of reading vLLM.

--make-default makes the release kvplan's default (do it once its plans are exact: KV rules and
backend rows updated, oracle cases passing, golden plans reviewed).
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import gen_vllm_release as gen  # noqa: E402

# The vLLM source kvplan's KV rules, backend rows and defaults mirror (prefixes; each release's layout).
WATCHED = (
    "vllm/config/cache.py", "vllm/config/vllm.py", "vllm/config/scheduler.py", "vllm/config/model.py",
    "vllm/config/attention.py", "vllm/config.py", "vllm/engine/arg_utils.py",
    "vllm/platforms/interface.py", "vllm/platforms/cuda.py", "vllm/platforms/rocm.py",
    "vllm/v1/attention/backends/", "vllm/attention/", "vllm/model_executor/layers/attention/",
    "vllm/v1/kv_cache_interface.py", "vllm/v1/core/kv_cache_utils.py",
    "vllm/model_executor/layers/quantization/kv_cache.py", "vllm/model_executor/layers/quantization/__init__.py",
    "vllm/model_executor/models/registry.py", "vllm/model_executor/models/config.py",
    "vllm/utils/torch_utils.py",
)


def _read_release(version: str) -> dict[str, Any]:
    index = gen.load_index()
    entry = index["releases"][version]
    d = gen.DATA
    return {
        "options": json.loads((d / "options" / f"{entry['options']}.json").read_text()),
        "registry": json.loads((d / "registry" / f"{entry['registry']}.json").read_text()),
        "facts": json.loads((d / "facts" / f"{entry['facts']}.json").read_text()),
        "entry": entry,
    }


def _spellings(options: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s: r for r in options["options"] for s in r["option_strings"] + r["hidden_option_strings"]}


def _set_diff(title: str, old: list[str] | set[str], new: list[str] | set[str]) -> list[str]:
    added, removed = sorted(set(new) - set(old)), sorted(set(old) - set(new))
    lines = [f"### {title}", ""]
    if not added and not removed:
        return [*lines, "No change.", ""]
    if added:
        lines.append(f"- added ({len(added)}): " + ", ".join(f"`{x}`" for x in added))
    if removed:
        lines.append(f"- removed ({len(removed)}): " + ", ".join(f"`{x}`" for x in removed))
    return [*lines, ""]


def option_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    o, n = _spellings(old), _spellings(new)
    lines = _set_diff("`vllm serve` option spellings", set(o), set(n))
    changed = []
    for s in sorted(set(o) & set(n)):
        a, b = o[s], n[s]
        if s != a["option_strings"][0] and s in a["option_strings"][1:]:
            continue  # report an option once, by its first spelling
        for key in ("nargs", "kind", "choices", "default", "action", "deprecated"):
            if a.get(key) == b.get(key):
                continue
            if key == "choices" and a.get(key) and b.get(key):
                plus = [c for c in b[key] if c not in a[key]]
                minus = [c for c in a[key] if c not in b[key]]
                changed.append(f"- `{s}` choices: added {plus or 'none'}, removed {minus or 'none'}")
            elif key == "choices" and a.get(key):
                changed.append(f"- `{s}` choices: no longer checked by the parser (were {len(a[key])} values)")
            else:
                changed.append(f"- `{s}` {key}: `{a.get(key)}` -> `{b.get(key)}`")
    lines += ["### Options whose values or defaults changed", ""] + (changed or ["No change."]) + [""]
    # abbreviations: a prefix that resolved to one option and now matches several (vLLM exits 2), or back
    amb = []
    for s in sorted(set(o) & set(n)):
        for cut in range(3, len(s)):
            p = s[:cut]
            before = [x for x in old["registration_order"] if x.startswith(p)]
            after = [x for x in new["registration_order"] if x.startswith(p)]
            if len(before) == 1 and len(after) > 1:
                amb.append(f"- `{p}` was `{before[0]}`, now ambiguous ({', '.join(after)})")
                break
    lines += ["### Abbreviations that became ambiguous", ""] + (amb[:40] or ["None."])
    if len(amb) > 40:
        lines.append(f"- ... and {len(amb) - 40} more")
    return [*lines, ""]


def defaults_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    lines = ["### Defaults that feed a plan", ""]
    a, b = old["facts"]["defaults"], new["facts"]["defaults"]
    rows = []
    flat_a = {f"--{k.replace('_', '-')}": v for k, v in a.get("parser", {}).items()}
    flat_b = {f"--{k.replace('_', '-')}": v for k, v in b.get("parser", {}).items()}
    for cls in sorted(set(a.get("config", {})) | set(b.get("config", {}))):
        flat_a.update({f"{cls}.{k}": v for k, v in a.get("config", {}).get(cls, {}).items()})
        flat_b.update({f"{cls}.{k}": v for k, v in b.get("config", {}).get(cls, {}).items()})
    for k in sorted(set(flat_a) | set(flat_b)):
        if flat_a.get(k) != flat_b.get(k):
            rows.append(f"- `{k}`: `{flat_a.get(k)}` -> `{flat_b.get(k)}`")
    if a.get("max_model_len_auto") != b.get("max_model_len_auto"):
        rows.append(f"- `--max-model-len auto`: {a.get('max_model_len_auto')} -> {b.get('max_model_len_auto')}")
    return [*lines, *(rows or ["No change."]), ""]


def _unpack_watched(wheel: Path, dest: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.endswith(".py") and name.startswith(WATCHED):
                z.extract(name, dest)


def source_changes(old_wheel: Path, new_wheel: Path) -> list[str]:
    lines = ["## Source kvplan mirrors (changed files, lines added/removed)", "",
             "Read these diffs for KV rules, backend rows and defaults that are code rather than tables.", ""]
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a", Path(tmp) / "b"
        _unpack_watched(old_wheel, a)
        _unpack_watched(new_wheel, b)
        files_a = {p.relative_to(a).as_posix() for p in a.rglob("*.py")}
        files_b = {p.relative_to(b).as_posix() for p in b.rglob("*.py")}
        rows = []
        for f in sorted(files_a | files_b):
            ta = (a / f).read_text().splitlines() if f in files_a else []
            tb = (b / f).read_text().splitlines() if f in files_b else []
            if ta == tb:
                continue
            plus = minus = 0
            for ln in difflib.unified_diff(ta, tb, lineterm="", n=0):
                if ln.startswith("+") and not ln.startswith("+++"):
                    plus += 1
                elif ln.startswith("-") and not ln.startswith("---"):
                    minus += 1
            state = "added" if f not in files_a else "removed" if f not in files_b else "changed"
            rows.append(f"| `{f}` | {state} | +{plus} | -{minus} |")
    if not rows:
        return [*lines, "No change.", ""]
    return [*lines, "| file | | added | removed |", "|---|---|---|---|", *rows, ""]


def oracle_changes(version: str, python: str, only: list[str] | None = None, site: Path | None = None) -> list[str]:
    """Run the arch oracle cases with the release and list the cases whose answers differ from the stored ones."""
    cases_dir = ROOT / "tests" / "data" / "vllm_oracle_arch"
    lines = ["## Differential oracle with this release", ""]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "cases"
        shutil.copytree(cases_dir, work, ignore=shutil.ignore_patterns("answers"))
        env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu"}
        if site:  # the release installed apart (pip install --no-deps --target SITE vllm==X), in front of the venv's
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH", "")]))
        cmd = [python, str(HERE / "oracle" / "arch_oracle.py"), "--cases", str(work / "cases.json")]
        p = subprocess.run(cmd + (["--only", *only] if only else []), env=env, capture_output=True, text=True)
        if p.returncode != 0:
            return [*lines, "The oracle did not run:", "", "```", *p.stderr.strip().splitlines()[-10:], "```", ""]
        differ, same = [], 0
        for ans in sorted((work / "answers").glob("*.json")):
            stored = cases_dir / "answers" / ans.name
            old = json.loads(stored.read_text()) if stored.exists() else None
            new = json.loads(ans.read_text())
            if old is not None and old.get("layers") == new.get("layers") and old.get("error") == new.get("error"):
                same += 1
            elif new.get("error"):  # vLLM's refusal, or the harness needing a patch for this release: say which
                err = new["error"]
                differ.append(f"- `{ans.stem}`: {err.get('stage')}: {err.get('type')}: {err.get('message', '')[:160]}")
            else:
                differ.append(f"- `{ans.stem}`: per-layer KV caches differ")
    ran = f"{len(only)} selected cases (--oracle-only)" if only else "every case"
    return [*lines, f"Ran {ran}. {same} build the same per-layer KV caches as the stored answers; "
                    f"{len(differ)} differ:", "", *(differ or ["(none)"]), ""]


def report(version: str, previous: str, wheel_dir: Path, oracle: str | None, only: list[str] | None = None,
           site: Path | None = None) -> str:
    old, new = _read_release(previous), _read_release(version)
    of, nf = old["facts"], new["facts"]
    lines = [f"# vLLM {version}: what changed for KV plans (against {previous})", "",
             f"Generated by `scripts/add_vllm_release.py {version}` from `{new['entry']['wheel']}` "
             f"(sha256 `{new['entry']['wheel_sha256'][:16]}…`); the tables are in kvplan/data/vllm/. "
             "Review each section; a change that alters a KV decision needs a rule or row with its release range.",
             "", "## Tables", ""]
    lines += option_changes(old["options"], new["options"])
    lines += _set_diff("`--kv-cache-dtype` values", of["kv_cache_dtypes"] or [], nf["kv_cache_dtypes"] or [])
    lines += _set_diff("Quantization methods", of["quantization_methods"] or [], nf["quantization_methods"] or [])
    ra = set(old["registry"]["tables"].get("vllm_models") or [])
    rb = set(new["registry"]["tables"].get("vllm_models") or [])
    lines += _set_diff("Architectures (model registry)", ra, rb)
    lines += _set_diff("Previously supported (refused at startup)", set(old["registry"]["previously_supported"]),
                       set(new["registry"]["previously_supported"]))
    lines += _set_diff("Attention backend names", of["attention_backends"]["names"], nf["attention_backends"]["names"])
    lines += defaults_changes(old, new)
    lines += source_changes(gen.wheel_for(previous, wheel_dir), gen.wheel_for(version, wheel_dir))
    if oracle:
        lines += oracle_changes(version, oracle, only, site)
    else:
        setup = f"VLLM_VERSION={version} ORACLE_VENV=/tmp/oracle-{version} scripts/oracle/setup_venv.sh"
        lines += ["## Differential oracle", "",
                  f"Not run (pass --oracle-python with an interpreter that has vLLM {version}: `{setup}`).", ""]
    return "\n".join(lines).rstrip() + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("version")
    ap.add_argument("--previous", help="release to compare with (default: the newest known release before it)")
    ap.add_argument("--python", default=gen.DEFAULT_PYTHON, help="interpreter with torch (CPU) for the extraction")
    ap.add_argument("--oracle-python", help="interpreter with this vLLM release installed, to run the oracle cases")
    ap.add_argument("--oracle-only", nargs="*", help="run only these oracle cases (names in the cases file)")
    ap.add_argument("--oracle-site", type=Path, help="the release installed apart (pip install --no-deps --target "
                    "DIR vllm==X), put in front of --oracle-python's own vLLM")
    ap.add_argument("--wheel-dir", type=Path, default=gen.DEFAULT_WHEELS)
    ap.add_argument("--make-default", action="store_true", help="make it kvplan's default release")
    ap.add_argument("--no-generate", action="store_true", help="the tables are already generated: report only")
    a = ap.parse_args()
    if not a.no_generate:
        subprocess.run([sys.executable, str(HERE / "gen_vllm_release.py"), a.version, "--cases", "--python", a.python,
                        "--wheel-dir", str(a.wheel_dir)], check=True)
    if a.make_default:
        subprocess.run([sys.executable, str(HERE / "gen_vllm_release.py"), "--history", "--default", a.version],
                       check=True)
    versions = sorted(gen.load_index()["releases"], key=gen.version_key)
    previous = a.previous or next((v for v in reversed(versions)
                                   if gen.version_key(v) < gen.version_key(a.version)), None)
    if previous is None:
        raise SystemExit(f"no release before {a.version} to compare with")
    out = ROOT / "docs" / "releases" / f"vllm-{a.version}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report(a.version, previous, a.wheel_dir, a.oracle_python, a.oracle_only, a.oracle_site))
    print(f"wrote {out.relative_to(ROOT)}: review it, then `git add kvplan/data/vllm tests/data/vllm_argv_cases "
          f"{out.relative_to(ROOT)}`", file=sys.stderr)


if __name__ == "__main__":
    main()
