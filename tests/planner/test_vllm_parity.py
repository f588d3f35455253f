"""Differential test: kvplan's per-layer decisions equal those of the vLLM release it plans for.

tests/data/vllm_oracle holds what vLLM 0.33.0 itself decided (its real model classes built on
the meta device) for every corpus model under six flag sets; tests/data/vllm_oracle_releases/<version>
holds the same answers from other releases (scripts/oracle/release_oracle.sh, compared fields only),
planned here with `--engine vllm==<version>`. Where vLLM rejected the configuration because of the
KV cache or the flags, kvplan must report an error finding or refuse the input.
"""
from __future__ import annotations

import json

import pytest

import kvplan.api
from kvplan.errors import KvplanInputError
from kvplan.model.vocab import NO_KV_KINDS
from tests.conftest import CASES, CORPUS, DATA, MODELS, ORACLE, REFUSED_MODELS

PARAMS = [(m, c) for m in MODELS for c in CASES if (ORACLE / f"{m}__{c}.json").is_file()]
RELEASES = DATA / "vllm_oracle_releases"


def _load(p):
    return json.loads(p.read_text()) if p.is_file() else None


@pytest.mark.parametrize("model,case", PARAMS, ids=[f"{m}-{c}" for m, c in PARAMS])
def test_vllm_parity_per_layer(model: str, case: str) -> None:
    o = _load(ORACLE / f"{model}__{case}.json")
    err = o.get("error")
    if err and "architectures" in err["message"] and "inspected" in err["message"]:
        pytest.skip("vLLM could not inspect this architecture on the CPU (no answer recorded)")
    plan = kvplan.api.compile(CORPUS / model / "config.json", CASES[case])
    if err:
        assert "kv_cache_dtype" in err["message"]
        assert any(f.severity.value == "error" for f in plan.findings), "vLLM rejects this; kvplan must say so"
        return
    geo = _load(ORACLE / f"{model}__geometry.json") or {}
    _assert_layers(plan, o, {layer["index"]: layer for layer in geo.get("layers", [])})


def _assert_layers(plan, o: dict, geo_layers: dict[int, dict]) -> None:
    """Layer by layer: dtype, quant mode, and (from the real model class) window and geometry."""
    want_layers = {layer["index"]: layer for layer in o["layers"]}
    assert plan.model.dtype == o["engine"]["model_dtype"]
    for lp in plan.layers:
        ol = want_layers.get(lp.index)
        if ol is None:
            assert lp.kind in NO_KV_KINDS, f"L{lp.index}: kvplan plans KV where vLLM builds no attention"
            continue
        assert lp.kv_cache_dtype == ol["kv_cache_dtype"], f"L{lp.index} kv_cache_dtype"
        assert lp.quant_mode.value == ol["kv_quant_mode"].lower(), f"L{lp.index} quant_mode"
        g = geo_layers.get(lp.index) if o["mode"] == "attention" else ol
        if g is not None and lp.kind != "mla":
            assert lp.sliding_window == g["sliding_window"], f"L{lp.index} sliding_window"
            assert (lp.num_kv_heads, lp.head_size) == (g["num_kv_heads"], g["head_size"]), f"L{lp.index} geometry"
    assert sorted(want_layers) == sorted(lp.index for lp in plan.layers if lp.index in want_layers)


def _expand(answer: dict) -> dict:
    """A compact release answer (runs of equal layers) in the per-layer shape of the 0.33 answers."""
    fields = ("kv_cache_dtype", "kv_quant_mode", "sliding_window", "num_kv_heads", "head_size")
    layers = [{"index": i, **dict(zip(fields, run[2:], strict=True))}
              for run in answer["layers"] for i in range(run[0], run[1] + 1)]
    return {"mode": answer["mode"], "engine": {"model_dtype": answer["model_dtype"]}, "layers": layers,
            "error": answer["error"]}


