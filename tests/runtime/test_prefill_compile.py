"""The Hopper prefill kernel compiles for sm_90 on a machine without a GPU (Gluon kernels do not
run in the CPU interpreter, so this is the CPU suite's check that the kernel still builds with the
installed Triton, and that it is the kernel it claims to be: wgmma, TMA copies, register
reallocation between its partitions, shared memory within an H100's 227 KB)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
triton = pytest.importorskip("triton")
pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")

ROOT = Path(__file__).resolve().parents[2]


def test_hopper_prefill_kernel_compiles_for_sm90():
    # compiled, not interpreted: the CPU suite sets TRITON_INTERPRET=1 for its other kernels
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "compile_report.py"),
                          "--hopper-prefill", "default,pack_p=1", "--heads", "128"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [line.split() for line in res.stdout.splitlines() if line.startswith("hopper_prefill_")]
    # the default settings, and P converted by the kernel's own packing PTX (`pack_p`)
    assert [r[0] for r in rows] == ["hopper_prefill_d128_default",
                                    "hopper_prefill_d128_default_contig",
                                    "hopper_prefill_d128_pack_p=1",
                                    "hopper_prefill_d128_pack_p=1_contig"]
    for r in rows:
        fields = dict(zip(r[1::2], r[2::2], strict=False))
        assert int(fields["wgmma"]) > 0, r            # warpgroup MMAs, not mma.sync
        assert int(fields["tma"]) > 0, r              # K/V tiles by TMA copies
        assert int(fields["setmaxnreg"]) > 0, r       # producer / consumer register split
        assert int(fields["shared"]) <= 227 * 1024, r  # fits an H100/H200 multiprocessor
    # paged: one copy per 16-row page (8 per 128-key tile, K and V); workspace: one per tile
    paged, contig = (dict(zip(r[1::2], r[2::2], strict=False)) for r in rows[:2])
    assert int(paged["tma"]) > int(contig["tma"])
