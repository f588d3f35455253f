#!/usr/bin/env python3
"""Measure kvplan against the architecture oracle's answers; write the coverage data and docs.

    PYTHONPATH=. python scripts/oracle/coverage.py            # kvplan's own interpreter, no vLLM

For every architecture of vLLM 0.33.0's text-generation and multimodal registries, every case of
tests/data/vllm_oracle_arch/cases.json is planned by kvplan and diffed with vLLM's answer
(tests/planner/arch_parity.py). An architecture is *verified* when vLLM answered at least one of
its cases and kvplan is exact on all of them. Writes:
  * kvplan/data/vllm_arch_coverage.json  (architecture -> status; kvplan reads it: an architecture
    that is not verified plans with finding KV604),
  * docs/architectures.md                 (the table, with why the rest are not verified),
  * the coverage sentence in README.md    (between the `arch-coverage` markers).
`tests/planner/test_vllm_arch_parity.py` fails when any of the three is out of date.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

REG = ROOT / "kvplan" / "data" / "vllm_architectures.json"
OUT = ROOT / "kvplan" / "data" / "vllm_arch_coverage.json"
DOC = ROOT / "docs" / "architectures.md"
README = ROOT / "README.md"
MARK = re.compile(r"(<!-- arch-coverage -->)(.*?)(<!-- /arch-coverage -->)", re.S)


def measure() -> dict:
    from tests.planner.arch_parity import check_case, load_cases

    reg = json.loads(REG.read_text())
    cases = load_cases()
    no_config = json.loads((ROOT / "tests/data/vllm_oracle_arch/cases.json").read_text())["no_config"]
    by_arch: dict[str, list[dict]] = {}
    for c in cases:
        by_arch.setdefault(c["name"].split("__")[0], []).append(c)
    out: dict[str, dict] = {}
    # The 251 text/multimodal architectures, plus any other architecture the cases exercise
    # (Transformers-backend ones such as SmolLM3ForCausalLM, registry-refused ones vLLM builds).
    every = dict(reg["architectures"])
    for arch in by_arch:
        if arch not in every:
            every[arch] = {"category": "refused" if arch in reg["refused"] else "other"}
    for arch, entry in sorted(every.items()):
        cs = by_arch.get(arch, [])
        if not cs:
            out[arch] = {"category": entry["category"], "status": "no-config",
                         "why": no_config.get(arch, "no case")}
            continue
        results = [(c["name"], *check_case(c)) for c in cs]
        answered = [r for r in results if r[1] in ("exact", "mismatch", "kvplan-refuses", "refused-ok")]
        # Cases vLLM could not build on the CPU oracle (an incomplete default config) have no
        # answer to compare with; the architecture is verified on the answered ones, all exact.
        if answered and all(r[1] in ("exact", "refused-ok") for r in answered):
            keys: set[str] = set()
            for c in (c for c in cs if c["name"] in {r[0] for r in answered}):
                cfg = json.loads((ROOT / "tests/data/vllm_oracle_arch" / c["config"]).read_text())
                keys |= set(cfg) | set(cfg.get("text_config") or {})
            refused_only = all(r[1] == "refused-ok" for r in answered)
            out[arch] = {"category": entry["category"],
                         "status": "refused, as vLLM refuses it" if refused_only else "verified",
                         "cases": sorted(r[0] for r in answered), "keys": sorted(keys),
                         "unanswered": sorted(r[0] for r in results if r not in answered)}
            continue
        bad = [r for r in results if r[1] not in ("exact", "refused-ok")]
        name, status, details = bad[0]
        details = [d.replace(str(ROOT) + "/", "") for d in details]  # no machine paths in the data
        out[arch] = {"category": entry["category"], "status": status, "case": name,
                     "why": "; ".join(details[:3])[:300]}
    return out


def measure_refused() -> dict:
    """What vLLM 0.33 does with the architectures its registry lists as no longer supported, and with
    the ones outside its registry (which only its Transformers-backend fallback can build)."""
    from tests.planner.arch_parity import load_answer, load_cases

    reg = json.loads(REG.read_text())
    out: dict[str, dict] = {}
    for c in load_cases():
        arch = c["name"].split("__")[0]
        if arch not in reg["refused"] and arch in reg["architectures"]:
            continue  # in-tree: vLLM's own model class (architectures outside its registry: the fallback)
        a = load_answer(c["name"])
        if a is None:
            continue
        if a["error"] is None:
            how = a["engine"].get("model_class", "")
            out[arch] = {"vllm": "builds", "how": how,
                         "pooling": any(w in how for w in ("Embedding", "Classification", "Pooling", "Reward")),
                         "kv_cache": any(rec.get("specs") for rec in a["layers"])}
        elif "Can't load" in a["error"]["message"]:
            out[arch] = {"vllm": "unknown", "reason": "the oracle lacks the processor files to build it"}
        else:
            msg = a["error"]["message"]
            detail = [ln for ln in a["error"]["traceback_tail"] if "Value error," in ln]
            if detail:
                msg = detail[0].split("Value error,", 1)[1].split(" [type=")[0].strip()
            out[arch] = {"vllm": "refused", "reason": f"{a['error']['type']}: {msg[:240]}"}
    return dict(sorted(out.items()))


def _doc(cov: dict, reg: dict) -> str:
    n_t = sum(1 for v in cov.values() if v["category"] == "text" and v["status"] == "verified")
    n_m = sum(1 for v in cov.values() if v["category"] == "multimodal" and v["status"] == "verified")
    lines = [
        "# Architecture coverage against vLLM " + reg["vllm_version"],
        "",
        "Generated by `scripts/oracle/coverage.py` from the answers of the architecture oracle",
        "(`scripts/oracle/arch_oracle.py`: vLLM's own model classes built on the meta device, every KV",
        "cache spec each layer registers). Do not edit by hand.",
        "",
        f"**{n_t} of {reg['counts']['text']} text-generation and {n_m} of {reg['counts']['multimodal']} "
        f"multimodal architectures verified exact against vLLM {reg['vllm_version']}** (per layer: "
        "kv_cache_dtype, quant mode, sliding window, KV heads, head sizes, bytes per token including "
        "indexer caches; on every checked-in case of the architecture that vLLM's model class built on the "
        "CPU oracle, under `--kv-cache-dtype auto` and `fp8`; cases it could not build are listed as "
        "`unanswered` in kvplan/data/vllm_arch_coverage.json).",
        "",
        "An architecture that is not verified still plans, with finding KV604 (`--strict`: an error).",
        "Architectures vLLM 0.33 refuses (no longer supported, or moved to a plugin) are refused with",
        "vLLM's reason (exit 2, one line), and so is every config vLLM refuses for a reason kvplan can see",
        "in config.json and the flags, as the release planned loads it (from 0.18: its own config classes and the",
        "transformers release its users get, kvplan/data/vllm/model_types.json; docs/releases.md):",
        "",
        "- a `model_type` neither transformers nor vLLM's own config classes load, in a config without an",
        "  `auto_map`, whatever the architecture (\"The checkpoint you are trying to load has model type `X`",
        "  but Transformers does not recognize this architecture\"; e.g. a copy of a remote-code checkpoint's",
        "  config whose `auto_map` was left out);",
        "- an `architectures` entry that is not in vLLM's registry, names no model class transformers",
        "  exports, and that no `AutoModel*` entry of the `auto_map` names (\"Model architectures [...] are",
        "  not supported for now\": vLLM's Transformers backend has nothing to build);",
        "- a config whose `model_type` (or architecture) only the checkpoint's own code named in `auto_map`",
        "  provides, without `--trust-remote-code` (\"contains custom code which must be executed ...",
        "  trust_remote_code=True\"); pass the flag as the checkpoint's model card says.",
        "",
        "With `--trust-remote-code` and an `auto_map`, vLLM runs code kvplan cannot read: kvplan plans from",
        "config.json, and KV604 says so where the architecture is not verified.",
        "",
        "Configs as published (string or integer `sliding_window_pattern`, legacy DeepSeek-V4",
        "`compress_ratios`, nested `text_config`, quantized re-uploads, older and newer revisions) are",
        "checked against vLLM's answers in tests/data/published_configs (PROVENANCE.md there).",
        "",
        "| architecture | kind | status | why not verified |",
        "|---|---|---|---|",
    ]
    for arch, v in sorted(cov.items(), key=lambda kv: (kv[1]["status"] != "verified", kv[0])):
        why = v.get("why", "").replace("|", "\\|")
        lines.append(f"| {arch} | {v['category']} | {v['status']} | {why} |")
    lines.append("")
    lines.append("Statuses: `verified` exact on every case; `mismatch` kvplan differs from vLLM (first "
                 "difference shown); `kvplan-refuses` kvplan cannot read the config; `oracle-error` vLLM's "
                 "model class could not be built on the CPU oracle for the default config (no answer to "
                 "compare with); `no-config` no config can be built without the network (remote code whose "
                 "keys are not written out yet).")
    lines.append("")
    return "\n".join(lines)


def sentence(cov: dict, reg: dict) -> str:
    n_t = sum(1 for v in cov.values() if v["category"] == "text" and v["status"] == "verified")
    n_m = sum(1 for v in cov.values() if v["category"] == "multimodal" and v["status"] == "verified")
    rest = (n_t < reg["counts"]["text"]) or (n_m < reg["counts"]["multimodal"])
    where = ("lists the rest and why" if rest else
             "lists each one and the architectures vLLM refuses")
    return (f"{n_t} of {reg['counts']['text']} text-generation and {n_m} of {reg['counts']['multimodal']} "
            f"multimodal architectures verified exact against vLLM {reg['vllm_version']} "
            f"([docs/architectures.md](docs/architectures.md) {where}).")


def render(cov: dict, refused: dict) -> tuple[str, str, str]:
    reg = json.loads(REG.read_text())
    data = json.dumps({"kind": "kvplan.vllm_arch_coverage", "vllm_version": reg["vllm_version"],
                       "generated_by": "scripts/oracle/coverage.py", "architectures": cov,
                       "refused": refused},
                      indent=1, sort_keys=True) + "\n"
    readme = README.read_text()
    readme = MARK.sub(lambda m: m.group(1) + sentence(cov, reg) + m.group(3), readme)
    return data, _doc(cov, reg), readme


def main() -> int:
    cov = measure()
    data, doc, readme = render(cov, measure_refused())
    OUT.write_text(data)
    DOC.write_text(doc)
    README.write_text(readme)
    counts: dict[str, int] = {}
    for v in cov.values():
        counts[f"{v['category']}:{v['status']}"] = counts.get(f"{v['category']}:{v['status']}", 0) + 1
    print(json.dumps(counts, sort_keys=True), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
