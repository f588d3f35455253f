"""Compare a kvplan plan with what vLLM 0.33.0 registered for the same config and flags.

The answers in tests/data/vllm_oracle_arch/answers come from scripts/oracle/arch_oracle.py (vLLM's
own model classes built on the meta device, every KV cache spec of every layer). This module is
shared by the parity test and by scripts/oracle/coverage.py (which writes the coverage data).
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

ARCH_DATA = Path(__file__).resolve().parents[1] / "data" / "vllm_oracle_arch"
_ATTN_SPECS = ("FullAttentionSpec", "SlidingWindowSpec", "MLAAttentionSpec", "ChunkedLocalAttentionSpec",
               "CrossAttentionSpec", "SinkFullAttentionSpec", "SlidingWindowMLASpec", "RSWASpec",
               "CircularBufferSpec", "EncoderOnlyAttentionSpec")


def load_cases(data: Path = ARCH_DATA) -> list[dict[str, Any]]:
    return json.loads((data / "cases.json").read_text())["cases"]


def load_answer(name: str, data: Path = ARCH_DATA) -> dict[str, Any] | None:
    p = data / "answers" / f"{name}.json"
    return json.loads(p.read_text()) if p.is_file() else None


def case_input(case: dict[str, Any], data: Path, tmp: Path) -> Path:
    """The config the case's answer is for, as kvplan reads it: the stored one, or a copy in `tmp`.

    The copy leaves out the case's `drop_keys` but `auto_map` (arch_oracle.py patch 40; without
    hf_quant_config.json when the weight quantization is dropped). Where the oracle stood in for the
    checkpoint's own config class (patch 3: every case whose model_type neither transformers nor
    vLLM's config classes load, but a published config without auto_map, `as_published`: patch 41)
    and the config names none, the copy's auto_map names that stand-in:
    vLLM loads such a config only through the config class an auto_map names, under
    --trust-remote-code (`flags_of`), which is what the oracle's answer is for."""
    from kvplan.ingest.architectures import modelled_release

    cfg = data / case["config"]
    drop = [k for k in case.get("drop_keys") or () if k != "auto_map"]
    if cfg.name == "params.json":  # Mistral format: vLLM's own parser, no auto_map
        return cfg
    doc = json.loads(cfg.read_text())
    mt = doc.get("model_type")
    stand_in = mt if (isinstance(mt, str) and not modelled_release().loads_model_type(mt)
                      and not case.get("as_published")) else None
    if not (drop or stand_in):
        return cfg
    for d in (doc, *(v for k, v in doc.items() if k.endswith("_config") and isinstance(v, dict))):
        for key in drop:
            d.pop(key, None)
    if stand_in and not isinstance(doc.get("auto_map"), dict):
        doc["auto_map"] = {"AutoConfig": f"arch_oracle.Oracle_{stand_in}_Config"}
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "config.json").write_text(json.dumps(doc))
    quant = cfg.parent / "hf_quant_config.json"
    if quant.is_file() and "quantization_config" not in drop:
        (tmp / "hf_quant_config.json").write_bytes(quant.read_bytes())
    return tmp / "config.json"


def oracle_config(name: str, tmp: Path) -> Path:
    """tests/data/vllm_oracle_arch/configs/<name>.json as kvplan reads the oracle's input (`case_input`);
    plan it with --trust-remote-code, as the oracle ran it."""
    return case_input({"config": f"configs/{name}.json"}, ARCH_DATA, tmp)


def refused_by_vllm(answer: dict[str, Any], arch: str | None = None) -> bool:
    """vLLM refuses the config (a model_type nothing loads) or the architecture: its registry says so,
    or (for an architecture the registry lists as no longer supported, or does not list at all) its
    Transformers-backend fallback fails to build it. `arch`: the case's architecture (default: the
    case name's first part)."""
    from kvplan.ingest.architectures import registry

    err = answer.get("error") or {}
    msg = err.get("message", "") + " ".join(err.get("traceback_tail", []))
    if ("not supported for now" in msg or "not supported anymore" in msg or "in-tree anymore" in msg
            or "Transformers does not recognize this architecture" in msg):  # a model_type nothing loads
        return True
    arch = arch or answer["case"].split("__")[0]
    fallback_only = arch in registry()["refused"] or arch not in registry()["architectures"]
    return bool(err) and fallback_only and "Can't load" not in msg


