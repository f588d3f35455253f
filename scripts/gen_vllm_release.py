"""Generate kvplan's data for vLLM releases from each release's own wheel.

    python scripts/gen_vllm_release.py 0.34.0 [0.33.0 ...] [--python PY] [--wheel-dir DIR]
    python scripts/gen_vllm_release.py --history   # only recompute history.json from the stored tables

For each version it downloads the wheel (`pip download --no-deps vllm==X`, kept in --wheel-dir),
unpacks its Python files into a temporary directory, and runs scripts/vllm_release/extract.py there
with an interpreter that has torch on the CPU (--python, default the oracle venv's). extract.py
builds the release's own `vllm serve` parser; a third-party module (or name) the release imports
unguarded that this interpreter lacks is stubbed, one at a time: the run reports the import that
failed and is repeated with it stubbed, so optional imports vLLM guards still fail as they would.

Written under kvplan/data/vllm/ (never edited by hand):

* `options/<sha>.json`, `registry/<sha>.json`, `facts/<sha>.json`: content-addressed tables (an
  identical table of two releases is stored once);
* `releases.json`: release -> the ids of its tables, the wheel it was read from, how (the stubs);
* `history.json`: for every option spelling, the releases that accept it, and for a removed one the
  release that removed it and the successor vLLM's own help text names (never a guess).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "kvplan" / "data" / "vllm"
EXTRACT = Path(__file__).resolve().parent / "vllm_release" / "extract.py"
DEFAULT_PYTHON = os.environ.get("KVPLAN_VLLM_PYTHON", "/tmp/vllm-oracle-venv/bin/python")
DEFAULT_WHEELS = Path(os.environ.get("KVPLAN_WHEEL_DIR", tempfile.gettempdir() + "/kvplan-vllm-wheels"))
SCHEMA_VERSION = 1


def version_key(v: str) -> tuple[int, ...]:
    """'0.6.1.post2' -> (0, 6, 1, 0, 2); '0.10.1.1' -> (0, 10, 1, 1, 0)."""
    main, _, post = v.partition(".post")
    nums = [int(x) for x in main.split(".")]
    nums += [0] * (4 - len(nums))
    return (*nums, int(post or 0))


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- wheel
def wheel_for(version: str, wheel_dir: Path) -> Path:
    wheel_dir.mkdir(parents=True, exist_ok=True)
    found = sorted(wheel_dir.glob(f"vllm-{version}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"vllm=={version}",
                        "-d", str(wheel_dir)], check=True)
        found = sorted(wheel_dir.glob(f"vllm-{version}-*.whl"))
    if not found:
        raise SystemExit(f"no wheel for vllm=={version} in {wheel_dir}")
    return found[0]


def unpack(wheel: Path, dest: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith("vllm/") and name.endswith(".py"):
                z.extract(name, dest)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ----------------------------------------------------------------------------- extraction
CASES = Path(__file__).resolve().parent / "vllm_release" / "argv_cases.json"
CASES_OUT = ROOT / "tests" / "data" / "vllm_argv_cases"


SERVER = "vllm.entrypoints.openai.api_server"


def extract(src: Path, python: str, stub: str = "", seed: list[str] | None = None, tries: int = 60,
            cases: bool = False) -> dict[str, Any]:
    """Run extract.py over the unpacked release, stubbing the unguarded imports it lacks one by one.

    `seed`: modules an earlier release of the same run needed stubbed (a module the interpreter has is
    never stubbed by it); it saves a run per module."""
    missing: list[str] = list(seed or [])
    env = {**os.environ, "PYTHONPATH": str(src), "VLLM_TARGET_DEVICE": "cpu", "PYTHONDONTWRITEBYTECODE": "1"}
    for _ in range(tries):
        cmd = [python, str(EXTRACT), "--stub-missing", ",".join(missing)] + (["--stub", stub] if stub else [])
        cmd += ["--cases", str(CASES)] if cases else []
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=src, timeout=900)
        out = p.stdout.strip().splitlines()
        doc = json.loads(out[-1]) if out and out[-1].startswith("{") else None
        if p.returncode == 0 and doc is not None:
            doc["stub_allowed"] = missing
            return doc
        if p.returncode == 3 and doc and doc.get("missing") and doc["missing"] not in missing:
            missing.append(doc["missing"])
            continue
        if p.returncode != 3 and SERVER not in stub.split(","):
            # The `serve` command module imports the HTTP server, which may fail at import on this
            # interpreter's web stack (0.8: a FastAPI form route). The parser never touches it: stub it.
            stub = ",".join(filter(None, [stub, SERVER]))
            continue
        raise SystemExit(f"extract.py failed in {src}:\n" + "\n".join(p.stderr.strip().splitlines()[-12:]))
    raise SystemExit(f"extract.py: more than {tries} missing imports in {src}")


def scrub_addresses(cases: list[dict[str, Any]]) -> None:
    """A function's repr in an error message carries its address, which changes per run: drop it."""
    for c in cases:
        if "error" in c:
            c["error"] = re.sub(r" at 0x[0-9a-f]+", "", c["error"])


