"""Bound launches (`kvplan.runtime.bound`): what reaches the driver, checked on the CPU by
standing in for ``cuLaunchKernelEx`` and reading back the launch configuration and parameter
block it is handed. The GPU tests in test_attention.py check the same launches against the
ordinary path on a GPU."""
from __future__ import annotations

import ctypes
import struct
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from kvplan.runtime import bound  # noqa: E402


def _kernel(signature: dict, *, warps=4, shared=1024, pdl=False, ctas=1, function=0xF00D,
            name="_some_kernel", **meta):
    """A stand-in for Triton's compiled kernel: the fields `bind` reads."""
    return SimpleNamespace(src=SimpleNamespace(signature=signature), function=function, name=name,
                           packed_metadata=(warps, ctas, shared),
                           metadata=SimpleNamespace(**{
                               "launch_pdl": pdl, "launch_cooperative_grid": False,
                               "global_scratch_size": 0, "profile_scratch_size": 0,
                               "num_ctas": 1, **meta}))


class _Driver:
    """Records each launch as (grid, block, shared, stream, attribute ids, function, params)."""

    def __init__(self, sizes: list[list[int]], fail_at: int | None = None):
        self.sizes = sizes  # parameter sizes in bytes, per kernel in launch order
        self.launches: list[tuple] = []
        self.fail_at = fail_at

    def __call__(self, config_addr, function, params_addr, extra):
        cfg = bound._LaunchConfig.from_address(config_addr)
        attrs = (bound._LaunchAttribute * max(cfg.numAttrs, 1)).from_address(cfg.attrs)
        sizes = self.sizes[len(self.launches) % len(self.sizes)]
        params = (ctypes.c_void_p * len(sizes)).from_address(params_addr)
        values = [ctypes.string_at(params[i], n) for i, n in enumerate(sizes)]
        self.launches.append(((cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ),
                              (cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ), cfg.sharedMemBytes,
                              cfg.hStream, [attrs[i].id for i in range(cfg.numAttrs)],
                              [attrs[i].value[0] for i in range(cfg.numAttrs)], function,
                              values))
        return 700 if self.fail_at == len(self.launches) else 0


def _record(launches, scratch=()):
    with bound.recording() as rec:
        for kernel, grid, pos, tail in launches:
            bound.note_launch(kernel, grid, pos, tail)
        bound.note_scratch(*scratch)
    return rec


def _u64(b: bytes) -> int:
    return struct.unpack("<Q", b)[0]


