"""Compile the runtime's decode and write kernels for a GPU that is not here, and report what
ptxas says (registers, spills, shared memory): the compiler's view at no device time.

Needs torch (the CPU build is enough) and a Triton with the NVIDIA backend; no GPU and no driver.
The kernels are specialised exactly as the launch helpers specialise them on a GPU (same
constexprs and layouts), then only compiled, never launched.

    python bench/compile_report.py                      # defaults: sm_90, heads 64/128/256
    python bench/compile_report.py --arch 90 --heads 128 --ptx-out /tmp/ptx
    python bench/compile_report.py --hopper-prefill default,split=0,pingpong=1 --heads 64,128,256
    python bench/compile_report.py --hopper-prefill default --heads 128 --sass   # + SASS loops

``--sass`` also disassembles each kernel (Triton's ptxas, then its cuobjdump) and prints its
instruction mix (count and most frequent opcodes: what one thread runs where there is no loop)
and its innermost loops: instruction count, the most frequent opcodes, and the order of the
instructions that pace it (wgmma issues and waits, barriers, mbarrier arrives and waits,
exponentials). That order is ptxas's, not the source's: the Hopper prefill kernel's P.V wait
sits above its softmax in the SASS though the source puts it below (bench/NOTES-runtime.md,
round 22).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _offline_driver(arch: int) -> None:
    """Make Triton compile for ``sm_<arch>`` without a GPU: a CUDA driver stand-in that reports
    the target and never loads a module."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.driver import CudaDriver

    class OfflineCuda(CudaDriver):
        def __init__(self) -> None:  # no CudaUtils: it would load libcuda
            self.launcher_cls = None
            self.get_current_device = lambda: 0
            self.get_current_stream = lambda idx=None: 0
            self.get_device_capability = lambda idx=0: divmod(arch, 10)
            self.set_current_device = lambda idx: None

        def get_current_target(self):
            return GPUTarget("cuda", arch, 32)

        def get_active_torch_device(self):
            import torch
            return torch.device("cpu")

    triton.runtime.driver.set_active(OfflineCuda())


def _ptxas(ptx: str, arch: int, sass: bool = False) -> dict:
    """Registers, spill bytes and shared memory of one kernel's PTX, from ``ptxas -v``; with
    ``sass``, also its innermost loops (`sass_loops`) from the cubin's disassembly."""
    from triton import knobs
    from triton.backends.nvidia.compiler import get_ptxas

    try:
        tool = get_ptxas(arch)
    except TypeError:  # older Triton: no arch argument
        tool = get_ptxas()
    ptxas = getattr(tool, "path", tool)
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"kvplan_report_{os.getpid()}.ptx"
    cubin = tmp.with_suffix(".cubin")
    tmp.write_text(ptx)
    target = re.search(r"^\.target\s+(\S+)", ptx, re.M)  # Triton targets sm_90a on Hopper
    try:
        res = subprocess.run([ptxas, f"-arch={target.group(1) if target else f'sm_{arch}'}",
                              "-v", str(tmp), "-o", str(cubin) if sass else os.devnull],
                             capture_output=True, text=True)
        if res.returncode:
            raise RuntimeError(f"ptxas failed: {res.stderr.strip()[-2000:]}")
        loops = mix = None
        if sass:
            dump = subprocess.run([knobs.nvidia.cuobjdump.path, "-sass", str(cubin)],
                                  capture_output=True, text=True, check=True)
            loops = sass_loops(dump.stdout)
            mix = Counter(_opcode(t) for _, t in _SASS_LINE.findall(dump.stdout))
    finally:
        tmp.unlink(missing_ok=True)
        cubin.unlink(missing_ok=True)
    text = res.stderr + res.stdout
    regs = re.search(r"Used (\d+) registers", text)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)
    smem = re.search(r"(\d+) bytes smem", text)
    return {"registers": int(regs.group(1)) if regs else None,
            "spill_stores": int(spill.group(1)) if spill else None,
            "spill_loads": int(spill.group(2)) if spill else None,
            "static_smem": int(smem.group(1)) if smem else 0, "loops": loops,
            "opcodes": dict(mix.most_common()) if mix else None}