# vLLM errors that are the oracle machine's, not the release's answer (no plan is compared): model
# classes that cannot be inspected or processors that cannot load on the CPU, and an older release's config
# code tripping on the oracle's newer transformers (5.20.2: "'head_dim' is a per-layer attribute", Gemma 4
# under 0.18, which requires transformers < 5, and 0.22, which predates that transformers API).
_ORACLE_LIMITS = ("failed to be inspected", "Can't load image processor", "the oracle child wrote no answer",
                  "is a per-layer attribute")


def _release_params() -> list[tuple[str, str, str]]:
    out = []
    for vdir in sorted(RELEASES.iterdir()) if RELEASES.is_dir() else ():
        for m in MODELS:
            doc = _load(vdir / f"{m}.json")
            out += [(vdir.name, m, c) for c in sorted(doc["cases"]) if c in CASES] if doc else []
    return out


RELEASE_PARAMS = _release_params()


@pytest.mark.parametrize("version,model,case", RELEASE_PARAMS, ids=["-".join(p) for p in RELEASE_PARAMS])
def test_vllm_release_parity_per_layer(version: str, model: str, case: str) -> None:
    """The plan for `--engine vllm==<version>` equals what that release's own code decided."""
    doc = _load(RELEASES / version / f"{model}.json")
    assert doc["vllm_version"] == version
    o = _expand(doc["cases"][case])
    err = o["error"]
    if err and any(s in err["message"] for s in _ORACLE_LIMITS):
        pytest.skip(f"the oracle could not run vLLM {version} here: {err['message'][:80]}")
    engine = f"vllm=={version}"
    if err:
        # vLLM refuses the launch (a KV dtype or option the release lacks, a dtype clash): so must kvplan.
        try:
            plan = kvplan.api.compile(CORPUS / model / "config.json", CASES[case], engine=engine)
        except KvplanInputError:
            return
        assert any(f.severity.value == "error" for f in plan.findings), f"vLLM {version} refuses: {err['message']}"
        return
    plan = _compile_as_the_oracle_loaded(model, CASES[case], engine)
    geo = doc["cases"].get("geometry")
    geo_layers = {layer["index"]: layer for layer in _expand(geo)["layers"]} if geo else {}
    _assert_layers(plan, o, geo_layers)


def _compile_as_the_oracle_loaded(model: str, flags: list[str], engine: str):
    """The oracle ran every release with the 0.33 venv's transformers (5.20.2); a release whose requirement
    allows only an older one (0.18: < 5) cannot load a model type added since without the checkpoint's own
    config class (auto_map, --trust-remote-code), which kvplan says. The checkpoint's config class then
    loads the same config.json: plan it so, to compare the layers the oracle built."""
    try:
        return kvplan.api.compile(CORPUS / model / "config.json", flags, engine=engine)
    except KvplanInputError as e:
        if "without --trust-remote-code" not in str(e) or "unknown to transformers" not in str(e):
            raise
        return kvplan.api.compile(CORPUS / model / "config.json", [*flags, "--trust-remote-code"], engine=engine)


@pytest.mark.parametrize("model", REFUSED_MODELS)
def test_corpus_model_vllm_refuses_is_refused(model: str) -> None:
    """T5: vLLM 0.33's registry does not list it and its Transformers-backend fallback fails to build it
    (the architecture oracle's answer; the answers above built bare Attention layers instead of the model
    class). kvplan refuses it under every flag set, with vLLM's reason."""
    for flags in CASES.values():
        with pytest.raises(KvplanInputError, match=r"refuses architecture .*Transformers-backend fallback fails"):
            kvplan.api.compile(CORPUS / model / "config.json", flags)


def test_oracle_verified_releases_are_the_answered_ones() -> None:
    """KV009 calls a release's per-layer decisions verified only where that release answered the corpus here."""
    from kvplan.backends.vllm_rows import ORACLE_VERIFIED_RELEASES
    answered = {p.name for p in RELEASES.iterdir() if any(p.glob("*.json"))}
    assert set(ORACLE_VERIFIED_RELEASES) == answered
