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
            **meta):
    """A stand-in for Triton's compiled kernel: the fields `bind` reads."""
    return SimpleNamespace(src=SimpleNamespace(signature=signature), function=function,
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
    assert [g for _, g, _ in outer.launches] == [(1,)]
    assert [g for _, g, _ in inner.launches] == [(2,)]


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