_SASS_LINE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", re.M)
_BRANCH = re.compile(r"\bBRA(?:\.\S+)?\s+(?:\S+,\s*)?0x([0-9a-f]+)")
# the instructions that pace a loop, by what their text starts with (predicate stripped)
_PACING = (("HGMMA", "HGMMA"), ("WARPGROUP.DEPBAR", "DEPBAR"), ("HMMA", "HMMA"),
           ("LDGSTS", "CP.ASYNC"), ("DEPBAR", "CP.WAIT"), ("BAR.SYNC", "BAR"),
           ("SYNCS.ARRIVE", "ARRIVE"), ("SYNCS.PHASECHK", "WAIT"), ("MUFU.EX2", "EX2"),
           ("LDL", "LDL"), ("STL", "STL"))


def _opcode(text: str) -> str:
    """An instruction's opcode without its guard predicate and modifiers: ``FMNMX``."""
    parts = text.split()
    if parts and parts[0].startswith("@"):
        parts = parts[1:]
    return parts[0].split(".")[0] if parts else ""


def sass_loops(sass_text: str, min_instructions: int = 32) -> list[dict]:
    """The innermost loops of ``cuobjdump -sass`` text: each backward branch and the
    instructions from its target to it, keeping loops of at least ``min_instructions`` that
    contain no other such loop, in address order. Each: ``start``/``end`` addresses, the
    ``instructions`` count, ``opcodes`` (counts, most frequent first) and ``pacing``: the
    pacing instructions in their SASS order, runs merged, e.g. ``["HGMMA x16", "DEPBAR.LE 1",
    "EX2 x66"]`` (a `WARPGROUP.DEPBAR` shows its operand: how many wgmma groups may remain in
    flight)."""
    ins = [(int(a, 16), t.strip()) for a, t in _SASS_LINE.findall(sass_text)]
    index = {a: i for i, (a, _) in enumerate(ins)}
    spans = []
    for i, (a, t) in enumerate(ins):
        m = _BRANCH.search(t)
        if m and int(m.group(1), 16) < a and int(m.group(1), 16) in index:
            first = index[int(m.group(1), 16)]
            if i + 1 - first >= min_instructions:
                spans.append((first, i))
    # innermost: containing no other loop; and not a jump back from the out-of-line retry
    # blocks at the kernel's end (an mbarrier wait's), which crosses a loop that ends first
    inner = [(f, la) for f, la in spans
             if not any((f2, l2) != (f, la) and f <= f2 and l2 <= la for f2, l2 in spans)
             and not any(f2 < f <= l2 < la for f2, l2 in spans)]
    loops = []
    for first, last in sorted(set(inner)):
        body = [t for _, t in ins[first:last + 1]]
        pacing: list[list] = []
        for t in body:
            bare = t.split(None, 1)[1] if t.startswith("@") else t
            for prefix, name in _PACING:
                if bare.startswith(prefix):
                    if name in ("DEPBAR", "CP.WAIT"):  # groups that may stay in flight
                        name += ".LE " + str(int(bare.rsplit(",", 1)[-1].strip(), 0))
                    if pacing and pacing[-1][0] == name:
                        pacing[-1][1] += 1
                    else:
                        pacing.append([name, 1])
                    break
        loops.append({"start": ins[first][0], "end": ins[last][0], "instructions": len(body),
                      "opcodes": dict(Counter(_opcode(t) for t in body).most_common()),
                      "pacing": [n if c == 1 else f"{n} x{c}" for n, c in pacing]})
    return loops


def _print_loops(row: dict) -> None:
    """With ``--sass``: the kernel's instruction count and most frequent opcodes (what one
    thread executes where the kernel has no loop), then its innermost loops."""
    if row.get("opcodes"):
        top = " ".join(f"{k} {v}" for k, v in list(row["opcodes"].items())[:10])
        print(f"    all: {sum(row['opcodes'].values())} instructions ({top})")
    for lp in row.get("loops") or []:
        top = " ".join(f"{k} {v}" for k, v in list(lp["opcodes"].items())[:6])
        print(f"    loop {lp['start']:#x}-{lp['end']:#x}: {lp['instructions']} instructions ({top})")
        print(f"      {' > '.join(lp['pacing'])}")


