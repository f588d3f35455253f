#!/usr/bin/env python3
"""The published-configs regression suite: its case list and provenance page, from PROVENANCE.json.

tests/data/published_configs/<name>/config.json (with hf_quant_config.json where the checkpoint
ships one) are config files as published, collected from public GitHub repositories;
PROVENANCE.json records for each its repository, path, commit, URL, sha256 and what spelling it
exercises. This script (no vLLM needed):

  * checks every stored file against its recorded sha256 (a changed file is an error: collect it
    again and record its new provenance);
  * writes cases.json: one oracle case per config with `--kv-cache-dtype auto`, and one with
    `fp8` for the quantized re-uploads;
  * writes PROVENANCE.md, the human-readable table.

    python scripts/oracle/published_suite.py

Then vLLM's answers (scripts/oracle/arch_oracle.py, the oracle venv; only changed configs rerun):

    VLLM_TARGET_DEVICE=cpu <venv>/bin/python scripts/oracle/arch_oracle.py \\
        --cases tests/data/published_configs/cases.json
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "data" / "published_configs"


def load() -> list[dict]:
    return json.loads((SUITE / "PROVENANCE.json").read_text())["configs"]


def stale_files(configs: list[dict]) -> list[str]:
    """Stored files whose bytes differ from the recorded sha256 (or that are missing)."""
    bad = []
    for c in configs:
        for fname, f in c["files"].items():
            p = SUITE / c["name"] / fname
            if not p.is_file() or hashlib.sha256(p.read_bytes()).hexdigest() != f["sha256"]:
                bad.append(f"{c['name']}/{fname}")
    return bad


# Oracle options a case takes over from its architecture's default case in the architecture suite
# (tests/data/vllm_oracle_arch/cases.json): the processor files, platform and config-class stand-ins
# that architecture's model class needs to build on the CPU oracle (scripts/oracle/arch_oracle.py).
_INHERITED = ("files", "enable_prefix_caching", "device_capability", "remote_config", "remote_config_base",
              "v2_model_runner", "flashinfer_impl_check", "vllm_config_class", "sub_configs")


def drop_keys(config: dict, quantized: bool) -> list[str]:
    """Keys the geometry answer is computed without (arch_oracle.py patch 40): the weight
    quantization of a quantized re-upload, an auto_map whose remote code is not here."""
    keys = ["quantization_config"] if quantized else []
    return keys + (["auto_map"] if "auto_map" in config else [])


def render_cases(configs: list[dict]) -> str:
    arch_cases = {c["name"]: c for c in json.loads((ROOT / "tests" / "data" / "vllm_oracle_arch" / "cases.json")
                                                   .read_text())["cases"]}
    cases = []
    for c in configs:
        cfg = json.loads((SUITE / c["name"] / "config.json").read_text())
        arch = (cfg.get("architectures") or [""])[0]
        base = arch_cases.get(f"{arch}__default__auto", {})
        inherited = {k: base[k] for k in _INHERITED if k in base}
        drop = drop_keys(cfg, c["quantized"])
        # Without an auto_map the file is loaded as it stands: no stand-in for a config class (patch 41).
        as_published = {} if "auto_map" in cfg else {"as_published": True}
        for dtype in ("auto", "fp8") if c["quantized"] else ("auto",):
            cases.append({"config": f"{c['name']}/config.json", "kv_cache_dtype": dtype,
                          "name": f"{c['name']}__{dtype}", **inherited, **as_published,
                          **({"drop_keys": drop} if drop else {})})
    return json.dumps({"cases": cases}, indent=1, sort_keys=True) + "\n"


def render_provenance(configs: list[dict]) -> str:
    lines = [
        "# Published configs: provenance",
        "",
        "Config files as published, collected from public GitHub repositories that vendor them (no machine",
        "here reaches the Hugging Face Hub). Each is planned by kvplan and compared layer by layer with what",
        "vLLM 0.33.0 builds for it (`answers/`, scripts/oracle/arch_oracle.py: a quantized re-upload without",
        "its weight quantization, which the CPU oracle cannot build; `dtype_answers/`,",
        "scripts/oracle/published_dtype_oracle.py: the KV dtypes its own quant config gives every attention",
        "layer; tests/planner/test_published_configs.py). The point is spellings: two files of one",
        "architecture count twice. Regenerate this page and `cases.json` with",
        "`python scripts/oracle/published_suite.py` (machine-readable record: PROVENANCE.json).",
        "",
        "Provenance flags: **VERBATIM** byte copy of the vendored file (read with `git show <commit>:<path>`);",
        "**DERIVATIVE** a real published file of a fine-tune, re-save or quantization of the named model;",
        "**ABRIDGED-BY-VENDOR** the vendoring repository trimmed it (fewer layers or keys), so it is not the",
        "Hub file; **TRANSCRIBED** the vendor keeps it as a Python dict in a test, written out here as JSON.",
        "",
        "| config | family | spelling exercised | source (commit) | provenance | sha256 (config.json) |",
        "|---|---|---|---|---|---|",
    ]
    for c in configs:
        f = c["files"]["config.json"]
        extra = [n for n in c["files"] if n != "config.json"]
        src = f"[{c['repository']}]({f['url']}) `{f['source_path']}` ({f['commit'][:10]})"
        spelling = c["spelling"] + (f"; also {', '.join(extra)}" if extra else "")
        notes = f" ({c['notes']})" if c.get("notes") else ""
        lines.append(f"| {c['name']} | {c['family']} | {spelling}{notes} | {src} | {c['provenance']} | "
                     f"`{f['sha256'][:16]}` |")
    return "\n".join(lines) + "\n"


def main() -> int:
    configs = load()
    bad = stale_files(configs)
    if bad:
        print(f"files differ from their recorded sha256: {bad}", file=sys.stderr)
        return 1
    (SUITE / "cases.json").write_text(render_cases(configs))
    (SUITE / "PROVENANCE.md").write_text(render_provenance(configs))
    n_cases = len(json.loads(render_cases(configs))["cases"])
    print(f"{len(configs)} configs, {n_cases} cases", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