def test_bound_call_packs_fixed_arguments_and_writes_new_addresses(monkeypatch):
    """Each parameter reaches the driver with its type's bytes: constexprs are left out, the
    fixed (cache) tensor's address is baked in, the inputs' and the scratch's addresses are
    those of the call, Triton's two scratch pointers trail as null, and the second kernel is a
    programmatic dependent launch on the caller's stream. The scratch is one buffer per
    stream."""
    q, out, cache = torch.zeros(64), torch.zeros(64), torch.zeros(256)
    po, pml = torch.zeros(10), torch.zeros(3)  # 40 and 12 bytes: offsets 0 and 256
    attn = _kernel({"q": "*bf16", "stride": "i32", "out": "*bf16", "k": "*u8", "po": "*fp32",
                    "pml": "*fp32", "scale": "fp32", "big": "i64", "flag": "i1",
                    "BLOCK": "constexpr", "n": "constexpr"}, warps=2, shared=4096)
    merge = _kernel({"po": "*fp32", "pml": "*fp32", "out": "*bf16", "hq": "i32",
                     "SPLITS": "constexpr"}, warps=4, shared=0, pdl=True, function=0xBEEF)
    rec = _record([(attn, (8, 4, 3), (q, 4096, out, cache, po, pml, 0.125, -(2**40), True),
                    (64, 1)),
                   (merge, (32,), (po, pml, out, 32), (3,))], scratch=(po, pml))
    driver = _Driver([[8, 4, 8, 8, 8, 8, 4, 8, 1, 8, 8], [8, 8, 8, 4, 8, 8]])
    monkeypatch.setattr(bound, "_driver_launch", lambda: driver)
    call = bound.bind(rec, (q, out), (cache,))
    assert call is not None and call.scratch_offsets == [0, 256] and call.scratch_bytes == 512

    q2, out2 = torch.zeros(64), torch.zeros(64)
    assert call((q2, out2), 0x5EED)
    (grid, block, shared, stream, attr_ids, attr_vals, fn, v), second = driver.launches
    assert (grid, block, shared, stream, attr_ids, fn) == ((8, 4, 3), (64, 1, 1), 4096, 0x5EED,
                                                           [], 0xF00D)
    assert _u64(v[0]) == q2.data_ptr() and _u64(v[2]) == out2.data_ptr()
    assert struct.unpack("<i", v[1])[0] == 4096
    assert _u64(v[3]) == cache.data_ptr()
    base = _u64(v[4])
    assert base % 16 == 0 and _u64(v[5]) == base + 256
    assert struct.unpack("<f", v[6])[0] == 0.125
    assert struct.unpack("<q", v[7])[0] == -(2**40)
    assert v[8] == b"\x01" and v[9] == v[10] == bytes(8)
    grid, block, shared, stream, attr_ids, attr_vals, fn, v = second
    assert (grid, block, shared, stream, fn) == ((32, 1, 1), (128, 1, 1), 0, 0x5EED, 0xBEEF)
    assert attr_ids == [bound.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION]
    assert attr_vals == [1]
    assert (_u64(v[0]), _u64(v[1]), _u64(v[2])) == (base, base + 256, out2.data_ptr())
    assert struct.unpack("<i", v[3])[0] == 32

    # the scratch is kept per stream: a second call on the stream reuses it, another stream
    # gets its own
    assert call((q2, out2), 0x5EED) and _u64(driver.launches[2][7][4]) == base
    assert call((q2, out2), 0x5EEE) and _u64(driver.launches[4][7][4]) != base

    # a driver error stops the call there and hands it back to the ordinary path
    failing = _Driver(driver.sizes, fail_at=1)
    monkeypatch.setattr(bound, "_driver_launch", lambda: failing)
    call = bound.bind(rec, (q, out), (cache,))
    assert not call((q2, out2), 0) and len(failing.launches) == 1


def test_bound_call_refuses_what_it_cannot_replay(monkeypatch):
    """`bind` returns None (the caller keeps the ordinary path) for a tensor argument that is
    neither an input, scratch nor fixed, a misaligned tensor, a parameter type it does not
    pack, cluster launches, Triton scratch memory, an instrumented kernel (whose launcher adds
    parameters), tuple arguments, one tensor passed as two inputs, or a recording that missed a
    launch; a bound call refuses a misaligned input at call time."""
    monkeypatch.setattr(bound, "_driver_launch", lambda: _Driver([[8]]))
    q, other = torch.zeros(64), torch.zeros(64)
    sig = {"q": "*fp32"}
    assert bound.bind(_record([(_kernel(sig), (1,), (q,), ())]), (q,), ()) is not None
    assert bound.bind(_record([(_kernel(sig), (1,), (other,), ())]), (q,), ()) is None
    assert bound.bind(_record([(_kernel(sig), (1,), (q[1:],), ())]), (q[1:],), ()) is None
    assert bound.bind(_record([(_kernel({"q": "*fp32", "x": "bf16"}), (1,), (q, 1.0), ())]),
                      (q,), ()) is None
    assert bound.bind(_record([(_kernel(sig, ctas=2), (1,), (q,), ())]), (q,), ()) is None
    assert bound.bind(_record([(_kernel(sig, global_scratch_size=128), (1,), (q,), ())]),
                      (q,), ()) is None
    assert bound.bind(_record([(_kernel(sig, instrumentation_mode="gsan"), (1,), (q,), ())]),
                      (q,), ()) is None
    assert bound.bind(_record([(_kernel({"t": ("*fp32", "*fp32")}), (1,), ((q, q),), ())]),
                      (q,), ()) is None
    assert bound.bind(_record([]), (q,), ()) is None
    # one tensor as two inputs (the query as the output): which argument took which is lost
    two = _kernel({"q": "*fp32", "out": "*fp32"})
    assert bound.bind(_record([(two, (1,), (q, q), ())]), (q, q), ()) is None
    assert bound.bind(_record([(two, (1,), (q, other), ())]), (q, other), ()) is not None
    with bound.recording() as rec:
        bound.note_launch(_kernel(sig), (1,), (q,), ())
        bound.note_unrecorded()
    assert bound.bind(rec, (q,), ()) is None
    call = bound.bind(_record([(_kernel(sig), (1,), (q,), ())]), (q,), ())
    assert not call((torch.zeros(65)[1:],), 0)
    assert call((torch.zeros(64),), 0)