def report(arch: int, heads: list[int], ptx_out: Path | None, sass: bool = False) -> list[dict]:
    import torch

    from kvplan.runtime import attention_gluon as ag
    from kvplan.runtime._common import cache_args
    from kvplan.runtime.cache import allocate_kv_cache
    from kvplan.runtime.layout import LayerLayout

    rows = []
    for head in heads:
        for mode in ("int8_per_token_head", "fp8_per_token_head", "int4_per_token_head", "bfloat16",
                     "fp8", "fp8:hp2"):
            layout = LayerLayout.simple(mode.split(":")[0], 8, head)
            cache = allocate_kv_cache(layout, 4, 16, "cpu")
            args = cache_args(cache)
            q = torch.zeros(2, 32, head, dtype=torch.bfloat16)
            out = torch.zeros_like(q)
            bt = torch.zeros(2, 4, dtype=torch.int32)
            sl = torch.full((2,), 64, dtype=torch.int32)
            block_n = 32 if (head == 64 and mode != "bfloat16") else 16
            pipe = 2
            if mode == "int4_per_token_head":  # the INT4 decode defaults (stages, tile keys)
                from kvplan.runtime.attention import _GLUON_INT4_TILES
                pipe, block_n = _GLUON_INT4_TILES[head]
            for split in (1, 2):
                if mode.startswith("fp8") and not mode.startswith("fp8_"):  # FP8 per-tensor
                    pos, kw, _ = ag._fp8t_launch_args(q, out, out, out, args, bt, sl, 4, head, 16,
                                                   1.0, 1.0, 1.0, 0, split, 16, 2, pdl=split > 1,
                                                   hp=2 if mode.endswith("hp2") else 1)
                    kernel = ag._gluon_fp8t_kernel
                elif mode == "bfloat16":
                    pos, kw, _ = ag._bf16_launch_args(q, out, out, out, args, bt, sl, 4, head, 16,
                                                   1.0, 0, split, 16, 2, pdl=split > 1)
                    kernel = ag._gluon_bf16_kernel
                else:
                    pos, kw, _ = ag._launch_args(q, out, out, out, args, bt, sl, 4, head, 16, 1.0,
                                              0, split, block_n, True, pipe, True, pdl=split > 1)
                    kernel = ag._gluon_swap_kernel
                compiled = kernel.warmup(*pos, grid=(1,), **kw)
                info = _ptxas(compiled.asm["ptx"], arch, sass)
                name = f"{mode}_d{head}_split{split}"
                if ptx_out:
                    ptx_out.mkdir(parents=True, exist_ok=True)
                    (ptx_out / f"{name}.ptx").write_text(compiled.asm["ptx"])
                rows.append({"kernel": name, "block_n": 16 if mode in ("bfloat16", "fp8", "fp8:hp2") else block_n,
                             "shared": compiled.metadata.shared, **info})
    return rows


def report_writes(arch: int, heads: list[int], ptx_out: Path | None,
                  sass: bool = False) -> list[dict]:
    """The write kernels as `write_kv_cache` plans them by default on a GPU (the Gluon kernels
    for INT8/FP8 per-token-head, the Triton kernel for the rest), and INT4 on both kernels:
    registers, spills, shared memory (a layout conversion through shared memory shows up
    there)."""
    import torch

    from kvplan.runtime import _common, write, write_gluon
    from kvplan.runtime.cache import allocate_kv_cache
    from kvplan.runtime.layout import LayerLayout

    rows = []
    for head in heads:
        for mode, kernel in (("int8_per_token_head", None), ("fp8_per_token_head", None),
                             ("int4_per_token_head", "gluon"), ("int4_per_token_head", "triton"),
                             ("fp8", None), ("bfloat16", None)):
            layout = LayerLayout.simple(mode, 8, head)
            cache = allocate_kv_cache(layout, 4, 16, "cpu")
            key = torch.zeros(4, 8, head, dtype=torch.bfloat16)
            captured: dict = {}
            saved = _common.launch_cached  # the launch, replaced by a recorder of its arguments
            _common.launch_cached = lambda fn, grid, pos, kw, key=None, per_seq=None: \
                captured.update(fn=fn, pos=pos, kw=kw)
            try:
                use_gluon = write._use_gluon  # the GPU's choice, which this CPU run cannot see
                write._use_gluon = lambda k, args, key, d, given: \
                    k != "triton" and write_gluon.supported(args.KV_MODE, d)
                try:
                    fire = write._plan_write(cache, key, None, None, kernel)
                finally:
                    write._use_gluon = use_gluon
                fire(key, key, torch.zeros(4, dtype=torch.int64))
            finally:
                _common.launch_cached = saved
            fn = captured["fn"]
            compiled = fn.warmup(*captured["pos"], grid=(1,), **captured["kw"])
            name = f"write_{mode}_d{head}_{fn.__name__ if hasattr(fn, '__name__') else fn.fn.__name__}"
            if ptx_out:
                ptx_out.mkdir(parents=True, exist_ok=True)
                (ptx_out / f"{name}.ptx").write_text(compiled.asm["ptx"])
            rows.append({"kernel": name, "shared": compiled.metadata.shared,
                         **_ptxas(compiled.asm["ptx"], arch, sass)})
    return rows


