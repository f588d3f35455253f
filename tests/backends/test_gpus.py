"""GPU profiles and `resolve_gpu`: every way a user names a GPU lands on the right profile."""
from __future__ import annotations

import subprocess
import sys
import types

import pytest
from pydantic import ValidationError

from kvplan.backends.gpus import GPU_PROFILES, all_gpu_names, resolve_gpu
from kvplan.errors import KvplanInputError

REQUIRED = {  # brief: at least these, with their compute capability / arch and FP8 format
    "v100": ((7, 0), "none"), "t4": ((7, 5), "none"), "a10": ((8, 6), "e4m3fn"),
    "a100-40gb": ((8, 0), "e4m3fn"), "a100-80gb": ((8, 0), "e4m3fn"), "l4": ((8, 9), "e4m3fn"),
    "l40s": ((8, 9), "e4m3fn"), "rtx-4090": ((8, 9), "e4m3fn"), "h100-pcie": ((9, 0), "e4m3fn"),
    "h100-sxm": ((9, 0), "e4m3fn"), "h200": ((9, 0), "e4m3fn"), "h20": ((9, 0), "e4m3fn"),
    "b200": ((10, 0), "e4m3fn"), "gb200": ((10, 0), "e4m3fn"), "b300": ((10, 3), "e4m3fn"),
    "rtx-pro-6000": ((12, 0), "e4m3fn"), "mi300x": (None, "e4m3fnuz"), "mi325x": (None, "e4m3fnuz"),
}


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_gpu_profiles_cover_required_gpus(name: str) -> None:
    g = GPU_PROFILES[name]
    cc, fp8 = REQUIRED[name]
    assert g.compute_capability == cc and g.fp8 == fp8
    assert g.memory_gib and g.memory_gib > 0 and g.hbm_bandwidth_gbs and g.hbm_bandwidth_gbs > 0
    assert g.source  # every row cites where its numbers come from


def test_gpu_profiles_native_fp8_only_from_ada_on() -> None:
    assert [n for n in ("v100", "t4", "a10", "a100-80gb") if GPU_PROFILES[n].native_fp8_tensor_cores] == []
    assert all(GPU_PROFILES[n].native_fp8_tensor_cores
               for n in ("l4", "l40s", "h100-sxm", "b200", "b300", "rtx-pro-6000", "mi300x"))


def test_gpu_profile_is_frozen_and_forbids_extra_fields() -> None:
    g = GPU_PROFILES["h100-sxm"]
    with pytest.raises(ValidationError):
        g.memory_gib = 1  # type: ignore[misc]
    with pytest.raises(ValidationError):
        type(g)(**g.model_dump(), warp_size=32)


def test_gpu_profile_fields_all_documented() -> None:
    schema = type(GPU_PROFILES["t4"]).model_json_schema()
    undocumented = [k for k, v in schema["properties"].items() if not v.get("description")]
    assert undocumented == []


@pytest.mark.parametrize("spelling", all_gpu_names())
def test_resolve_gpu_accepts_every_name_and_alias(spelling: str) -> None:
    prof = resolve_gpu(spelling)
    assert spelling == prof.name or spelling in prof.aliases
    assert resolve_gpu(spelling.upper()).name == prof.name  # case-insensitive


@pytest.mark.parametrize("spelling,expected", [
    ("h100", "h100-sxm"), ("H100 SXM", "h100-sxm"), ("h100_pcie", "h100-pcie"),
    ("h100-pcie", "h100-pcie"), ("a100", "a100-80gb"), ("A100-40GB", "a100-40gb"),
    ("mi300x", "mi300x"), ("MI325X", "mi325x"), ("rtx pro 6000", "rtx-pro-6000"),
    ("4090", "rtx-4090"), ("gb10", "dgx-spark"), ("cpu", "cpu-x86-amx"),
])
def test_resolve_gpu_aliases_pick_the_expected_part(spelling: str, expected: str) -> None:
    assert resolve_gpu(spelling).name == expected


@pytest.mark.parametrize("spec,cc,representative", [
    ("sm90", (9, 0), "H100 SXM"), ("sm_90", (9, 0), "H100 SXM"), ("9.0", (9, 0), "H100 SXM"),
    ("90", (9, 0), "H100 SXM"), ("sm90a", (9, 0), "H100 SXM"), ("sm100a", (10, 0), "B200"),
    ("sm_100", (10, 0), "B200"), ("10.3", (10, 3), "B300"), ("sm120", (12, 0), "RTX PRO 6000"),
    ("8.9", (8, 9), "L40S"), ("sm80", (8, 0), "A100 SXM4"), ("86", (8, 6), "A10"),
    ("sm75", (7, 5), "T4"), ("7.0", (7, 0), "Tesla V100"), ("12.1", (12, 1), "DGX Spark"),
])
def test_resolve_gpu_compute_capability_gives_generic_profile(spec: str, cc, representative: str) -> None:
    g = resolve_gpu(spec)
    assert g.compute_capability == cc
    assert g.name == f"sm{cc[0]}{cc[1]}"
    assert g.display_name.startswith(f"generic SM{cc[0]}{cc[1]} (") and representative in g.display_name


@pytest.mark.parametrize("spec,fp8", [("gfx942", "e4m3fnuz"), ("gfx950", "e4m3fn"),
                                      ("gfx942:sramecc+:xnack-", "e4m3fnuz")])
def test_resolve_gpu_rocm_arch_gives_generic_profile(spec: str, fp8: str) -> None:
    g = resolve_gpu(spec)
    assert g.vendor == "amd" and g.fp8 == fp8 and g.display_name.startswith("generic gfx9")


