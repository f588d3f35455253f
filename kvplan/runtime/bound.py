"""Bound launches: the kernels of a planned call launched straight through the CUDA driver.

An eager decode call used to launch each of its kernels (the attention kernel, then the
split-K merge) through `_common.launch_cached`: a Python pass over 20-odd arguments to find
their specialization and addresses, then Triton's launcher, which parses every argument again
and allocates its scratch, then the driver. Everything but four tensors (query, output, block
table, sequence lengths), the split-K scratch and the stream is fixed once a decode call is
planned, so:

1. the first call of a (cache, call signature) runs the ordinary path under `recording()`,
   which notes each launch (`note_launch`, compiled kernel and argument values) and the
   scratch tensors the call allocated (`note_scratch`);
2. `bind` packs each kernel's parameter block once (one 8-byte slot per parameter, the
   driver reads the parameter's own size from each), baking in every argument that is not an
   input or scratch, and records which slots take which per-call address;
3. a later call (`BoundCall.__call__`) writes the input and scratch addresses into those
   slots and calls ``cuLaunchKernelEx`` (ctypes) once per kernel, with the launch attributes
   (programmatic dependent launch, cooperative grid) the compiled kernel asks for.

Anything `bind` cannot reproduce exactly (a tensor argument that is neither an input, nor
scratch, nor a fixed cache tensor; a parameter type it does not pack; cluster launches; Triton
scratch memory; a launch that went through Triton's hooks or the interpreter; a misaligned
address) makes it return None, and the caller keeps the ordinary path. A driver error on a
bound launch also sends the call back to the ordinary path, which raises Triton's own error.
"""
from __future__ import annotations

import ctypes
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

import torch


class _LaunchConfig(ctypes.Structure):
    """``CUlaunchConfig`` (cuda.h)."""

    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint), ("blockDimX", ctypes.c_uint),
                ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.c_void_p), ("numAttrs", ctypes.c_uint)]


class _LaunchAttribute(ctypes.Structure):
    """``CUlaunchAttribute``: a 4-byte id, padding to 8, a 64-byte value union."""

    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4),
                ("value", ctypes.c_ubyte * 64)]


# CUlaunchAttributeID values (cuda.h); both attributes take an int 1 as their value
CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2
CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6

# Scalar parameter types of a Triton signature -> how their value is packed (little endian,
# into the start of an 8-byte slot); pointers ("*...") are 8-byte addresses.
_SCALAR_FORMATS = {"i1": "<b", "i8": "<b", "i16": "<h", "i32": "<i", "i64": "<q", "u1": "<B",
                   "u8": "<B", "u16": "<H", "u32": "<I", "u64": "<Q", "fp16": "<e",
                   "fp32": "<f", "f32": "<f", "fp64": "<d"}

# Triton appends two pointer parameters to every kernel: its global and profile scratch
# (null when the kernel needs none; 3.6 and 3.9 alike).
_TRITON_TRAILING_POINTERS = 2


class Recording:
    """What one ordinary-path call launched: ``launches`` as (compiled kernel, grid, argument
    values in parameter order), the scratch tensors it used, whether any must start zeroed (the
    fused split-K merge's counters, which each call leaves at zero), and whether every launch
    was seen (False once a launch took a path that records nothing)."""

    def __init__(self) -> None:
        self.launches: list[tuple] = []
        self.scratch: list[torch.Tensor] = []
        self.zeroed = False
        self.complete = True


_local = threading.local()


@contextmanager
def recording() -> Iterator[Recording]:
    """Record the launches and scratch allocations made by this thread inside the block."""
    rec = Recording()
    previous = getattr(_local, "rec", None)
    _local.rec = rec
    try:
        yield rec
    finally:
        _local.rec = previous


def note_launch(kernel, grid: tuple, pos: tuple, tail: tuple) -> None:
    """Called by `launch_cached` for each launch: its compiled kernel, grid, runtime arguments
    and the values of the parameters after them (constexprs, defaults)."""
    rec = getattr(_local, "rec", None)
    if rec is not None:
        rec.launches.append((kernel, grid, (*pos, *tail)))


def note_unrecorded() -> None:
    """Called by `launch_cached` for a launch it could not record (interpreter, hooks)."""
    rec = getattr(_local, "rec", None)
    if rec is not None:
        rec.complete = False