def report_prefill(arch: int, configs: list[str], modes: list[str], head: int,
                   ptx_out: Path | None, sass: bool = False) -> list[dict]:
    """The prefill kernel (`kvplan.runtime.prefill`) at launch configurations
    BLOCK_M:BLOCK_N:WARPS:STAGES[:VREG]: registers, spills, shared memory, and whether its PTX
    issues wgmma (Hopper's warpgroup MMA) or only mma.sync."""
    import torch

    from kvplan.runtime import prefill as pf
    from kvplan.runtime._common import cache_args
    from kvplan.runtime.cache import allocate_kv_cache
    from kvplan.runtime.layout import LayerLayout

    rows = []
    for mode in modes:
        args = cache_args(allocate_kv_cache(LayerLayout.simple(mode, 8, head), 4, 16, "cpu"))
        q = torch.zeros(64, 32, head, dtype=torch.bfloat16)
        bt = torch.zeros(2, 4, dtype=torch.int32)
        sl = torch.full((2,), 64, dtype=torch.int32)
        for c in configs:
            f = [int(x) for x in c.split(":")]
            captured = {}
            saved = pf.launch_cached
            pf.launch_cached = lambda fn, grid, pos, kw, key=None, per_seq=None: captured.update(pos=pos, kw=kw)
            try:
                pf.launch_prefill(q, q, args, bt, sl, sl, group=4, block_size=16, num_kv_heads=8,
                                  scale=0.1, k_scale=1.0, v_scale=1.0, sliding_window=0,
                                  max_query_len=32, block_m=f[0], block_n=f[1], num_warps=f[2],
                                  num_stages=f[3], v_reg=bool(f[4]) if len(f) > 4 else False)
            finally:
                pf.launch_cached = saved
            compiled = pf._prefill_kernel.warmup(*captured["pos"], grid=(1,), **captured["kw"])
            ptx = compiled.asm["ptx"]
            info = _ptxas(ptx, arch, sass)
            name = f"prefill_{mode}_d{head}_{c}"
            if ptx_out:
                ptx_out.mkdir(parents=True, exist_ok=True)
                (ptx_out / f"{name.replace(':', '-')}.ptx").write_text(ptx)
            rows.append({"kernel": name, "shared": compiled.metadata.shared,
                         "wgmma": ptx.count("wgmma.mma_async"), "mma_sync": ptx.count("mma.sync"),
                         **info})
    return rows


