#!/usr/bin/env python3
"""Ask one vLLM release what it decides for every corpus model, and store the compared fields.

Run by hand (never in CI) with an interpreter that imports that vLLM release on the CPU:

    VLLM_TARGET_DEVICE=cpu <venv>/bin/python scripts/oracle/release_corpus.py \
        --oracle-dir /tmp/oracle-0.34.0 --out tests/data/vllm_oracle_releases/0.34.0 \
        [--cases auto fp8 fp8-skip-sw int8pth] [--only MODEL ...]

`--oracle-dir` holds the team's single-case oracle (`vllm_oracle.py`, the script that answered
tests/data/vllm_oracle for 0.33.0) with this release's harness patch applied
(scripts/oracle/releases/vllm_oracle-<version>.patch; releases/README.md says what each does).
vLLM is imported once; every case then runs in a forked child (`vllm_oracle.main`, unchanged), so a
case costs its model build, not vLLM's ~8 s import, and no state leaks between cases.

Per model it runs the flag sets of tests/conftest.py CASES that the release knows (a kv dtype the
release lacks is vLLM's own "invalid choice" answer, recorded as an error), plus, where a run fell back
to bare Attention layers (a quantized checkpoint's model class cannot be built on the CPU),
`geometry`: the `auto` run on a copy without `quantization_config` (the real model class).
Multimodal wrappers whose class cannot be built on the CPU (TEXT_ONLY) are asked through their
`text_config` with the text architecture, as the 0.33 answers were.

Output: <out>/<model>.json, one per model, only the fields the parity test compares
(tests/planner/test_vllm_parity.py): per case the model dtype, the build mode, vLLM's error (stage,
type, first line) and the layers as runs of equal consecutive records
`[first_index, last_index, kv_cache_dtype, kv_quant_mode, sliding_window, num_kv_heads, head_size]`.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

CASES: dict[str, list[str]] = {
    "auto": ["--kv-cache-dtype", "auto"],
    "fp8": ["--kv-cache-dtype", "fp8"],
    "fp8-skip-sw": ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "sliding_window"],
    "fp8-skip-0-2": ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "0", "2"],
    "int8pth": ["--kv-cache-dtype", "int8_per_token_head"],
    "bf16": ["--kv-cache-dtype", "bfloat16"],
}
# Multimodal wrapper -> the text architecture its text_config is built with (0.33 answers: same).
TEXT_ONLY = {"Gemma3ForConditionalGeneration": "Gemma3ForCausalLM",
             "Gemma4ForConditionalGeneration": "Gemma4ForCausalLM",
             "Llama4ForConditionalGeneration": "Llama4ForCausalLM"}
FORMAT = 1


def text_only(cfg: dict) -> dict:
    """The wrapper's text_config as a config of its own (architecture, dtype, quantization kept)."""
    text = dict(cfg["text_config"])
    text["architectures"] = [TEXT_ONLY[cfg["architectures"][0]]]
    for k in ("torch_dtype", "dtype", "quantization_config"):
        if k in cfg and k not in text:
            text[k] = cfg[k]
    return text


def layer_runs(layers: list[dict]) -> list[list]:
    """Consecutive layers with equal compared fields, as [first, last, *fields]."""
    runs: list[list] = []
    for rec in layers:
        spec = rec.get("kv_cache_spec") or {}
        fields = [rec.get("kv_cache_dtype"), rec.get("kv_quant_mode"), rec.get("sliding_window"),
                  spec.get("num_kv_heads"), spec.get("head_size")]
        i = rec.get("index")
        if runs and runs[-1][1] is not None and i == runs[-1][1] + 1 and runs[-1][2:] == fields:
            runs[-1][1] = i
        else:
            runs.append([i, i, *fields])
    return runs


def scrub(text: str) -> str:
    """No machine-specific temporary paths in checked-in answers."""
    return re.sub(r"/tmp/[\w.-]*oracle-\w+", "<model dir>", text)


def compact(res: dict) -> dict:
    err = res.get("error")
    out: dict = {"mode": res.get("mode"),
                 "model_dtype": (res.get("engine") or {}).get("model_dtype"),
                 "error": None if not err else {"stage": err["stage"], "type": err["type"],
                                                "message": scrub(" ".join(str(err["message"]).split()))[:300]},
                 "layers": layer_runs(res.get("layers") or [])}
    return out


