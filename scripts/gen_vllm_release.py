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
* `model_types.json`, `config_types/<sha>.json`, `transformers/<version>.json`: the config model types
  each release (from 0.18) loads: its own config classes (model type -> class name, `classes`, in tables
  generated since it was added), and the transformers release a user of it gets;
* `history.json`: for every option spelling, the releases that accept it, and for a removed one the
  release that removed it and the successor vLLM's own help text names (never a guess).
"""
from __future__ import annotations

import argparse
import ast
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
    types = load_model_types_index()["releases"].values()
    used |= {("config_types", rel["vllm_config"]) for rel in types} | {("transformers", rel["transformers"])
                                                                       for rel in types}
    for kind in ("options", "registry", "facts", "config_types", "transformers"):
        for p in (DATA / kind).glob("*.json"):
            if (kind, p.stem) not in used:
                p.unlink()


# ----------------------------------------------------------------------------- config model types
# What a release loads a config.json with (vllm/transformers_utils/config.py::HFConfigParser.parse): vLLM's own
# config class for the model_type (`_CONFIG_REGISTRY`), else transformers' AutoConfig (`CONFIG_MAPPING_NAMES`
# of the transformers release installed with it). Both are read statically (ast), from the vLLM wheel and from
# the wheel of the transformers a user of the release gets: `pip install vllm==X` resolves transformers to the
# newest release its requirement allows, which is what `pip download "transformers<req>"` picks. From 0.18
# (the releases kvplan plans).
MODEL_TYPES_FROM = "0.18.0"
TRANSFORMERS_WHEELS = DEFAULT_WHEELS.parent / "kvplan-transformers-wheels"


def _str_keys(node: ast.AST) -> list[str]:
    """The string keys a dict display, dict(...)/OrderedDict([...]) call or LazyConfigDict(k=...) call spells."""
    if isinstance(node, ast.Dict):
        out = []
        for k, v in zip(node.keys, node.values, strict=True):
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                out.append(k.value)
            elif k is None:  # **{...}
                out += _str_keys(v)
        return out
    if isinstance(node, (ast.List, ast.Tuple)):  # [("llama", "LlamaConfig"), ...]
        return [e.elts[0].value for e in node.elts if isinstance(e, ast.Tuple) and e.elts
                and isinstance(e.elts[0], ast.Constant) and isinstance(e.elts[0].value, str)]
    if isinstance(node, ast.Call):
        out = [k for a in node.args for k in _str_keys(a)]
        for kw in node.keywords:
            out += [kw.arg] if kw.arg is not None else _str_keys(kw.value)
        return out
    return []


def _mapping_keys(source: str, name: str, imported: dict[str, list[str]] | None = None) -> list[str] | None:
    """The keys of module-level mapping `name` after the module's top-level statements: assignments
    (`**name` spreads the value so far), `name.update({...})`, `from .x import name` (from `imported`)."""
    keys: list[str] | None = None
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names):
            keys = list((imported or {}).get(node.module or "", []))
            continue
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id == name and node.value is not None:
            spread = any(isinstance(kw.value, ast.Name) and kw.value.id == name
                         for kw in getattr(node.value, "keywords", ()) if kw.arg is None)
            keys = (keys or [] if spread else []) + _str_keys(node.value)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and keys is not None:
            f = node.value.func
            if isinstance(f, ast.Attribute) and f.attr == "update" and isinstance(f.value, ast.Name) \
                    and f.value.id == name:
                keys += [k for a in node.value.args for k in _str_keys(a)]
    return keys


def vllm_config_model_types(wheel: Path) -> list[str]:
    """The model types of the release's `_CONFIG_REGISTRY` (vLLM's own config classes)."""
    with zipfile.ZipFile(wheel) as z:
        source = z.read("vllm/transformers_utils/config.py").decode()
    keys = _mapping_keys(source, "_CONFIG_REGISTRY")
    if not keys:
        raise SystemExit(f"{wheel.name}: no _CONFIG_REGISTRY in vllm/transformers_utils/config.py")
    return sorted(set(keys))


def _class_name(node: ast.AST) -> str | None:
    """A registry value: the class's name as a string ("MiniMaxM3Config") or the class itself (a Name)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return node.id if isinstance(node, ast.Name) else None


def vllm_config_classes(wheel: Path) -> dict[str, str]:
    """model type -> the name of the config class the release's `_CONFIG_REGISTRY` loads it with (its last
    top-level assignment, `LazyConfigDict(name="Class")` or a dict display)."""
    with zipfile.ZipFile(wheel) as z:
        source = z.read("vllm/transformers_utils/config.py").decode()
    out: dict[str, str] = {}
    for node in ast.parse(source).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) else None
        if not (isinstance(target, ast.Name) and target.id == "_CONFIG_REGISTRY" and node.value is not None):
            continue
        value, found = node.value, {}
        if isinstance(value, ast.Call):  # name="Class", and **{"spelled-key": "Class"} spreads
            spreads = [kw.value for kw in value.keywords if kw.arg is None and isinstance(kw.value, ast.Dict)]
            found = {kw.arg: c for kw in value.keywords if kw.arg and (c := _class_name(kw.value))}
            found |= {k.value: c for d in spreads for k, v in zip(d.keys, d.values, strict=True)
                      if isinstance(k, ast.Constant) and isinstance(k.value, str) and (c := _class_name(v))}
            value = value.args[0] if value.args else value
        if isinstance(value, ast.Dict):
            found |= {k.value: c for k, v in zip(value.keys, value.values, strict=True)
                      if isinstance(k, ast.Constant) and isinstance(k.value, str) and (c := _class_name(v))}
        out = found
    return dict(sorted(out.items()))