# ----------------------------------------------------------------------------- storage
def _dump(obj: Any) -> str:
    """Sorted JSON, one list item / table row per line: small, and a diff shows the row that changed."""
    if isinstance(obj, dict) and "options" in obj:
        head = {k: v for k, v in obj.items() if k != "options"}
        rows = ",\n".join(" " + json.dumps(r, sort_keys=True) for r in obj["options"])
        return json.dumps(head, sort_keys=True)[:-1] + ', "options": [\n' + rows + "\n]}\n"
    return json.dumps(obj, sort_keys=True, indent=0) + "\n"


def store(kind: str, obj: Any) -> str:
    text = _dump(obj)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = DATA / kind / f"{digest}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(text)
    return digest


def kv_cache_dtypes(options: dict[str, Any]) -> list[str] | None:
    for row in options["options"]:
        if row["dest"] in ("kv_cache_dtype", "cache_dtype") and row["choices"]:
            return list(row["choices"])
    return None


def plan_defaults(doc: dict[str, Any]) -> dict[str, Any]:
    """The defaults that feed a plan, as the parser and the config classes declare them."""
    by_dest = {r["dest"]: r for r in doc["options"]["options"]}
    parser = {d: by_dest[d]["default"] for d in ("block_size", "gpu_memory_utilization", "max_num_batched_tokens",
                                                 "max_num_seqs", "max_model_len", "kv_cache_dtype",
                                                 "enable_prefix_caching", "swap_space") if d in by_dest}
    max_len = by_dest.get("max_model_len")
    return {
        "parser": parser,
        "config": doc["config_defaults"],
        # 'auto' / -1 (the largest length that fits) is accepted where the option's type says so
        "max_model_len_auto": bool(max_len and max_len["kind"] == "human_readable_int_or_auto"),
    }


def record(version: str, doc: dict[str, Any], wheel: Path) -> dict[str, Any]:
    options = doc["options"]
    facts = {
        "kv_cache_dtypes": doc.get("kv_cache_dtypes") or kv_cache_dtypes(options),
        "quantization_methods": doc["quantization_methods"],
        "attention_backends": doc["attention_backends"],
        "defaults": plan_defaults(doc),
    }
    return {
        "options": store("options", options),
        "registry": store("registry", doc["registry"]),
        "facts": store("facts", facts),
        "serve_parser": doc["serve_parser"],
        "platform": doc.get("platform"),
        "stubbed_modules": doc["stubbed_modules"],
        "wheel": wheel.name,
        "wheel_sha256": sha256(wheel),
    }


def load_index() -> dict[str, Any]:
    path = DATA / "releases.json"
    if path.exists():
        return json.loads(path.read_text())
    return {"schema_version": SCHEMA_VERSION, "releases": {}, "default": None}


def save_index(index: dict[str, Any]) -> None:
    index["releases"] = dict(sorted(index["releases"].items(), key=lambda kv: version_key(kv[0])))
    index["generator"] = "scripts/gen_vllm_release.py"
    (DATA / "releases.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")


def prune() -> None:
    """Drop content files no release points at any more."""
    index = load_index()
    used = {(k, rel[k]) for rel in index["releases"].values() for k in ("options", "registry", "facts")}
    for kind in ("options", "registry", "facts"):
        for p in (DATA / kind).glob("*.json"):
            if (kind, p.stem) not in used:
                p.unlink()


# ----------------------------------------------------------------------------- history
_FLAG = re.compile(r"(?<![\w-])(--[a-z0-9][a-z0-9_-]*(?:\.[a-z0-9_]+)*)")


def successor_of(spelling: str, row: dict[str, Any], later: dict[str, Any]) -> str | None:
    """The option vLLM's deprecation help names instead of this one (present in the later release)."""
    text = row.get("deprecation_help") or ""
    if not re.search(r"deprecat|removed|replaced|instead", text, re.I):
        return None  # help that names another option without deprecating this one names no successor
    later_spellings = {s for r in later["options"] for s in r["option_strings"] + r["hidden_option_strings"]}
    for cand in _FLAG.findall(text):
        cand = cand.rstrip(".")
        base = cand.split(".")[0].replace("_", "-")
        if cand != spelling and base in later_spellings and base not in row["option_strings"]:
            return cand
    return None