def oracle_layers(answer: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Per decoder-layer index: the main attention layer record and the bytes of every KV cache."""
    out: dict[int, dict[str, Any]] = {}
    specless: dict[int, dict[str, Any]] = {}
    for rec in answer["layers"]:
        specs = [s for s in rec.get("specs", []) if s["type"] in _ATTN_SPECS]
        if rec["index"] is not None and not rec.get("specs") and rec.get("kv_cache_dtype") is not None:
            # An attention layer whose caches its sub-modules register (DeepSeek-V4.1 layers that read
            # another layer's compressed cache keep only their sliding-window cache): its dtype decision.
            specless.setdefault(rec["index"], rec)
        if rec["index"] is None or not specs:
            continue
        if specs[0]["type"] == "EncoderOnlyAttentionSpec":
            continue
        slot = out.setdefault(rec["index"], {"main": None, "bytes": 0, "extra": [], "shared": False,
                                             "cross": None})
        shared = rec.get("kv_sharing_target_layer_name") is not None
        if specs[0]["type"] == "CrossAttentionSpec" and rec.get("kv_cache_dtype") is not None:
            slot["cross"] = rec  # compared on its own; the main record is the self-attention one if any
        if rec.get("kv_cache_dtype") is not None and slot["main"] is None:
            slot["main"] = rec
            slot["shared"] = shared
        else:
            slot["extra"].append(rec)
        if not shared:
            slot["bytes"] += sum(s["bytes_per_token"] for s in specs)
    for i, slot in out.items():
        if slot["main"] is None and i in specless:
            slot["main"] = specless[i]
    for slot in out.values():
        # A decoder layer with self- and cross-attention (Whisper): its main record is the self-attention
        # cache (per decoded token), the cross-attention cache (per encoder token) is compared apart.
        selfs = [r for r in slot["extra"] if r.get("kv_cache_dtype") is not None
                 and r["specs"][0]["type"] != "CrossAttentionSpec"]
        if slot["main"] is slot["cross"] and slot["cross"] is not None and selfs:
            slot["extra"] = [r for r in slot["extra"] if r is not selfs[0]] + [slot["main"]]
            slot["main"] = selfs[0]
        elif slot["main"] is slot["cross"]:
            slot["cross"] = None  # a cross-attention layer of its own (kvplan kind cross_attention)
    return out


def compare(plan: Any, answer: dict[str, Any]) -> list[str]:
    """Differences between a kvplan Plan and an oracle answer (empty when exact)."""
    from kvplan.model.vocab import NO_KV_KINDS

    diffs: list[str] = []
    want = oracle_layers(answer)
    if plan.model.dtype != answer["engine"]["model_dtype"]:
        diffs.append(f"model dtype {plan.model.dtype} != vLLM {answer['engine']['model_dtype']}")
    have = {lp.index: lp for lp in plan.layers if lp.kind not in NO_KV_KINDS}
    for i in sorted(set(want) | set(have)):
        w, lp = want.get(i), have.get(i)
        if w is None:
            diffs.append(f"L{i}: kvplan plans a {lp.kind} KV cache, vLLM builds none")
            continue
        if lp is None:
            diffs.append(f"L{i}: vLLM builds a KV cache, kvplan plans none")
            continue
        m = w["main"]
        if m is None:
            diffs.append(f"L{i}: vLLM registers only caches without a kv_cache_dtype")
            continue
        # A spec-less main record: the layer's geometry is its first cache's (its sliding window its own).
        spec = m["specs"][0] if m["specs"] else {**w["extra"][0]["specs"][0], "sliding_window": None}
        target = m.get("kv_sharing_target_layer_name")
        target_index = int(target.split(".layers.")[1].split(".")[0]) if target else None
        if getattr(lp, "kv_shared_with", None) != target_index:
            diffs.append(f"L{i}: reads the KV cache of layer {lp.kv_shared_with} != vLLM {target_index}")
        if lp.kv_cache_dtype != m["kv_cache_dtype"]:
            diffs.append(f"L{i}: kv_cache_dtype {lp.kv_cache_dtype} != vLLM {m['kv_cache_dtype']}")
        if lp.quant_mode.value != (m["kv_quant_mode"] or "none").lower():
            diffs.append(f"L{i}: quant_mode {lp.quant_mode.value} != vLLM {m['kv_quant_mode']}")
        sw = m["sliding_window"] if m["sliding_window"] is not None else spec.get("sliding_window")
        if lp.sliding_window != sw:
            diffs.append(f"L{i}: sliding_window {lp.sliding_window} != vLLM {sw}")
        chunk = spec.get("attention_chunk_size")
        if spec["type"] == "ChunkedLocalAttentionSpec" and lp.attention_chunk_size != chunk:
            diffs.append(f"L{i}: attention_chunk_size {lp.attention_chunk_size} != vLLM {chunk}")
        if (spec["type"] == "CrossAttentionSpec") != (lp.kind == "cross_attention"):
            diffs.append(f"L{i}: kind {lp.kind} vs vLLM {spec['type']}")
        if (spec["type"] in ("MLAAttentionSpec", "SlidingWindowMLASpec")) != (lp.kind == "mla"):
            diffs.append(f"L{i}: kind {lp.kind} vs vLLM {spec['type']}")
        if lp.kind != "mla" and (lp.num_kv_heads, lp.head_size) != (spec["num_kv_heads"], spec["head_size"]):
            diffs.append(f"L{i}: kv heads/head size {lp.num_kv_heads}/{lp.head_size} != vLLM "
                         f"{spec['num_kv_heads']}/{spec['head_size']}")
        if lp.kind != "mla" and lp.head_size_v != spec.get("head_size_v", spec["head_size"]):
            diffs.append(f"L{i}: value head size {lp.head_size_v} != vLLM {spec.get('head_size_v')}")
        cross = w.get("cross")
        cross_bytes = getattr(lp, "cross_attention_bytes_per_token", None)
        if cross is not None:
            cspec = cross["specs"][0]
            if cross_bytes != cspec["bytes_per_token"]:
                diffs.append(f"L{i}: cross-attention bytes/encoder token {cross_bytes} != vLLM "
                             f"{cspec['bytes_per_token']}")
            if lp.kv_cache_dtype != cross["kv_cache_dtype"]:
                diffs.append(f"L{i}: cross-attention kv_cache_dtype {lp.kv_cache_dtype} != vLLM "
                             f"{cross['kv_cache_dtype']}")
            if (lp.num_kv_heads, lp.head_size) != (cspec["num_kv_heads"], cspec["head_size"]):
                diffs.append(f"L{i}: cross-attention kv heads/head size != vLLM "
                             f"{cspec['num_kv_heads']}/{cspec['head_size']}")
        elif cross_bytes is not None:
            diffs.append(f"L{i}: kvplan plans a cross-attention cache, vLLM builds none")
        exact = getattr(lp, "bytes_per_token_exact", None)
        mine = exact if exact is not None else lp.bytes_per_token
        if lp.kind != "cross_attention" and mine + (cross_bytes or 0) != w["bytes"]:
            diffs.append(f"L{i}: bytes/token {mine} != vLLM {w['bytes']}"
                         + (f" (+{len(w['extra'])} extra cache(s))" if w["extra"] else ""))
    return diffs


def flags_of(case: dict[str, Any]) -> list[str]:
    """The case's serving flags; --trust-remote-code as the oracle runs every case (arch_oracle.py)."""
    out = ["--trust-remote-code", "--kv-cache-dtype", case.get("kv_cache_dtype", "auto")]
    if case.get("skip_layers"):
        out += ["--kv-cache-dtype-skip-layers", *case["skip_layers"]]
    return out


def check_case(case: dict[str, Any], data: Path = ARCH_DATA, tmp: Path | None = None) -> tuple[str, list[str]]:
    """('exact' | 'mismatch' | 'refused-ok' | 'kvplan-refuses' | 'no-answer' | 'oracle-error', details).

    `data`: the suite (cases.json, answers/); `tmp`: where a case with `drop_keys` writes its input."""
    import kvplan.api
    from kvplan.errors import KvplanInputError

    answer = load_answer(case["name"], data)
    if answer is None:
        return "no-answer", []
    if tmp is None:
        with tempfile.TemporaryDirectory(prefix="kvplan-case-") as d:
            return check_case(case, data, Path(d))
    cfg = case_input(case, data, tmp)
    # Planned for the release that answered (its registry and config loading decide what is refused).
    engine = f"vllm=={answer['vllm_version']}" if answer.get("vllm_version") else None
    if answer.get("error"):
        arch = None if data == ARCH_DATA else (json.loads(cfg.read_text()).get("architectures") or [""])[0]
        if refused_by_vllm(answer, arch):
            try:
                kvplan.api.compile(cfg, flags_of(case), engine=engine)
            except KvplanInputError:
                return "refused-ok", []
            return "mismatch", ["vLLM refuses this architecture; kvplan plans it"]
        e = answer["error"]
        return "oracle-error", [f"{e['stage']}: {e['type']}: {e['message'][:200]}"]
    try:
        plan = kvplan.api.compile(cfg, flags_of(case), engine=engine)
    except KvplanInputError as e:
        return "kvplan-refuses", [str(e)[:300]]
    diffs = compare(plan, answer)
    return ("exact" if not diffs else "mismatch"), diffs
