"""LayerLayout: plan contract, vLLM 0.33 byte formulas, exact allocation sizes."""
from __future__ import annotations

import subprocess
import sys

import pytest

from kvplan.runtime.layout import EXECUTED_QUANT_MODES, LayerLayout
from kvplan.runtime.tolerances import TOLERANCES, tolerance_for


def _layer(**kw):
    base = {"index": 3, "kind": "full_attention", "sliding_window": None, "num_kv_heads": 8,
            "head_size": 128, "kv_cache_dtype": "auto", "dtype": "bfloat16"}
    base.update(kw)
    return base


@pytest.mark.parametrize("kv_cache_dtype,dtype,mode,h,d,expected", [
    # vLLM 0.33 kv-rules table 7.1: Llama-3-8B (8x128) and gpt-oss (8x64)
    ("auto", "bfloat16", "none", 8, 128, 4096),
    ("bfloat16", "bfloat16", "none", 8, 128, 4096),
    ("float16", "float16", "none", 4, 128, 2048),
    ("auto", "float32", "none", 2, 64, 2 * 2 * 64 * 4),
    ("fp8", "uint8", "fp8_per_tensor", 8, 128, 2048),
    ("fp8_e4m3", "float8_e4m3fn", "fp8_per_tensor", 8, 128, 2048),
    ("fp8_e5m2", "float8_e5m2", "fp8_per_tensor", 8, 64, 1024),
    ("int8_per_token_head", "int8", "int8_per_token_head", 8, 128, 2112),
    ("fp8_per_token_head", "uint8", "fp8_per_token_head", 8, 128, 2112),
    ("int8_per_token_head", "int8", "int8_per_token_head", 8, 64, 1088),
    ("int8_per_token_head", "int8", "int8_per_token_head", 4, 128, 1056),
    ("int4_per_token_head", "uint8", "int4_per_token_head", 8, 128, 1088),
    ("int4_per_token_head", "uint8", "int4_per_token_head", 8, 64, 576),
])
def test_layout_bytes_per_token_matches_vllm_formulas(kv_cache_dtype, dtype, mode, h, d, expected):
    lay = LayerLayout.from_plan_layer(_layer(kv_cache_dtype=kv_cache_dtype, dtype=dtype,
                                             quant_mode=mode, num_kv_heads=h, head_size=d,
                                             bytes_per_token=expected))
    assert lay.quant_mode == mode
    assert lay.bytes_per_token == expected
    assert lay.cache_nbytes(7, 16) == expected * 7 * 16


def test_layout_from_plan_layer_reads_fields():
    lay = LayerLayout.from_plan_layer(_layer(kind="sliding_attention", sliding_window=128,
                                             kv_cache_dtype="fp8_e5m2", dtype="uint8", index=5))
    assert (lay.index, lay.kind, lay.sliding_window) == (5, "sliding_attention", 128)
    assert lay.fp8_format == "e5m2" and lay.storage_dtype == "uint8"
    assert lay.physical_layout == "flash"
    assert LayerLayout.from_plan_layer(_layer(kv_cache_dtype="fp8", dtype="uint8")).fp8_format == "e4m3fn"
    with pytest.raises(ValueError, match="not an fp8 storage type"):
        LayerLayout.from_plan_layer(_layer(kv_cache_dtype="fp8", dtype="bfloat16"))
    pth = LayerLayout.from_plan_layer(_layer(kv_cache_dtype="int8_per_token_head", dtype="int8"))
    assert pth.physical_layout == "per_token_head" and pth.slot_bytes == 2 * 128 + 8
    assert pth.cache_shape(3, 16) == (3, 8, 16, 264)


@pytest.mark.parametrize("kv_cache_dtype", [
    "nvfp4", "nvfp4_4over6", "turboquant_k8v4", "turboquant_4bit_nc", "octave_k3v4",
    "ultraquant_4bit", "nvfp4_ds_mla", "fp8_ds_mla",
])
def test_layout_from_plan_layer_rejects_unexecuted_modes(kv_cache_dtype):
    with pytest.raises(ValueError, match=r"not executed|MLA"):
        LayerLayout.from_plan_layer(_layer(kv_cache_dtype=kv_cache_dtype, dtype="uint8"))


@pytest.mark.parametrize("kind", ["mla", "mamba", "linear_attention", "encoder_only", "bogus"])
def test_layout_from_plan_layer_rejects_kinds_without_attention_cache(kind):
    with pytest.raises(ValueError):
        LayerLayout.from_plan_layer(_layer(kind=kind))


def test_layout_from_plan_layer_checks_bytes_per_token():
    with pytest.raises(ValueError, match="bytes_per_token 2048 != runtime layout 2112"):
        LayerLayout.from_plan_layer(_layer(kv_cache_dtype="int8_per_token_head", dtype="int8",
                                           bytes_per_token=2048))


def test_layout_from_plan_layer_rejects_contradictions():
    with pytest.raises(ValueError, match="contradicts"):
        LayerLayout.from_plan_layer(_layer(kv_cache_dtype="fp8", dtype="uint8", quant_mode="none"))
    with pytest.raises(ValueError, match="contradicts"):
        LayerLayout.from_plan_layer(_layer(kv_cache_dtype="bfloat16", dtype="float16"))
    with pytest.raises(ValueError, match="needs the plan's 'dtype'"):
        LayerLayout.from_plan_layer(_layer(dtype=None))
    with pytest.raises(ValueError, match="head_size"):
        LayerLayout.from_plan_layer(_layer(head_size=100))
    with pytest.raises(ValueError, match="power-of-two"):
        LayerLayout.from_plan_layer(_layer(kv_cache_dtype="int4_per_token_head", dtype="uint8",
                                           head_size=96))
    with pytest.raises(ValueError, match="no 'num_kv_heads'"):
        LayerLayout.from_plan_layer({"kv_cache_dtype": "auto", "head_size": 64})