def fork_json(child) -> dict:
    """Run `child(out_path) -> exit code` in a forked child with stdout/stderr silenced; its JSON answer comes back
    through the file (a crash, or no answer written, is an oracle error record)."""
    fd, out = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    pid = os.fork()
    if pid == 0:  # child
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        rc = 4
        try:
            rc = child(out)
        except BaseException:
            rc = 4
        finally:
            os._exit(rc)
    os.waitpid(pid, 0)
    try:
        return json.loads(Path(out).read_text())
    except ValueError:
        return {"mode": None, "engine": None, "layers": [],
                "error": {"stage": "oracle", "type": "Crash", "message": "the oracle child wrote no answer"}}
    finally:
        os.unlink(out)


def run_forked(oracle, cfg_path: Path, flags: list[str]) -> dict:
    """One case in a forked child: vllm_oracle.main unchanged, its JSON through a file."""
    return fork_json(lambda out: oracle.main(["--config", str(cfg_path), *flags, "--out", out]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--oracle-dir", required=True, type=Path)
    ap.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parents[2] / "tests/data/corpus")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--cases", nargs="*", default=list(CASES))
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(args.oracle_dir))
    # The patched oracle first: its release patch may set up the platform before vLLM resolves it.
    oracle = importlib.import_module("vllm_oracle")
    for mod in ("vllm.config", "vllm.engine.arg_utils", "vllm.model_executor.model_loader.utils"):
        importlib.import_module(mod)  # imported once, before the children fork
    import vllm

    args.out.mkdir(parents=True, exist_ok=True)
    models = sorted(p.name for p in args.corpus.iterdir() if (p / "config.json").is_file())
    for model in models:
        if args.only and model not in args.only:
            continue
        cfg = json.loads((args.corpus / model / "config.json").read_text())
        notes = []
        if (cfg.get("architectures") or [""])[0] in TEXT_ONLY:
            cfg = text_only(cfg)
            notes.append("text-only copy (text_config with the text architecture)")
        answers: dict = {}
        with tempfile.TemporaryDirectory() as tmp:
            main_cfg = Path(tmp, "main", "config.json")
            geo_cfg = Path(tmp, "geometry", "config.json")
            for p, c in ((main_cfg, cfg), (geo_cfg, {k: v for k, v in cfg.items() if k != "quantization_config"})):
                p.parent.mkdir()
                p.write_text(json.dumps(c))
                side = args.corpus / model / "hf_quant_config.json"
                if side.is_file() and p is main_cfg:
                    (p.parent / "hf_quant_config.json").write_text(side.read_text())
            for case in args.cases:
                answers[case] = compact(run_forked(oracle, main_cfg, CASES[case]))
            if any(a["mode"] == "attention" for a in answers.values()):
                answers["geometry"] = compact(run_forked(oracle, geo_cfg, CASES["auto"]))
        doc = {"format": FORMAT, "vllm_version": vllm.__version__, "model": model, "notes": notes,
               "cases": answers}
        (args.out / f"{model}.json").write_text(dumps(doc))
        summary = ", ".join(f"{c}:{'err' if a['error'] else a['mode']}" for c, a in answers.items())
        print(f"{model}: {summary}", flush=True)
    return 0


def dumps(doc: dict) -> str:
    """Stable JSON, one layer run per line."""
    lines = ["{", f'"format": {doc["format"]},', f'"model": {json.dumps(doc["model"])},',
             f'"notes": {json.dumps(doc["notes"])},', f'"vllm_version": {json.dumps(doc["vllm_version"])},',
             '"cases": {']
    cases = []
    for name in sorted(doc["cases"]):
        a = doc["cases"][name]
        head = json.dumps({k: a[k] for k in ("error", "mode", "model_dtype")}, sort_keys=True)[:-1]
        runs = ",\n  ".join(json.dumps(r) for r in a["layers"])
        cases.append(f'{json.dumps(name)}: {head}, "layers": [' + (f"\n  {runs}]" if runs else "]") + "}")
    lines.append(",\n".join(cases))
    lines.append("}}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