def note_scratch(*tensors: torch.Tensor, zeroed: bool = False) -> None:
    """Called where a call uses scratch (split-K partials; with ``zeroed``, scratch that must
    be zero when the call starts and that the call leaves at zero): a bound call allocates the
    same bytes itself, zeroed once if any of them asked for it."""
    rec = getattr(_local, "rec", None)
    if rec is not None:
        rec.scratch.extend(tensors)
        rec.zeroed = rec.zeroed or zeroed


@lru_cache(maxsize=1)
def _driver_launch():
    """``cuLaunchKernelEx`` from the driver library, or None where it cannot be loaded."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        fn = lib.cuLaunchKernelEx
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    fn.restype = ctypes.c_int
    return fn


_SCRATCH_ALIGN = 256  # each scratch tensor's offset in the one allocation a bound call makes
_data_ptr = torch.Tensor.data_ptr


class BoundKernel:
    """One kernel's launch: config, parameter block and the slots written per call."""

    __slots__ = (
        "attrs",
        "config",
        "config_addr",
        "function",
        "params",
        "params_addr",
        "slots",
        "writes",
    )

    def __init__(self, function: int, grid: tuple, block: int, shared: int, attrs: list[int],
                 packed: list[bytes], writes: list[tuple[int, int]]) -> None:
        n = len(packed)
        self.slots = (ctypes.c_uint64 * max(n, 1))()
        raw = memoryview(self.slots).cast("B")
        for i, b in enumerate(packed):
            raw[8 * i:8 * i + len(b)] = b
        base = ctypes.addressof(self.slots)
        self.params = (ctypes.c_void_p * max(n, 1))(*(base + 8 * i for i in range(n)))
        self.params_addr = ctypes.addressof(self.params)
        self.attrs = (_LaunchAttribute * max(len(attrs), 1))()
        for i, attr_id in enumerate(attrs):
            self.attrs[i].id = attr_id
            self.attrs[i].value[0] = 1
        g = (*grid, 1, 1)[:3]
        self.config = _LaunchConfig(g[0], g[1], g[2], block, 1, 1, shared, None,
                                    ctypes.addressof(self.attrs), len(attrs))
        self.config_addr = ctypes.addressof(self.config)
        self.function = function
        self.writes = tuple(writes)


class BoundCall:
    """The launches of one call signature; ``__call__(inputs, stream)`` launches them over new
    input tensors and returns False (launching nothing more) where the ordinary path must run
    instead: a misaligned input, or a driver error."""

    __slots__ = ("_launch", "_lock", "_scratch", "device", "kernels", "scratch_bytes",
                 "scratch_offsets", "zeroed")

    def __init__(self, kernels: list[BoundKernel], scratch_offsets: list[int],
                 scratch_bytes: int, device: torch.device, launch, zeroed: bool = False) -> None:
        self.kernels = kernels
        self.scratch_offsets = scratch_offsets
        self.scratch_bytes = scratch_bytes
        self.zeroed = zeroed
        self.device = device
        self._launch = launch
        self._scratch: dict[int, torch.Tensor] = {}
        self._lock = threading.Lock()

    def __call__(self, inputs: tuple, stream: int) -> bool:
        ptrs = list(map(_data_ptr, inputs))  # half the time of a comprehension
        aligned = 0
        for p in ptrs:
            aligned |= p
        if aligned & 15:  # compiled for 16-byte aligned tensors (bind checks this)
            return False
        scratch = None  # held until the launches are enqueued
        if self.scratch_bytes:
            scratch = self._scratch_for(stream)
            base = scratch.data_ptr()
            ptrs += [base + off for off in self.scratch_offsets]
        launch = self._launch
        # one caller at a time: the parameter blocks are shared, and the driver reads them
        # while ctypes has released the GIL
        with self._lock:
            for k in self.kernels:
                slots = k.slots
                for slot, src in k.writes:
                    slots[slot] = ptrs[src]
                k.config.hStream = stream
                if launch(k.config_addr, k.function, k.params_addr, None):
                    return False
        del scratch
        return True

    def _scratch_for(self, stream: int) -> torch.Tensor:
        """The scratch for a call on ``stream``: one buffer per stream, kept and reused (calls
        on one stream run in order, so a call never overwrites partials that an earlier call's
        merge still reads: the same guarantee the caching allocator gives the ordinary path's
        per-call partials). Under CUDA-graph capture, a new allocation from the graph's pool,
        freed after the call like the ordinary path's, so that graphs replayed on other streams
        never share it. Zeroed when allocated if the recording asked (``zeroed``: counters that
        every call leaves at zero; under capture the zeroing is part of the graph)."""
        new = torch.zeros if self.zeroed else torch.empty
        if _capturing(self.device):
            return new(self.scratch_bytes, dtype=torch.uint8, device=self.device)
        t = self._scratch.get(stream)
        if t is None:
            t = self._scratch[stream] = new(self.scratch_bytes, dtype=torch.uint8,
                                            device=self.device)
        return t


