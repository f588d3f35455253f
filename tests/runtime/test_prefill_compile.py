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
                          "--hopper-prefill", "default,pack_p=0", "--heads", "128", "--sass"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [line.split() for line in res.stdout.splitlines() if line.startswith("hopper_prefill_")]
    # the default settings (P converted by the kernel's own packing PTX), and P through `.to()`
    assert [r[0] for r in rows] == ["hopper_prefill_d128_default",
                                    "hopper_prefill_d128_default_contig",
                                    "hopper_prefill_d128_pack_p=0",
                                    "hopper_prefill_d128_pack_p=0_contig"]
    for r in rows:
        fields = dict(zip(r[1::2], r[2::2], strict=False))
        assert int(fields["wgmma"]) > 0, r            # warpgroup MMAs, not mma.sync
        assert int(fields["tma"]) > 0, r              # K/V tiles by TMA copies
        assert int(fields["setmaxnreg"]) > 0, r       # producer / consumer register split
        assert int(fields["shared"]) <= 227 * 1024, r  # fits an H100/H200 multiprocessor
    # paged: one copy per 16-row page (8 per 128-key tile, K and V); workspace: one per tile
    paged, contig = (dict(zip(r[1::2], r[2::2], strict=False)) for r in rows[:2])
    assert int(paged["tma"]) > int(contig["tma"])
    # --sass: the tile loops, each issuing S and P.V (8 wgmma each at head 128) and the
    # softmax's exponentials (64 per thread and tile, and the row scale's two)
    pacing = [line.strip() for line in res.stdout.splitlines() if " > " in line]
    assert len(pacing) >= 3 * len(rows), res.stdout[-3000:]
    assert sum("HGMMA x16" in p and "EX2 x66" in p for p in pacing) >= 3 * len(rows)


def _report_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("compile_report", ROOT / "bench" / "compile_report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _sass(lines: list[str]) -> str:
    """cuobjdump-style text: one instruction per 16 bytes from address 0."""
    return "\n".join(f"        /*{16 * i:04x}*/                   {t} ;    /* 0x0000 */"
                     for i, t in enumerate(lines))


def test_sass_loops_reads_a_kernels_loops_in_ptxas_order():
    """`compile_report.sass_loops` finds each innermost loop of a disassembly (a backward
    branch over enough instructions), counts its opcodes and lists its pacing instructions in
    their SASS order; the jump back from an out-of-line retry block at the kernel's end, and
    loops too short to matter, are not loops."""
    report = _report_module()
    body = (["HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT"] * 2
            + ["WARPGROUP.DEPBAR.LE gsb0, 0x1", "BAR.SYNC.DEFER_BLOCKING 0x2, 0x80",
               "@!P0 SYNCS.ARRIVE.TRANS64.A1T0 RZ, [UR7+0x30160], RZ",
               "WARPGROUP.DEPBAR.LE gsb0, 0x0"]
            + ["FFMA R3, R25, UR5, -R189"] * 30 + ["MUFU.EX2 R5, R29"] * 3
            + ["LDGSTS.E.BYPASS.128 [R5+0x100], desc[UR4][R2.64]", "DEPBAR.LE SB0, 0x1",
               "HMMA.16816.F32 R4, R8, R12, R4"])
    lines = ["MOV R1, c[0x0][0x28]", *body, "@!P1 BRA 0x10"]         # the loop: back to 0x10
    lines += ["NOP"] * 4 + ["FADD R1, R2, R3"] * 3 + ["@P2 BRA 0x2f0"]  # 2 instructions: too short
    lines += ["EXIT", "SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR41+0x30140], R24", "BRA 0x40"]
    loops = report.sass_loops(_sass(lines))
    assert len(loops) == 1
    (lp,) = loops
    assert (lp["start"], lp["instructions"]) == (0x10, len(body) + 1)
    assert lp["opcodes"]["FFMA"] == 30 and lp["opcodes"]["MUFU"] == 3
    assert lp["pacing"] == ["HGMMA x2", "DEPBAR.LE 1", "BAR", "ARRIVE", "DEPBAR.LE 0", "EX2 x3",
                            "CP.ASYNC", "CP.WAIT.LE 1", "HMMA"]