def test_resolve_gpu_unknown_name_lists_suggestions_and_fix() -> None:
    with pytest.raises(KvplanInputError) as e:
        resolve_gpu("h10")
    msg = str(e.value)
    assert "unknown GPU 'h10'" in msg and "Did you mean" in msg and "h100" in msg
    assert "kvplan gpus" in msg and "\n" not in msg  # one line, with the fix


def test_resolve_gpu_unmodelled_compute_capability_is_input_error() -> None:
    with pytest.raises(KvplanInputError, match=r"compute capability 7\.2"):
        resolve_gpu("sm72")


def test_resolve_gpu_auto_without_torch_says_how_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    with pytest.raises(KvplanInputError) as e:
        resolve_gpu("auto")
    assert "torch is not installed" in str(e.value) and "--gpu h100" in str(e.value)


def _fake_torch(name: str, cc=(9, 0), total=80 * 2**30, available=True, hip=None, gcn=""):
    cuda = types.SimpleNamespace(
        is_available=lambda: available, get_device_name=lambda i=0: name,
        get_device_capability=lambda i=0: cc,
        get_device_properties=lambda i=0: types.SimpleNamespace(total_memory=total, gcnArchName=gcn))
    return types.SimpleNamespace(cuda=cuda, version=types.SimpleNamespace(hip=hip))


@pytest.mark.parametrize("device,cc,expected", [
    ("NVIDIA H100 80GB HBM3", (9, 0), "h100-sxm"), ("NVIDIA H100 PCIe", (9, 0), "h100-pcie"),
    ("NVIDIA A100-SXM4-40GB", (8, 0), "a100-40gb"), ("NVIDIA A100-SXM4-80GB", (8, 0), "a100-80gb"),
    ("NVIDIA B200", (10, 0), "b200"), ("NVIDIA L40S", (8, 9), "l40s"), ("NVIDIA A10", (8, 6), "a10"),
    ("Tesla T4", (7, 5), "t4"), ("NVIDIA RTX PRO 6000 Blackwell Server Edition", (12, 0), "rtx-pro-6000"),
])
def test_resolve_gpu_auto_matches_device_name(monkeypatch: pytest.MonkeyPatch, device, cc, expected) -> None:
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(device, cc))
    assert resolve_gpu("auto").name == expected


def test_resolve_gpu_auto_unknown_device_falls_back_to_capability(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", _fake_torch("NVIDIA Future GPU", (9, 0), total=94 * 2**30))
    g = resolve_gpu("auto")
    assert g.compute_capability == (9, 0) and g.memory_gib == 94.0
    assert "NVIDIA Future GPU" in g.display_name


def test_resolve_gpu_auto_rocm_uses_gcn_arch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", _fake_torch("AMD Instinct MI300X", (9, 4), hip="6.2",
                                                          gcn="gfx942:sramecc+:xnack-"))
    assert resolve_gpu("auto").name == "mi300x"


def test_resolve_gpu_auto_without_device_is_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", _fake_torch("x", available=False))
    with pytest.raises(KvplanInputError, match="no CUDA/ROCm device"):
        resolve_gpu("auto")


def test_gpus_module_import_does_not_import_torch() -> None:
    code = ("import sys, kvplan.backends.gpus, kvplan.backends.select, kvplan.cli.cmd_backends; "
            "assert not [m for m in sys.modules if m.split('.')[0] in ('torch', 'triton')]")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_gpu_profile_fp8_ranges_follow_format() -> None:
    assert GPU_PROFILES["h100-sxm"].fp8_max == 448 and GPU_PROFILES["mi300x"].fp8_max == 240
    assert GPU_PROFILES["mi300x"].fp8_per_token_head_max == 224  # vLLM get_fp8_min_max on fnuz
    assert GPU_PROFILES["t4"].fp8_max is None
    assert GPU_PROFILES["b300"].is_family(100) and not GPU_PROFILES["rtx-pro-6000"].is_family(100)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=20).filter(lambda s: s.strip().lower() != "auto"))
def test_resolve_gpu_any_text_resolves_or_raises_input_error(spec: str) -> None:
    try:
        g = resolve_gpu(spec)
    except KvplanInputError as e:
        assert "\n" not in str(e).strip() or "\n" in spec
    else:
        assert g.name and g.vendor in ("nvidia", "amd", "cpu")


def test_gpu_facts_carry_the_typed_profile() -> None:
    from kvplan.backends.gpus import GpuFacts, gpu_facts
    from kvplan.model.gpu import GpuProfile

    h100 = gpu_facts("h100")
    assert h100 is not None and isinstance(h100.profile, GpuProfile)
    assert h100.profile is GPU_PROFILES["h100-sxm"]
    assert (h100.name, h100.memory_gib, h100.compute_capability, h100.cc_str, h100.fp8) == (
        "h100-sxm", 80, (9, 0), "9.0", "e4m3fn")
    assert gpu_facts(GPU_PROFILES["h100-sxm"]) == h100
    assert gpu_facts(h100) is h100 and gpu_facts(None) is None
    # vLLM refuses bfloat16 below SM80 on NVIDIA only.
    assert not gpu_facts("v100").supports_bf16 and gpu_facts("a100").supports_bf16
    assert gpu_facts("mi250x").supports_bf16 and gpu_facts("mi300x").fp8 == "e4m3fnuz"
    assert GpuFacts(name="custom", memory_gib=24).profile is None


def test_gpu_facts_is_the_type_the_rule_context_uses() -> None:
    from kvplan.backends.gpus import GpuFacts
    from kvplan.rules.context import GpuFacts as ContextGpuFacts

    assert ContextGpuFacts is GpuFacts