def test_tolerances_cover_every_executed_mode():
    assert set(TOLERANCES) == set(EXECUTED_QUANT_MODES)
    for mode in EXECUTED_QUANT_MODES:
        tol = tolerance_for(mode)
        assert 0 < tol.kernel_rel_err <= tol.quant_rel_err or mode == "none"
    with pytest.raises(KeyError, match="nvfp4"):
        tolerance_for("nvfp4")


def test_layout_and_tolerances_import_without_torch():
    code = ("import sys; import kvplan.runtime, kvplan.runtime.layout, kvplan.runtime.tolerances; "
            "kvplan.runtime.LayerLayout; kvplan.runtime.TOLERANCES; "
            "assert 'torch' not in sys.modules and 'triton' not in sys.modules, sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("kv_cache_dtype", ["bfloat16", "fp8", "fp8_e5m2", "int8_per_token_head",
                                            "fp8_per_token_head", "int4_per_token_head"])
@pytest.mark.parametrize("block_size", [16, 32, 64])
def test_cache_nbytes_equals_plan_bytes_per_token(kv_cache_dtype, block_size):
    torch = pytest.importorskip("torch")
    from kvplan.runtime.cache import allocate_for_plan_layer

    layer = _layer(kv_cache_dtype=kv_cache_dtype, dtype=None if kv_cache_dtype != "bfloat16"
                   else "bfloat16", num_kv_heads=2, head_size=64)
    cache = allocate_for_plan_layer(layer, 5, block_size, "cpu")
    lay = cache.layout
    assert cache.nbytes == lay.bytes_per_token * 5 * block_size
    assert cache.data.numel() * cache.data.element_size() == cache.nbytes
    if lay.is_per_token_head:  # scales start at 1.0 (vLLM's _ensure_scale_caches)
        assert torch.all(cache.key_scales() == 1.0) and torch.all(cache.value_scales() == 1.0)
        assert cache.key_scales().shape == (5, block_size, 2)
        # inline layout: [K data | K scale | V data | V scale] per (block, head, slot)
        row = cache.data.view(torch.uint8)[0, 0, 0]
        db = lay.data_bytes_per_head
        assert row[db:db + 4].view(torch.float32).item() == 1.0
        assert row[2 * db + 4:].view(torch.float32).item() == 1.0


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "bfloat16", "fp8", "fp8_e5m2", "int8_per_token_head",
                                            "fp8_per_token_head", "int4_per_token_head"])
def test_every_compiled_plan_layer_is_executable_with_the_planned_bytes(kv_cache_dtype):
    """What the planner writes (not a hand-made layer) must load, and allocate exactly as planned."""
    pytest.importorskip("torch")
    import kvplan
    from kvplan.runtime.cache import allocate_for_plan_layer
    from tests.conftest import EXAMPLES

    plan = kvplan.compile(EXAMPLES / "SmolLM2-135M-Instruct" / "config.json", ["--kv-cache-dtype", kv_cache_dtype])
    for layer in (plan.layers[0], plan.layers[-1]):
        lay = LayerLayout.from_plan_layer(layer)
        assert lay.bytes_per_token == layer.bytes_per_token
        cache = allocate_for_plan_layer(layer, 3, 16, "cpu")
        assert cache.nbytes == layer.bytes_per_token * 3 * 16


def test_layout_imports_without_pydantic_or_typer():
    """The GPU image has torch and triton but not the planner's pydantic/typer: the runtime's plan
    reader (layout, tolerances) reads the model vocabulary, which is plain Python."""
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('pydantic', 'pydantic_core', 'typer'):\n"
            "            raise ImportError(f'blocked: {name}')\n"
            "sys.meta_path.insert(0, Block())\n"
            "from kvplan.runtime.layout import LayerLayout\n"
            "import kvplan.runtime.tolerances\n"
            "lay = LayerLayout.from_plan_layer({'kv_cache_dtype': 'fp8', 'num_kv_heads': 8, 'head_size': 128})\n"
            "assert lay.bytes_per_token == 2048 and lay.quant_mode == 'fp8_per_tensor'\n"
            "assert not any(m.split('.')[0] in ('pydantic', 'typer') for m in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_layout_reads_a_typed_layer_plan_and_its_enums():
    import kvplan
    from tests.conftest import EXAMPLES
    plan = kvplan.compile(EXAMPLES / "gpt-oss-20b", "--kv-cache-dtype fp8 --kv-cache-dtype-skip-layers sliding_window")
    for lp in plan.layers[:2]:
        lay = LayerLayout.from_plan_layer(lp)  # the LayerPlan itself (quant_mode is a QuantMode enum)
        assert lay == LayerLayout.from_plan_layer(lp.model_dump(mode="json")) == LayerLayout.from_plan_layer(
            lp.model_dump())
        assert (lay.kind, lay.bytes_per_token) == (lp.kind, lp.bytes_per_token)
    assert LayerLayout.from_plan_layer(plan.layers[1]).quant_mode == "fp8_per_tensor"
