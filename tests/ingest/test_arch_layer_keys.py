"""Per-layer geometry keys of architectures verified against vLLM 0.33's model classes (issue 21).

The parity test (tests/planner/test_vllm_arch_parity.py) diffs whole plans against vLLM's answers;
these tests pin the rules behind them, and the one-line refusals of configs vLLM cannot build.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import kvplan.api
from kvplan.errors import KvplanInputError
from kvplan.ingest import architectures as vreg
from kvplan.ingest.checkpoint import load_model_inputs
from tests.conftest import CORPUS, ROOT
from tests.planner.arch_parity import oracle_config

CONFIGS = ROOT / "tests" / "data" / "vllm_oracle_arch" / "configs"


def _cfg(tmp_path: Path, name: str, **over) -> Path:
    """The oracle's config as kvplan reads the oracle's input (a remote-code model_type's auto_map
    named), with keys replaced; planned with --trust-remote-code, as the oracle ran it."""
    p = oracle_config(name, tmp_path)
    cfg = json.loads(p.read_text())
    cfg.update(over)
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return p


def _layers(path: Path, flags: str = "--trust-remote-code --kv-cache-dtype auto"):
    return kvplan.api.compile(path, flags).layers


def _cli_plan(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from kvplan.cli.main import main; main()", "plan", str(path),
                           "--trust-remote-code"],
                          capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "NO_COLOR": "1"})


def test_dots3_note_sliding_and_sparse_layers(tmp_path: Path) -> None:
    """Sliding layers: MLA of the swa_* geometry with window sliding_window_size; full layers: sparse MLA
    whose rows vLLM pads to the sliding rows, plus the uint8 indexer cache (128 + 4 bytes)."""
    layers = _layers(_cfg(tmp_path, "Dots3NoteForCausalLM__wide-swa-rows"))
    full = [lp.index for lp in layers if lp.sliding_window is None]
    assert full == [0, 5]
    for lp in layers:
        assert lp.kind == "mla" and lp.head_size == 640 + 64
        if lp.index in full:
            assert lp.bytes_per_token == 2 * 704 + 132
        else:
            assert (lp.sliding_window, lp.bytes_per_token) == (128, 2 * 704)


def test_dots3_note_bad_keys_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(KvplanInputError, match="sliding_window_size"):
        kvplan.api.compile(_cfg(tmp_path, "Dots3NoteForCausalLM__default", sliding_window_size=None))
    with pytest.raises(KvplanInputError, match="cannot pad its rows"):
        kvplan.api.compile(_cfg(tmp_path, "Dots3NoteForCausalLM__default", swa_kv_lora_rank=256))
    r = _cli_plan(_cfg(tmp_path, "Dots3NoteForCausalLM__default", swa_kv_lora_rank=-1))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "swa_kv_lora_rank" in r.stderr


def test_plamo3_window_per_layer(tmp_path: Path) -> None:
    """vLLM's PLaMo 3 passes interleaved_sliding_window[i] as layer i's window (null: full attention)."""
    layers = _layers(_cfg(tmp_path, "Plamo3ForCausalLM__per-layer-windows"))
    assert [lp.sliding_window for lp in layers] == [512, 1024, 4096, None, 512, 1024, 4096, None]
    assert [lp.kind for lp in layers][:4] == ["sliding_attention"] * 3 + ["full_attention"]
    r = _cli_plan(_cfg(tmp_path, "Plamo3ForCausalLM__default", interleaved_sliding_window=[2048, None]))
    assert r.returncode == 2 and "interleaved_sliding_window" in r.stderr and "Traceback" not in r.stderr


def test_domyn_edge_windows_and_head_sizes_per_layer(tmp_path: Path) -> None:
    """window_sizes[i][0] + 1 tokens (vLLM's layer includes the current one), 0 = full attention; head sizes
    from per_layer_config (transformers' heterogeneous-config overrides of head_dim)."""
    layers = _layers(_cfg(tmp_path, "DomynEdgeForCausalLM__mixed-windows"))
    assert [lp.sliding_window for lp in layers] == [None, 257, 4097, None, 129, 129, None, 2049]
    assert [lp.head_size for lp in layers] == [64, 128, 128, 256, 128, 128, 192, 128]
    with pytest.raises(KvplanInputError, match="window_sizes"):
        kvplan.api.compile(_cfg(tmp_path, "DomynEdgeForCausalLM__default", window_sizes=[[1024, 0]] * 8 + [["x"]]))


def test_transformers_backend_keeps_the_configs_window(tmp_path: Path) -> None:
    """Aya Vision (Cohere 2 language model) runs only through vLLM's Transformers backend, which passes the
    config's window as is; vLLM's own Cohere 2 class sees window + 1."""
    assert vreg.transformers_backend("AyaVisionForConditionalGeneration")
    aya = _layers(CONFIGS / "AyaVisionForConditionalGeneration__default.json")
    assert {lp.sliding_window for lp in aya if lp.kind == "sliding_attention"} == {4096}
    assert not vreg.transformers_backend("Cohere2ForCausalLM")
    cohere2 = _layers(CONFIGS / "Cohere2ForCausalLM__default.json")
    assert {lp.sliding_window for lp in cohere2 if lp.kind == "sliding_attention"} == {4097}


def test_transformers_backend_mllama_cross_layers_hold_per_token_kv() -> None:
    plan = kvplan.api.compile(CORPUS / "Llama-3.2-90B-Vision-Instruct" / "config.json", "--kv-cache-dtype auto")
    cross = [plan.layers[i] for i in range(3, 100, 5)]
    assert all(lp.kind == "full_attention" and lp.bytes_per_token == 4096 for lp in cross)


def test_unregistered_architecture_vllm_cannot_build_is_refused(tmp_path: Path) -> None:
    """T5 is not in vLLM 0.33's registry; its Transformers-backend fallback fails to build it."""
    assert "Transformers-backend fallback fails" in (vreg.refusal("T5ForConditionalGeneration") or "")
    assert vreg.refusal("SmolLM3ForCausalLM") is None  # outside the registry, built by the fallback
    r = _cli_plan(CORPUS / "t5-small-summarization-finetune" / "config.json")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "refuses architecture T5ForConditionalGeneration" in r.stderr


def test_integral_float_max_position_embeddings(tmp_path: Path) -> None:
    """transformers' MusicFlamingoConfig writes max_position_embeddings as 1200.0 at the top level."""
    plan = kvplan.api.compile(CONFIGS / "MusicFlamingoForConditionalGeneration__default.json")
    assert plan.model.architecture == "MusicFlamingoForConditionalGeneration"
    # The top-level value is nobody's to read (MusicFlamingoConfig overwrites it from rope_theta, the
    # language model's length is text_config's): whatever it holds is no input error.
    top = load_model_inputs(_cfg(tmp_path, "MusicFlamingoForConditionalGeneration__default",
                                 max_position_embeddings=1200.5)).arch
    assert top.max_position_embeddings == 32768
    # The one kvplan reads keeps its type check.
    cfg = json.loads((CONFIGS / "MusicFlamingoForConditionalGeneration__default.json").read_text())
    with pytest.raises(KvplanInputError, match=r"text_config\.max_position_embeddings must be an integer"):
        kvplan.api.compile(_cfg(tmp_path, "MusicFlamingoForConditionalGeneration__default",
                                text_config={**cfg["text_config"], "max_position_embeddings": 1200.5}))


def test_cohere_asr_decoder_and_cross_attention(tmp_path: Path) -> None:
    """Cohere Transcribe: the decoder geometry under transf_decoder.config_dict (every head a KV head); each
    decoder layer also caches cross-attention K/V for the longest clip's encoder tokens: 35 s at a 10 ms hop
    is 3500 mel frames, over subsampling_factor 8: 438 tokens."""
    plan = kvplan.api.compile(CONFIGS / "CohereAsrForConditionalGeneration__decoder-16-heads.json",
                              "--kv-cache-dtype auto")
    assert [(lp.num_kv_heads, lp.head_size) for lp in plan.layers] == [(16, 64)] * 4
    assert all(lp.cross_attention_bytes_per_token == 16 * 64 * 2 * 2 for lp in plan.layers)
    arch = load_model_inputs(CONFIGS / "CohereAsrForConditionalGeneration__decoder-16-heads.json").arch
    assert all(la.cross_attention_tokens == 438 for la in arch.layers)
    p = tmp_path / "config.json"
    cfg = json.loads((CONFIGS / "CohereAsrForConditionalGeneration__default.json").read_text())
    del cfg["preprocessor"]["window_stride"]
    p.write_text(json.dumps(cfg))
    r = _cli_plan(p)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "window_stride" in r.stderr
