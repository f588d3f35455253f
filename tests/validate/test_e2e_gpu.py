"""The end-to-end path through the Triton kernels (CUDA; run through the device tool): tiny
random-weight checkpoints, no planner (GPU boxes may lack pydantic)."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from tests.validate.tiny_models import build  # noqa: E402


def _open(family: str, tmp_path, tokens: int = 96):
    from kvplan.runtime.causal_lm import CausalLM, WeightsRef
    from kvplan.runtime.model_eval import Evaluator, layers_from_config
    folder = build(family, tmp_path / family)
    cfg = json.loads((folder / "config.json").read_text())
    model = CausalLM.load(WeightsRef("folder", family, folder=folder, config=cfg), model_dtype="bfloat16",
                          device="cuda")
    layers = layers_from_config(cfg)
    ids = torch.randint(0, model.vocab_size, (1, tokens), generator=torch.Generator().manual_seed(0)).cuda()
    return model, Evaluator(model, ids, layers), layers


@pytest.mark.parametrize("family", ["llama", "gemma3", "gpt-oss"])
def test_kernels_match_the_reference_quantizers(family, tmp_path) -> None:
    from kvplan.runtime.model_eval import comparison_configs
    model, ev, layers = _open(family, tmp_path)
    amax, _ = model.kv_amax(ev.ids)
    cal = {i: (k / 448.0, v / 448.0) for i, (k, v) in amax.items()}
    rows = {c.name: c for c in comparison_configs(layers, cal, (0, layers[-1].index))}
    bf16 = ev.measure(rows["bf16"])
    assert bf16.kl_mean < 1e-3 and bf16.top1_agreement >= 0.95  # kernel attention vs fp32 torch attention
    for name in ("int8-pth", "fp8-scale-1.0", "int4-pth"):
        kern = ev.measure(rows[name])
        run = model.new_run(rows[name].modes)
        run.kernels = False  # the torch reference quantizers on the same GPU
        ref = model.logits(ev.ids, run)
        from kvplan.runtime.model_eval import scores
        k_vs_r, _, _, _ = scores(ref, model.logits(ev.ids, model.new_run(rows[name].modes)), ev.ids)
        # the same bytes are written (bit-exact); only the attention arithmetic differs (kernel vs fp32 torch)
        assert k_vs_r < max(0.15 * kern.kl_mean, 1e-3), (name, k_vs_r, kern.kl_mean)
    if family == "gpt-oss":
        assert ev.torch_layers == {lay.index for lay in layers}  # sinks: the cache is read back in torch
    else:
        assert not ev.torch_layers