def _capturing(device: torch.device) -> bool:
    """Whether the current stream is capturing a CUDA graph (the private binding that
    `torch.cuda.is_current_stream_capturing` wraps; it exists only in CUDA builds)."""
    return device.type == "cuda" and torch._C._cuda_isCurrentStreamCapturing()


def aliased(inputs: tuple) -> bool:
    """Whether one tensor is passed as two of the inputs (say the query as the output): the
    recording then cannot tell which argument took which input, so such a call is not bound."""
    return len({id(t) for t in inputs}) != len(inputs)


def bind(rec: Recording, inputs: tuple, fixed: tuple) -> BoundCall | None:
    """A `BoundCall` replaying ``rec``'s launches, with ``inputs`` (tensors, matched by
    identity in the recorded arguments) and the recorded scratch supplied per call and every
    other argument baked in; ``fixed`` are the tensors allowed to be baked in (a cache's
    storage). None where the recording cannot be replayed exactly (see the module doc)."""
    launch = _driver_launch()
    if launch is None or not rec.complete or not rec.launches or aliased(inputs):
        return None
    input_ids = {id(t): i for i, t in enumerate(inputs)}
    scratch_ids: dict[int, int] = {}
    offsets: list[int] = []
    total = 0
    for t in rec.scratch:
        if id(t) in scratch_ids or id(t) in input_ids:
            continue
        scratch_ids[id(t)] = len(inputs) + len(offsets)
        offsets.append(total)
        nbytes = t.numel() * t.element_size()
        total += -(-nbytes // _SCRATCH_ALIGN) * _SCRATCH_ALIGN
    fixed_ids = {id(t) for t in fixed}
    kernels = []
    for kernel, grid, values in rec.launches:
        bound = _bind_kernel(kernel, grid, values, input_ids, scratch_ids, fixed_ids)
        if bound is None:
            return None
        kernels.append(bound)
    return BoundCall(kernels, offsets, total, inputs[0].device, launch, rec.zeroed)


def _bind_kernel(kernel, grid: tuple, values: tuple, input_ids: dict, scratch_ids: dict,
                 fixed_ids: set) -> BoundKernel | None:
    """One recorded launch as a `BoundKernel` (None where it cannot be reproduced)."""
    meta = kernel.metadata
    if (getattr(meta, "global_scratch_size", 0) or getattr(meta, "profile_scratch_size", 0)
            or getattr(meta, "num_ctas", 1) != 1 or getattr(meta, "tensordesc_meta", None)
            or getattr(meta, "instrumentation_mode", "")):
        # instrumented kernels (triton 3.9's gsan) take extra parameters from their launcher
        return None
    signature = list(kernel.src.signature.values())
    if len(signature) != len(values):
        return None
    packed: list[bytes] = []
    writes: list[tuple[int, int]] = []
    for ty, v in zip(signature, values, strict=True):
        if not isinstance(ty, str):
            return None  # tuple arguments
        if ty == "constexpr":
            continue
        if ty[0] == "*":
            if not isinstance(v, torch.Tensor) or v.data_ptr() & 15:
                return None
            src = input_ids.get(id(v), scratch_ids.get(id(v)))
            if src is not None:
                writes.append((len(packed), src))
                packed.append(b"")
            elif id(v) in fixed_ids:
                packed.append(struct.pack("<Q", v.data_ptr()))
            else:
                return None
            continue
        fmt = _SCALAR_FORMATS.get(ty)
        if fmt is None or isinstance(v, torch.Tensor):
            return None
        try:
            packed.append(struct.pack(fmt, v))
        except (struct.error, TypeError):
            return None
    packed += [b""] * _TRITON_TRAILING_POINTERS
    attrs = []
    if getattr(meta, "launch_pdl", False):
        attrs.append(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
    if getattr(meta, "launch_cooperative_grid", False):
        attrs.append(CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
    num_warps, num_ctas, shared = kernel.packed_metadata
    if num_ctas != 1 or kernel.function is None:
        return None
    return BoundKernel(int(kernel.function), grid, 32 * int(num_warps), int(shared), attrs,
                       packed, writes)
