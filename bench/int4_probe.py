"""Probe the Gluon INT4 decode kernel against the torch reference on the same cache (GPU only):
relative error per sequence (1 to 2048 keys) at heads 64/128/256, with 1 and 3 splits, then with
every V code zeroed, which leaves the output to the zero points and the rotation back out of the
Hadamard basis (the P.V path alone). Each number is ||out - ref|| / ||ref|| of one sequence.

    python bench/int4_probe.py
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tests" / "runtime"))
    import torch
    from rt_helpers import build_paged_batch  # the GPU tests' paged batch builder

    from kvplan.runtime import AttentionConfig, paged_attention
    from kvplan.runtime.layout import LayerLayout
    from kvplan.runtime.reference import reference_paged_attention

    def err(a: torch.Tensor, b: torch.Tensor) -> float:
        return ((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-9)).item()

    gen = torch.Generator(device="cuda").manual_seed(1)
    lens = [1, 2, 37, 300, 2048]
    for head, hq, hkv in ((128, 32, 8), (64, 64, 8), (256, 16, 4)):
        lay = LayerLayout.simple("int4_per_token_head", hkv, head)
        batch = build_paged_batch(lay, lens, 16, "cuda", gen)
        q = torch.randn(len(lens), hq, head, generator=gen, device="cuda").to(torch.bfloat16)

        def run(splits: int) -> tuple[torch.Tensor, torch.Tensor]:
            ref = reference_paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens)
            out = torch.full_like(q, float("nan"))
            paged_attention(q, batch.cache, batch.block_tables, batch.seq_lens, out=out,
                            config=AttentionConfig(kernel="gluon", num_splits=splits))
            torch.cuda.synchronize()
            return out, ref

        for splits in (1, 3):
            out, ref = run(splits)
            print(head, splits, "per seq", [round(err(out[i], ref[i]), 4) for i in range(len(lens))],
                  "nan", int(torch.isnan(out).sum()), flush=True)
        batch.cache.value_data().zero_()  # every V value is (0 - zp) * scale, rotated back out
        out, ref = run(1)
        print(head, "V codes zero: per seq", [round(err(out[i], ref[i]), 4) for i in range(len(lens))],
              flush=True)


if __name__ == "__main__":
    main()