def report_hopper_prefill(arch: int, settings: list[str], heads: list[int],
                          ptx_out: Path | None, sass: bool = False) -> list[dict]:
    """The Hopper prefill kernel (`kvplan.runtime.prefill_gluon`) over a paged bf16 cache (block
    size 16, GQA group 4) and over the dequantized workspace (``contig``), at `WS_DEFAULTS`
    overrides such as ``split=0`` or ``pingpong=1`` (``default``: none): registers, spills,
    shared memory, and its PTX's wgmma, TMA copies and register reallocations."""
    import torch

    from kvplan.runtime import prefill_gluon as pg

    rows = []
    for head in heads:
        for setting in settings:
            opts = {}
            if setting != "default":
                for part in setting.split(":"):
                    key, _, val = part.partition("=")
                    opts[key] = int(val)
            for contig in (False, True):
                k = torch.zeros(64, 16, 8, head, dtype=torch.bfloat16)
                q = torch.zeros(256, 32, head, dtype=torch.bfloat16)
                bt = torch.zeros(2, 8, dtype=torch.int32)
                sl = torch.full((2,), 128, dtype=torch.int32)
                captured: dict = {}
                saved = pg.launch_cached  # the launch, replaced by a recorder of its arguments
                pg.launch_cached = lambda fn, grid, pos, kw, key=None, per_seq=None: captured.update(
                    fn=fn, pos=pos, kw=kw)
                try:
                    pg.launch_ws_prefill(q, q, k, k, bt, sl, sl, group=4, block_size=16,
                                         num_kv_heads=8, scale=0.1, out_scale=1.0,
                                         sliding_window=0, max_query_len=128, contig=contig,
                                         seq_pages=8, **opts)
                finally:
                    pg.launch_cached = saved
                compiled = captured["fn"].warmup(*captured["pos"], grid=(1,), **captured["kw"])
                ptx = compiled.asm["ptx"]
                name = f"hopper_prefill_d{head}_{setting}{'_contig' if contig else ''}"
                if ptx_out:
                    ptx_out.mkdir(parents=True, exist_ok=True)
                    (ptx_out / f"{name.replace(':', '-').replace('=', '')}.ptx").write_text(ptx)
                rows.append({"kernel": name, "shared": compiled.metadata.shared,
                             "wgmma": ptx.count("wgmma.mma_async"),
                             "tma": ptx.count("cp.async.bulk.tensor"),
                             "setmaxnreg": ptx.count("setmaxnreg"), **_ptxas(ptx, arch, sass)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", type=int, default=90, help="compute capability, e.g. 90")
    ap.add_argument("--heads", default="64,128,256")
    ap.add_argument("--ptx-out", type=Path, default=None, help="also write each kernel's PTX here")
    ap.add_argument("--sass", action="store_true",
                    help="also print each kernel's SASS instruction mix and innermost loops "
                         "(cuobjdump)")
    ap.add_argument("--prefill", default="", help="prefill kernel configs BM:BN:WARPS:STAGES[:VREG], "
                    "comma-separated (then only the prefill kernel is compiled, at the first head)")
    ap.add_argument("--modes", default="bfloat16,int8_per_token_head")
    ap.add_argument("--hopper-prefill", default="", help="Hopper prefill kernel settings, "
                    "comma-separated WS_DEFAULTS overrides like split=0:pingpong=1 or 'default' "
                    "(then only that kernel is compiled, at every --heads)")
    ap.add_argument("--writes", action="store_true",
                    help="compile the write kernels instead (each mode's GPU default, and INT4 "
                         "on the Triton kernel), at every --heads")
    a = ap.parse_args()
    _offline_driver(a.arch)
    if a.writes:
        for r in report_writes(a.arch, [int(h) for h in a.heads.split(",")], a.ptx_out, a.sass):
            print(f"{r['kernel']:60} regs {r['registers']!s:>4} spills {r['spill_stores']!s:>5}/"
                  f"{r['spill_loads']!s:<6} shared {r['shared']:>7}")
            _print_loops(r)
        return
    if a.hopper_prefill:
        rows = report_hopper_prefill(a.arch, a.hopper_prefill.split(","),
                                     [int(h) for h in a.heads.split(",")], a.ptx_out, a.sass)
        for r in rows:
            print(f"{r['kernel']:50} regs {r['registers']!s:>4} spills {r['spill_stores']!s:>5}/"
                  f"{r['spill_loads']!s:<6} shared {r['shared']:>7} wgmma {r['wgmma']:>4} "
                  f"tma {r['tma']:>3} setmaxnreg {r['setmaxnreg']:>3}")
            _print_loops(r)
        return
    if a.prefill:
        rows = report_prefill(a.arch, a.prefill.split(","), a.modes.split(","),
                              int(a.heads.split(",")[0]), a.ptx_out, a.sass)
        for r in rows:
            print(f"{r['kernel']:50} regs {r['registers']!s:>4} spills {r['spill_stores']!s:>5}/"
                  f"{r['spill_loads']!s:<6} shared {r['shared']:>7} wgmma {r['wgmma']:>4} "
                  f"mma.sync {r['mma_sync']:>4}")
            _print_loops(r)
        return
    rows = report(a.arch, [int(h) for h in a.heads.split(",")], a.ptx_out, a.sass)
    print(f"{'kernel':34} {'regs':>5} {'spill st/ld':>12} {'shared B':>9}")
    for r in rows:
        print(f"{r['kernel']:34} {r['registers']!s:>5} {r['spill_stores']!s:>5}/{r['spill_loads']!s:<6}"
              f" {r['shared']:>9}")
        _print_loops(r)


if __name__ == "__main__":
    main()