def test_recording_is_per_block_and_per_thread():
    """Launches outside a ``recording()`` block, or made by another thread, are not recorded;
    blocks nest."""
    import threading

    k, q = _kernel({"q": "*fp32"}), torch.zeros(4)
    bound.note_launch(k, (1,), (q,), ())  # no recording: ignored
    with bound.recording() as outer:
        bound.note_launch(k, (1,), (q,), ())
        with bound.recording() as inner:
            bound.note_launch(k, (2,), (q,), ())
        t = threading.Thread(target=bound.note_launch, args=(k, (3,), (q,), ()))
        t.start()
        t.join()
    assert [g for _, g, *_ in outer.launches] == [(1,)]
    assert [g for _, g, *_ in inner.launches] == [(2,)]


def test_bound_call_from_several_threads_launches_each_callers_tensors(monkeypatch):
    """Threads sharing a bound call (its parameter blocks are shared) each launch their own
    addresses: every launch the driver sees pairs one caller's query with that caller's
    output."""
    import threading

    q, out = torch.zeros(64), torch.zeros(64)
    k = _kernel({"q": "*fp32", "out": "*fp32", "n": "i32"})
    seen: list[tuple[int, int]] = []

    def driver(config_addr, function, params_addr, extra):
        params = (ctypes.c_void_p * 2).from_address(params_addr)
        a = _u64(ctypes.string_at(params[0], 8))
        b = _u64(ctypes.string_at(params[1], 8))
        seen.append((a, b))
        return 0

    monkeypatch.setattr(bound, "_driver_launch", lambda: driver)
    call = bound.bind(_record([(k, (1,), (q, out, 64), ())]), (q, out), ())
    pairs = [(torch.zeros(64), torch.zeros(64)) for _ in range(4)]

    def work(qi, oi):
        for _ in range(300):
            assert call((qi, oi), 0)

    import sys

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter allows
    try:
        threads = [threading.Thread(target=work, args=p) for p in pairs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    allowed = {(qi.data_ptr(), oi.data_ptr()) for qi, oi in pairs}
    assert len(seen) == 1200 and set(seen) == allowed


def test_bound_call_zeroes_scratch_that_must_start_at_zero(monkeypatch):
    """The fused split-K merge's counters must be zero when a call starts (each call leaves
    them at zero): a recording that noted such scratch gets a bound call whose per-stream
    scratch is allocated zeroed; one that did not keeps uninitialized scratch."""
    q, out = torch.zeros(64), torch.zeros(64)
    po, cnt = torch.zeros(10), torch.zeros(4, dtype=torch.int32)
    attn = _kernel({"q": "*bf16", "out": "*bf16", "po": "*fp32", "cnt": "*i32"})
    with bound.recording() as rec:
        bound.note_launch(attn, (4,), (q, out, po, cnt), ())
        bound.note_scratch(po)
        bound.note_scratch(cnt, zeroed=True)
    driver = _Driver([[8, 8, 8, 8, 8, 8]])
    monkeypatch.setattr(bound, "_driver_launch", lambda: driver)
    allocated = []

    def fake(nbytes, dtype, device, _fill=None):
        t = torch.full((nbytes,), 0x5A if _fill is None else _fill, dtype=dtype)
        allocated.append(t)
        return t
    monkeypatch.setattr(torch, "empty", lambda n, dtype, device: fake(n, dtype, device))
    monkeypatch.setattr(torch, "zeros", lambda n, dtype, device: fake(n, dtype, device, 0))
    monkeypatch.setattr(bound, "_capturing", lambda device: False)
    call = bound.bind(rec, (q, out), ())
    assert call is not None and call.zeroed and call.scratch_offsets == [0, 256]
    assert call((q, out), 1) and len(allocated) == 1 and not allocated[0].any()

    with bound.recording() as plain:
        bound.note_launch(attn, (4,), (q, out, po, cnt), ())
        bound.note_scratch(po, cnt)
    call = bound.bind(plain, (q, out), ())
    assert call is not None and not call.zeroed
    assert call((q, out), 1) and len(allocated) == 2 and (allocated[1] == 0x5A).all()


class _Encoder:
    """Stands in for ``cuTensorMapEncodeTiled``: records each encoding's arguments and writes
    the global address into the map's first 8 bytes, as a marker the driver stand-in reads."""

    def __init__(self):
        self.calls: list[tuple] = []

    def __call__(self, addr, dtype, rank, gaddr, dims, strides, box, ones, inter, swizzle, l2,
                 fill):
        self.calls.append((dtype, rank, gaddr, list(dims[:rank]), list(strides[:rank - 1]),
                           list(box[:rank]), list(ones[:rank]), inter, swizzle, l2, fill))
        ctypes.memmove(addr, struct.pack("<Q", gaddr), 8)
        return 0


def _desc(base, shape, strides, block, padding="zero"):
    """A stand-in for a Gluon TensorDescriptor (the fields `bind` reads)."""
    return SimpleNamespace(base=base, shape=list(shape), strides=list(strides),
                           block_shape=list(block), padding=padding)


def test_bound_call_encodes_tma_descriptors_fixed_once_per_call_new(monkeypatch):
    """A TMA descriptor parameter reaches the driver as Triton's launcher passes it: the
    128-byte map (from its own 128-byte aligned buffer), then the shape as i32 and the strides
    as i64. A descriptor over a fixed tensor is encoded once when bound; one over an input is
    encoded again on every call over that call's address; one over a view into the scratch
    (the dequantized workspace) over the call's scratch plus the view's offset. Dimensions go
    to the driver innermost first with byte strides, as Triton's ``fill_tma_descriptor``."""
    from triton.backends.nvidia.driver import TMA_DTYPE_DEVICE_TO_HOST

    enc = _Encoder()
    monkeypatch.setattr(bound, "_driver_encode_tiled", lambda: enc)
    cache = torch.zeros(64, 16, 8, 128, dtype=torch.bfloat16)
    q, out = torch.zeros(300, 32, 128, dtype=torch.bfloat16), torch.zeros(300, 32, 128)
    ws = torch.zeros(2, 4, 16, 128, dtype=torch.bfloat16)
    meta = {"swizzle": 3, "elem_size": 2, "elem_type": 9, "block_size": [64, 128],
            "fp4_padded": False}
    qmeta = {**meta, "block_size": [16, 4, 128]}
    kd = _desc(cache, [1024, 1024], [1024, 1], [64, 128])
    qd = _desc(q, q.shape, q.stride(), [16, 4, 128], padding="nan")
    wd = _desc(ws[1], [64, 128], [128, 1], [64, 128])
    sig = {"q": "*bf16", "k_desc": "tensordesc<bf16[64, 128]>", "q_desc":
           "tensordesc<bf16[16, 4, 128]>", "w_desc": "tensordesc<bf16[64, 128]>",
           "out": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    kernel = _kernel(sig, tensordesc_meta=[meta, qmeta, meta])
    with bound.recording() as rec:
        bound.note_launch(kernel, (132,), (q, kd, qd, wd, out, 7), (64,))
        bound.note_scratch(ws)
    # parameters: q, k map, 2 i32, 2 i64, q map, 3 i32, 3 i64, w map, 2 i32, 2 i64, out, n,
    # Triton's two scratch pointers
    sizes = [8, 128, 4, 4, 8, 8, 128, 4, 4, 4, 8, 8, 8, 128, 4, 4, 8, 8, 8, 4, 8, 8]
    driver = _Driver([sizes])
    monkeypatch.setattr(bound, "_driver_launch", lambda: driver)
    monkeypatch.setattr(bound, "_capturing", lambda device: False)
    call = bound.bind(rec, (q, out), (cache,))
    assert call is not None
    host_bf16 = TMA_DTYPE_DEVICE_TO_HOST[9]
    assert enc.calls == [(host_bf16, 2, cache.data_ptr(), [1024, 1024], [2048], [128, 64],
                          [1, 1], 0, 3, 2, 0)]  # the fixed one, once
    q2, out2 = torch.zeros_like(q), torch.zeros_like(out)
    assert call((q2, out2), 0x5EED)
    v = driver.launches[0][7]
    assert _u64(v[0]) == q2.data_ptr() and _u64(v[1][:8]) == cache.data_ptr()
    assert [struct.unpack("<i", b)[0] for b in v[2:4]] == [1024, 1024]
    assert [struct.unpack("<q", b)[0] for b in v[4:6]] == [1024, 1]
    assert _u64(v[6][:8]) == q2.data_ptr()
    assert [struct.unpack("<i", b)[0] for b in v[7:10]] == [300, 32, 128]
    assert [struct.unpack("<q", b)[0] for b in v[10:13]] == [4096, 128, 1]
    scratch_base = _u64(v[13][:8]) - ws[1].data_ptr() + ws.data_ptr()
    assert scratch_base == call._scratch[0x5EED].data_ptr() != ws.data_ptr()
    assert _u64(v[18]) == out2.data_ptr() and struct.unpack("<i", v[19])[0] == 7
    assert v[20] == v[21] == bytes(8)
    # per call: the query's map (NaN fill for "nan" padding, dims innermost first, byte
    # strides of the outer two) and the workspace's, over this call's addresses
    assert enc.calls[1:] == [
        (host_bf16, 3, q2.data_ptr(), [128, 32, 300], [256, 8192], [128, 4, 16], [1, 1, 1],
         0, 3, 2, 1),
        (host_bf16, 2, scratch_base + ws[1].data_ptr() - ws.data_ptr(), [128, 64], [256],
         [128, 64], [1, 1], 0, 3, 2, 0)]
    # the map buffers are 128-byte aligned, as the kernel parameter requires
    assert all(d.addr % 128 == 0 for k in call.kernels for d in k.descs)
    # a map that already holds the call's address is not encoded again: the same query and
    # the workspace kept for the stream need nothing, a new query its own map only
    assert call((q2, out2), 0x5EED) and len(enc.calls) == 3
    assert _u64(driver.launches[-1][7][6][:8]) == q2.data_ptr()
    q3 = torch.zeros_like(q)
    assert call((q3, out2), 0x5EED) and enc.calls[3:] == [
        (host_bf16, 3, q3.data_ptr(), [128, 32, 300], [256, 8192], [128, 4, 16], [1, 1, 1],
         0, 3, 2, 1)]
    assert _u64(driver.launches[-1][7][6][:8]) == q3.data_ptr()
    # a driver that refuses an encoding sends the call back to the ordinary path
    for k in call.kernels:
        for d, *_ in k.tmas:
            d._encode = lambda *a: 1
    assert not call((q2, out2), 0x5EED)


def test_bound_call_refuses_descriptors_it_cannot_encode(monkeypatch):
    """`bind` returns None for a descriptor over a tensor that is neither an input, scratch
    nor fixed; a kernel compiled without TMA metadata for it (Triton then passes a pointer
    and sizes instead of a map); fp4-padded descriptors; and a driver without the encoder."""
    enc = _Encoder()
    monkeypatch.setattr(bound, "_driver_encode_tiled", lambda: enc)
    monkeypatch.setattr(bound, "_driver_launch", lambda: _Driver([[8]]))
    cache, other = torch.zeros(64, 128, dtype=torch.bfloat16), torch.zeros(64, 128)
    meta = {"swizzle": 3, "elem_size": 2, "elem_type": 9, "block_size": [64, 128],
            "fp4_padded": False}
    sig = {"d": "tensordesc<bf16[64, 128]>"}

    def bind(desc, metas, fixed=(cache,)):
        with bound.recording() as rec:
            bound.note_launch(_kernel(sig, tensordesc_meta=metas), (1,), (desc,), ())
        return bound.bind(rec, (other,), fixed)

    ok = _desc(cache, [64, 128], [128, 1], [64, 128])
    assert bind(ok, [meta]) is not None
    assert bind(ok, [meta], fixed=()) is None
    assert bind(ok, None) is None
    assert bind(ok, [{**meta, "fp4_padded": True}]) is None
    assert bind(_desc(cache, [64, 128], [128, 2], [64, 128]), [meta]) is None
    monkeypatch.setattr(bound, "_driver_encode_tiled", lambda: None)
    assert bind(ok, [meta]) is None


def test_recording_notes_torch_work_that_a_bound_call_would_skip(monkeypatch):
    """Allocations and views inside a recording are what a bound call reproduces (scratch) or
    needs not repeat; any other torch operation (a fill, a copy, an arange) is GPU work outside
    the recorded launches, so such a recording is not bound, unless it makes a cached constant
    (`making_constant`). Tensors noted as fixed (cached constants) are baked in and kept alive
    by the bound call."""
    monkeypatch.setattr(bound, "_driver_launch", lambda: _Driver([[8, 8, 8, 8]]))
    q = torch.zeros(64)
    k = _kernel({"q": "*fp32", "t": "*i32"})
    with bound.recording() as rec:
        ws = torch.empty(2, 8, 16)
        a, b = ws[0], ws[1].view(-1)
        table = torch.empty(4, dtype=torch.int32)
        bound.note_fixed(table)
        bound.note_launch(k, (1,), (q, table), ())
    assert not rec.torch_ops and a is not b
    call = bound.bind(rec, (q,), ())
    assert call is not None and call.fixed == (table,)
    with bound.recording() as rec:
        torch.arange(4, dtype=torch.int32)
        t = torch.zeros(3)
        t.add_(1)
        bound.note_launch(k, (1,), (q, table), ())
        bound.note_fixed(table)
    assert rec.torch_ops and "aten::arange" in rec.torch_ops[0]
    assert bound.bind(rec, (q,), ()) is None
    # a cached constant made on first use inside the recording is not work to repeat
    with bound.recording() as rec:
        with bound.making_constant():
            table = torch.arange(4, dtype=torch.int32)
        bound.note_fixed(table)
        bound.note_launch(k, (1,), (q, table), ())
    assert not rec.torch_ops and bound.bind(rec, (q,), ()) is not None


def test_bound_prefill_follows_each_calls_token_count(monkeypatch):
    """A prefill's key leaves its token count free (``free_rows``): where every recorded kernel
    is a row-free prefill kernel, the query's TMA descriptor is encoded with each call's rows
    and its i32 shape parameter follows; other kernels are pinned to the recorded rows (a call
    with other rows goes back to the ordinary path); a descriptor over a free-rows input whose
    outermost dimension is not its rows cannot follow and is not bound."""
    enc = _Encoder()
    monkeypatch.setattr(bound, "_driver_encode_tiled", lambda: enc)
    monkeypatch.setattr(bound, "_capturing", lambda device: False)
    q, out = torch.zeros(300, 32, 128, dtype=torch.bfloat16), torch.zeros(300, 32, 128)
    meta = {"swizzle": 3, "elem_size": 2, "elem_type": 9, "block_size": [16, 4, 128],
            "fp4_padded": False}
    sig = {"q": "*bf16", "q_desc": "tensordesc<bf16[16, 4, 128]>", "out": "*fp32"}
    qd = _desc(q, q.shape, q.stride(), [16, 4, 128])

    def record(name, desc=qd):
        with bound.recording() as rec:
            bound.note_launch(_kernel(sig, name=name, tensordesc_meta=[meta]), (132,),
                              (q, desc, out), ())
        return rec

    sizes = [8, 128, 4, 4, 4, 8, 8, 8, 8, 8, 8]
    driver = _Driver([sizes])
    monkeypatch.setattr(bound, "_driver_launch", lambda: driver)
    call = bound.bind(record("_ws_prefill_kernel"), (q, out), (), free_rows=(0, 1))
    assert call is not None and call.pinned == ()
    q2, out2 = torch.zeros(77, 32, 128, dtype=torch.bfloat16), torch.zeros(77, 32, 128)
    assert call((q2, out2), 0)
    v = driver.launches[-1][7]
    assert [struct.unpack("<i", b)[0] for b in v[2:5]] == [77, 32, 128]
    assert enc.calls[-1][2:4] == (q2.data_ptr(), [128, 32, 77])
    assert call((q, out), 0)  # and back
    assert [struct.unpack("<i", b)[0] for b in driver.launches[-1][7][2:5]] == [300, 32, 128]
    assert enc.calls[-1][3] == [128, 32, 300]
    # the first 50 rows of the same query: same address, other rows, so encoded again
    n = len(enc.calls)
    last = enc.calls[n - 1]
    assert call((q[:50], out[:50]), 0)
    assert enc.calls[n:] == [(*last[:2], q.data_ptr(), [128, 32, 50], *last[4:])]
    # a kernel that is not known to be row-free: pinned to the recorded 300 rows
    call = bound.bind(record("_paged_attention_kernel"), (q, out), (), free_rows=(0, 1))
    assert call is not None and call.pinned == ((0, 300), (1, 300))
    n = len(driver.launches)
    assert not call((q2, out2), 0) and len(driver.launches) == n
    assert call((q, out), 0)
    # a descriptor over the query flattened to [tokens * heads, D]: its rows are not the
    # query's, so it cannot follow a new token count
    flat = _desc(q, [300 * 32, 128], [128, 1], [64, 128])
    with bound.recording() as rec:
        bound.note_launch(_kernel(sig, name="_ws_prefill_kernel",
                                  tensordesc_meta=[{**meta, "block_size": [64, 128]}]),
                          (132,), (q, flat, out), ())
    assert bound.bind(rec, (q, out), (), free_rows=(0, 1)) is None


def test_bound_call_keeps_small_scratch_and_allocates_large_scratch_per_call(monkeypatch):
    """Scratch up to `KEEP_SCRATCH_BYTES` (split-K partials) is kept per stream by the bound
    call; larger scratch (a prefill's dequantized workspace) is allocated for each call, so
    bound calls over many signatures do not each hold hundreds of MB."""
    q = torch.zeros(64)
    ws = torch.zeros(1000)  # 4000 bytes of scratch
    k = _kernel({"q": "*fp32", "ws": "*fp32"})
    with bound.recording() as rec:
        bound.note_launch(k, (1,), (q, ws), ())
        bound.note_scratch(ws)
    driver = _Driver([[8, 8, 8, 8]])
    monkeypatch.setattr(bound, "_driver_launch", lambda: driver)
    monkeypatch.setattr(bound, "_capturing", lambda device: False)
    allocated = []
    real_empty = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *a, **kw: allocated.append(a) or real_empty(*a, **kw))
    call = bound.bind(rec, (q,), ())
    assert call((q,), 7) and call((q,), 7) and len(allocated) == 1  # kept for the stream
    monkeypatch.setattr(bound, "KEEP_SCRATCH_BYTES", 1024)
    call = bound.bind(rec, (q,), ())
    assert call((q,), 7) and call((q,), 7) and len(allocated) == 3  # one per call
    assert not call._scratch


def test_bound_prefill_follows_each_calls_sequence_count(monkeypatch):
    """A prefill's key leaves its sequence count free within a bucket (``free_seqs``): where
    every recorded launch declared how it follows the count (`bound.PerSeq`: its grid as a
    function of the count, and the argument that is the count), each call launches over its
    own count's grid with its own count in that argument. A launch without a rule, a rule that
    does not give the recorded grid, or a count argument that is not the recorded count or
    was compiled as a constant pins the call to the recorded count (other counts go back to
    the ordinary path)."""
    monkeypatch.setattr(bound, "_capturing", lambda device: False)
    sig = {"q": "*bf16", "bt": "*i32", "sl": "*i32", "nq": "i32", "num_seqs": "i32",
           "hkv": "i32", "BLOCK": "constexpr"}
    q = torch.zeros(64, dtype=torch.bfloat16)
    bt, sl = torch.zeros(3, 16, dtype=torch.int32), torch.zeros(3, dtype=torch.int32)
    driver = _Driver([[8, 8, 8, 4, 4, 4, 8, 8]])
    monkeypatch.setattr(bound, "_driver_launch", lambda: driver)

    def record(rule, signature=sig, count=3, grid=(4 * 3 * 8,)):
        with bound.recording() as rec:
            bound.note_launch(_kernel(signature, name="_prefill_kernel"), grid,
                              (q, bt, sl, 4, count, 8), (64,), rule)
        return bind_(rec)

    def bind_(rec):
        return bound.bind(rec, (q, bt, sl), (), free_seqs=2)

    def launched(call, n):
        """(grid, num_seqs argument) of a call over n sequences, None where it is refused."""
        before = len(driver.launches)
        ok = call((q, torch.zeros(n, 16, dtype=torch.int32), torch.zeros(n, dtype=torch.int32)),
                  0)
        if not ok:
            assert len(driver.launches) == before
            return None
        grid, *_, values = driver.launches[-1]
        return grid, struct.unpack("<i", values[4])[0]

    follows = bound.PerSeq(lambda n: (4 * n * 8,), 4)
    call = record(follows)
    assert call is not None and call.pinned == () and call.seq_src == 2
    assert launched(call, 4) == ((128, 1, 1), 4)
    assert launched(call, 1) == ((32, 1, 1), 1)
    assert launched(call, 3) == ((96, 1, 1), 3)
    # two-dimensional grids follow too (the dequantize pass: pages x kv heads)
    call = record(bound.PerSeq(lambda n: (n * 16, 8)), grid=(3 * 16, 8))
    assert launched(call, 2) == ((32, 8, 1), 3)  # no count argument: left as recorded

    for pinned in (record(None), record(bound.PerSeq(lambda n: (4 * n,), 4)),
                   record(bound.PerSeq(lambda n: (4 * n * 8,), 3))):
        assert pinned is not None and pinned.pinned == ((2, 3),) and pinned.seq_src == -1
        assert launched(pinned, 4) is None
        assert launched(pinned, 3) == ((96, 1, 1), 3)
    # a count of 1 specialized into the kernel as a constant: one parameter fewer
    driver.sizes = [[8, 8, 8, 4, 4, 8, 8]]
    pinned = record(follows, signature=dict(sig, num_seqs="constexpr"))
    assert pinned is not None and pinned.pinned == ((2, 3),) and pinned.seq_src == -1
    assert launched(pinned, 4) is None