def build_history(index: dict[str, Any]) -> dict[str, Any]:
    versions = sorted(index["releases"], key=version_key)
    tables = {v: json.loads((DATA / "options" / f"{index['releases'][v]['options']}.json").read_text())
              for v in versions}
    seen: dict[str, list[str]] = {}
    rows: dict[str, list[dict[str, Any]]] = {}  # every release's row of the spelling, oldest first
    for v in versions:
        for r in tables[v]["options"]:
            for s in r["option_strings"] + r["hidden_option_strings"]:
                seen.setdefault(s, []).append(v)
                rows.setdefault(s, []).append(r)
    out: dict[str, Any] = {}
    for s, vs in sorted(seen.items()):
        # releases that accept the spelling, as [first, last] runs over the release list
        runs: list[list[str]] = []
        for v in vs:
            if runs and versions.index(v) == versions.index(runs[-1][1]) + 1:
                runs[-1][1] = v
            else:
                runs.append([v, v])
        entry: dict[str, Any] = {"accepted": runs}
        last = runs[-1][1]
        if last != versions[-1]:
            removed_in = versions[versions.index(last) + 1]
            entry["removed_in"] = removed_in
            # the newest deprecation text that names a successor, in any release that had the flag
            entry["successor"] = next((x for r in reversed(rows[s])
                                       if (x := successor_of(s, r, tables[removed_in])) is not None), None)
            last_row = rows[s][-1]
            if last_row.get("deprecation_help"):
                entry["last_help"] = last_row["deprecation_help"][:300]
        out[s] = entry
    return {"schema_version": SCHEMA_VERSION, "generator": "scripts/gen_vllm_release.py",
            "releases": versions, "options": out}


def write_history() -> None:
    hist = build_history(load_index())
    (DATA / "history.json").write_text(json.dumps(hist, sort_keys=True, indent=0) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("versions", nargs="*", help="vLLM releases, e.g. 0.34.0")
    ap.add_argument("--python", default=DEFAULT_PYTHON, help="interpreter with torch (CPU) to run extract.py")
    ap.add_argument("--wheel-dir", type=Path, default=DEFAULT_WHEELS)
    ap.add_argument("--stub", default="", help="modules to stub even where installed (extract.py --stub)")
    ap.add_argument("--raw", type=Path, help="also write extract.py's raw JSON here (one file per release)")
    ap.add_argument("--history", action="store_true", help="only recompute history.json")
    ap.add_argument("--cases", action="store_true",
                    help=f"also run {CASES.relative_to(ROOT)} through the parser into {CASES_OUT.relative_to(ROOT)}/")
    ap.add_argument("--default", help="make this release kvplan's default (once its plans are exact)")
    a = ap.parse_args()
    if a.default:
        index = load_index()
        if a.default not in index["releases"]:
            raise SystemExit(f"--default {a.default}: no data for it (generate it first)")
        index["default"] = a.default
        save_index(index)
    if not a.history:
        seed: list[str] = []
        for version in a.versions:
            wheel = wheel_for(version, a.wheel_dir)
            with tempfile.TemporaryDirectory(prefix=f"vllm-{version}-") as tmp:
                unpack(wheel, Path(tmp))
                doc = extract(Path(tmp), a.python, a.stub, seed, cases=a.cases)
            seed = sorted(set(seed) | set(doc.pop("stub_allowed")))
            if doc.get("engine_version") not in (version, None):
                raise SystemExit(f"{wheel.name} says it is vLLM {doc.get('engine_version')}, not {version}")
            if a.raw:
                a.raw.mkdir(parents=True, exist_ok=True)
                (a.raw / f"{version}.json").write_text(json.dumps(doc, sort_keys=True, indent=1) + "\n")
            if a.cases:
                scrub_addresses(doc["cases"])
                CASES_OUT.mkdir(parents=True, exist_ok=True)
                (CASES_OUT / f"{version}.json").write_text(json.dumps(
                    {"engine_version": version, "generator": "scripts/gen_vllm_release.py --cases",
                     "stubbed_modules": doc["stubbed_modules"], "cases": doc.pop("cases")},
                    sort_keys=True, indent=0) + "\n")
            index = load_index()
            index["releases"][version] = record(version, doc, wheel)
            save_index(index)
            log(f"vllm {version}: {doc['options']['num_options']} options, "
                f"stubbed {len(doc['stubbed_modules'])} modules ({', '.join(doc['stubbed_modules'][:6])}...)")
    prune()
    write_history()


if __name__ == "__main__":
    main()