def transformers_model_types(wheel: Path) -> list[str]:
    """The keys of transformers' `CONFIG_MAPPING_NAMES` (what AutoConfig loads), from its wheel."""
    base = "transformers/models/auto/"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        imported = {}
        if base + "auto_mappings.py" in names:  # transformers 5.x generates the table into its own module
            imported["auto_mappings"] = _mapping_keys(z.read(base + "auto_mappings.py").decode(),
                                                      "CONFIG_MAPPING_NAMES") or []
        keys = _mapping_keys(z.read(base + "configuration_auto.py").decode(), "CONFIG_MAPPING_NAMES", imported)
    if not keys:
        raise SystemExit(f"{wheel.name}: no CONFIG_MAPPING_NAMES in {base}configuration_auto.py")
    return sorted(set(keys))


def transformers_model_classes(wheel: Path) -> list[str]:
    """The model classes transformers exports (what vLLM's Transformers backend can build by name): the
    `__all__` names of its modules that name a model (*Model*, *For*), as `dir(transformers)` lists them."""
    names: set[str] = set()
    with zipfile.ZipFile(wheel) as z:
        for n in z.namelist():
            if not (n.startswith("transformers/") and n.endswith(".py")):
                continue
            src = z.read(n).decode("utf-8", "replace")
            if "__all__" not in src:
                continue
            for node in ast.parse(src).body:
                if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                        for t in node.targets) \
                        and isinstance(node.value, (ast.List, ast.Tuple)):
                    names |= {e.value for e in node.value.elts if isinstance(e, ast.Constant)
                              and isinstance(e.value, str)}
    return sorted(x for x in names if x[:1].isupper() and ("Model" in x or "For" in x))


def transformers_requirement(wheel: Path) -> str:
    """The release's `Requires-Dist: transformers...` specifier (its METADATA)."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    for line in text.splitlines():
        m = re.match(r"Requires-Dist:\s*transformers\s*(\[[^]]*\])?\s*([^;]*?)\s*(;.*)?$", line)
        if m and not (m.group(3) and "extra" in m.group(3)):
            return m.group(2).strip("()") or ""
    raise SystemExit(f"{wheel.name}: its METADATA requires no transformers")


def transformers_wheel(requirement: str, wheel_dir: Path) -> Path:
    """The wheel of the newest transformers the requirement allows (pip's own choice)."""
    wheel_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=wheel_dir) as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                        f"transformers{requirement}", "-d", tmp], check=True)
        got = next(Path(tmp).glob("transformers-*.whl"))
        dest = wheel_dir / got.name
        if not dest.exists():
            got.replace(dest)
    return dest


_WRITTEN: set[str] = set()


def model_types_record(version: str, wheel: Path, tf_wheels: Path) -> dict[str, Any]:
    req = transformers_requirement(wheel)
    tfw = transformers_wheel(req, tf_wheels)
    tf_version = tfw.name.split("-")[1]
    tf_path = DATA / "transformers" / f"{tf_version}.json"
    tf_path.parent.mkdir(parents=True, exist_ok=True)
    if tf_version not in _WRITTEN:  # once per run: several releases share a transformers release
        _WRITTEN.add(tf_version)
        tf_path.write_text(json.dumps({"transformers_version": tf_version, "wheel": tfw.name,
                                       "model_types": transformers_model_types(tfw),
                                       "model_classes": transformers_model_classes(tfw)}, indent=0) + "\n")
    return {"vllm_config": store("config_types", {"model_types": vllm_config_model_types(wheel),
                                                  "classes": vllm_config_classes(wheel)}),
            "transformers": tf_version, "transformers_requirement": req}


def load_model_types_index() -> dict[str, Any]:
    path = DATA / "model_types.json"
    if path.exists():
        return json.loads(path.read_text())
    return {"schema_version": SCHEMA_VERSION, "releases": {}}


def save_model_types(version: str, rec: dict[str, Any]) -> None:
    index = load_model_types_index()
    index["releases"][version] = rec
    index["releases"] = dict(sorted(index["releases"].items(), key=lambda kv: version_key(kv[0])))
    index["generator"] = "scripts/gen_vllm_release.py (--model-types)"
    index["transformers_rule"] = ("the newest transformers release the vLLM release's Requires-Dist allows "
                                  "(what `pip install vllm==X` installs)")
    (DATA / "model_types.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")


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
    ap.add_argument("--model-types", action="store_true",
                    help="only (re)generate the config model types of the versions (static: no interpreter)")
    ap.add_argument("--transformers-wheel-dir", type=Path, default=TRANSFORMERS_WHEELS)
    a = ap.parse_args()
    if a.model_types:
        for version in a.versions:
            rec = model_types_record(version, wheel_for(version, a.wheel_dir), a.transformers_wheel_dir)
            save_model_types(version, rec)
            log(f"vllm {version}: {rec}")
        prune()
        return
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
            if version_key(version) >= version_key(MODEL_TYPES_FROM):
                save_model_types(version, model_types_record(version, wheel, a.transformers_wheel_dir))
            log(f"vllm {version}: {doc['options']['num_options']} options, "
                f"stubbed {len(doc['stubbed_modules'])} modules ({', '.join(doc['stubbed_modules'][:6])}...)")
    prune()
    write_history()


if __name__ == "__main__":
    main()
