"""Bound launches: the kernels of a planned call launched straight through the CUDA driver.

An eager call (decode, prefill, a cache write) used to launch each of its kernels (say the
attention kernel, then the split-K merge) through `_common.launch_cached`: a Python pass over
20-odd arguments to find their specialization and addresses, then Triton's launcher, which
parses every argument again and allocates its scratch, then the driver. Everything but a few
tensors (query, output, block table, sequence lengths, query offsets; key, value, slots), the
scratch and the stream is fixed once a call is planned, so:

1. a call of a (cache, call signature) runs the ordinary path under `recording()` (decode:
   the first call; prefill and writes, whose signatures follow the batch: the second, see
   `first_sight`), which notes each launch (`note_launch`, compiled kernel and argument
   values), the scratch tensors the call allocated (`note_scratch`) and the cached constants
   it read (`note_fixed`); `keep` stores the result of step 2 for the signature;
2. `bind` packs each kernel's parameter block once (one 8-byte slot per parameter, the
   driver reads the parameter's own size from each), baking in every argument that is not an
   input or scratch, and records which slots take which per-call address;
3. a later call (`BoundCall.__call__`) writes the input and scratch addresses into those
   slots and calls ``cuLaunchKernelEx`` (ctypes) once per kernel, with the launch attributes
   (programmatic dependent launch, cooperative grid) the compiled kernel asks for.

TMA tensor descriptors (the Hopper prefill kernel's) are bound too, as Triton's launcher
passes them: a 128-byte ``CUtensorMap`` by value, then the shape (i32) and strides (i64). A
descriptor over a fixed tensor is encoded once; one over an input or scratch (the query, the
dequantized workspace) is encoded again on every call with that call's address
(``cuTensorMapEncodeTiled``, a host-only driver call), everything else about it fixed by the
call signature.

Anything `bind` cannot reproduce exactly (a tensor argument that is neither an input, nor
scratch (or a view into it), nor a fixed tensor; a parameter type it does not pack; cluster
launches; Triton scratch memory; a launch that went through Triton's hooks or the interpreter;
a misaligned address; a torch operation that ran a kernel during the recording, which a bound
call would skip) makes it return None, and the caller keeps the ordinary path. A driver error
on a bound launch also sends the call back to the ordinary path, which raises Triton's own
error.
"""
from __future__ import annotations

import ctypes
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import NamedTuple

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
    values in parameter order, `PerSeq` rule or None), the scratch tensors it used, whether
    any must start zeroed (the fused split-K merge's counters, which each call leaves at
    zero), tensors that stay valid after the call and may be baked in (``fixed``: cached
    constants such as an identity block table), whether every launch was seen (False once a
    launch took a path that records nothing), and the torch operations that may have run a
    kernel (``torch_ops``: a bound call would skip them)."""

    def __init__(self) -> None:
        self.launches: list[tuple] = []
        self.scratch: list[torch.Tensor] = []
        self.fixed: list[torch.Tensor] = []
        self.zeroed = False
        self.complete = True
        self.torch_ops: list[str] = []


_local = threading.local()

# torch operations that launch nothing on the GPU: allocations and views. Any other operation
# seen while recording (a copy, a fill, an arange, a reduction) is GPU work outside the
# recorded launches, which a bound call would not repeat.
_NO_KERNEL_OPS = frozenset({
    "aten::empty.memory_format", "aten::empty_like", "aten::empty_strided", "aten::view",
    "aten::_unsafe_view", "aten::_reshape_alias", "aten::select.int", "aten::slice.Tensor",
    "aten::as_strided", "aten::alias", "aten::unsqueeze", "aten::squeeze.dim", "aten::t",
    "aten::transpose.int", "aten::permute", "aten::expand", "aten::detach", "aten::unbind.int",
    "aten::split.Tensor", "aten::split_with_sizes", "aten::view_as_real", "aten::view_as_complex",
    "aten::lift_fresh", "aten::is_same_size"})


def _op_watch(rec: Recording):
    """A torch dispatch mode noting, in ``rec.torch_ops``, every operation outside
    `_NO_KERNEL_OPS` (None where this torch has no dispatch modes)."""
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:  # pragma: no cover (every torch this project supports has it)
        return None

    class _Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func._schema.name + ("." + func._schema.overload_name
                                        if func._schema.overload_name else "")
            if name not in _NO_KERNEL_OPS and not getattr(_local, "constant", False):
                rec.torch_ops.append(name)
            return func(*args, **(kwargs or {}))

    return _Watch()


@contextmanager
def recording() -> Iterator[Recording]:
    """Record the launches and scratch allocations made by this thread inside the block, and
    the torch operations it ran that may have launched kernels."""
    rec = Recording()
    previous = getattr(_local, "rec", None)
    _local.rec = rec
    watch = _op_watch(rec)
    try:
        if watch is None:
            rec.complete = False
            yield rec
        else:
            with watch:
                yield rec
    finally:
        _local.rec = previous


class PerSeq(NamedTuple):
    """How a launch follows its batch's sequence count ``n`` (declared by the launch site,
    `launch_cached`'s ``per_seq``): its grid is ``grid(n)`` and, where ``arg`` is not None, the
    runtime argument at that position of ``pos`` is ``n`` itself (an i32 scalar); nothing else
    about the launch may depend on ``n``."""

    grid: Callable[[int], tuple]
    arg: int | None = None


def note_launch(kernel, grid: tuple, pos: tuple, tail: tuple,
                per_seq: PerSeq | None = None) -> None:
    """Called by `launch_cached` for each launch: its compiled kernel, grid, runtime arguments
    and the values of the parameters after them (constexprs, defaults), and how the launch
    follows the sequence count where its site declared it."""
    rec = getattr(_local, "rec", None)
    if rec is not None:
        rec.launches.append((kernel, grid, (*pos, *tail), per_seq))


def note_unrecorded() -> None:
    """Called by `launch_cached` for a launch it could not record (interpreter, hooks)."""
    rec = getattr(_local, "rec", None)
    if rec is not None:
        rec.complete = False


@contextmanager
def making_constant() -> Iterator[None]:
    """Torch work inside this block makes a cached constant on its first use (an identity
    block table, a zeroed counter buffer): a recording does not count it as work a bound call
    must repeat. Note the constant with `note_fixed` (or as zeroed scratch)."""
    previous = getattr(_local, "constant", False)
    _local.constant = True
    try:
        yield
    finally:
        _local.constant = previous


def note_fixed(*tensors: torch.Tensor) -> None:
    """Called where a call reads a tensor that outlives it unchanged (a cached constant): a
    bound call bakes in its address and keeps a reference to it."""
    rec = getattr(_local, "rec", None)
    if rec is not None:
        rec.fixed.extend(tensors)


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


@lru_cache(maxsize=1)
def _driver_encode_tiled():
    """``cuTensorMapEncodeTiled`` from the driver library, or None where it cannot be loaded."""
    try:
        fn = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
    except (OSError, AttributeError):
        return None
    u32p, u64p = ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint64)
    fn.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, u64p, u64p,
                   u32p, u32p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int)
    fn.restype = ctypes.c_int
    return fn


# CUtensorMap enums (cuda.h), as Triton's launcher encodes its descriptors
_TMA_INTERLEAVE_NONE = 0
_TMA_L2_PROMOTION_128B = 2
_TMA_OOB_FILL_NAN = 1  # CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA; 0 fills zeros


class TmaDesc:
    """One ``CUtensorMap`` parameter: 128 bytes, 128-byte aligned (what Triton's launcher
    passes by value), encoded from a global address and the fixed rest of a recorded TMA
    descriptor (`_tma_desc` builds it as Triton's ``fill_tma_descriptor`` does: dimensions
    innermost first, byte strides of the outer dimensions)."""

    __slots__ = ("_args", "_at", "_buf", "_encode", "addr")

    def __init__(self, encode, elem_type: int, shape: list[int], strides: list[int],
                 elem_size: int, block: list[int], swizzle: int, fill: int) -> None:
        rank = len(shape)
        self._buf = ctypes.create_string_buffer(256)
        self.addr = (ctypes.addressof(self._buf) + 127) & ~127
        dims = (ctypes.c_uint64 * rank)(*reversed(shape))
        byte_strides = (ctypes.c_uint64 * max(rank, 1))(
            *[elem_size * st for st in reversed(strides[:-1])], 0)
        box = (ctypes.c_uint32 * rank)(*reversed(block))
        ones = (ctypes.c_uint32 * rank)(*([1] * rank))
        self._encode = encode
        self._args = (elem_type, rank, dims, byte_strides, box, ones, _TMA_INTERLEAVE_NONE,
                      swizzle, _TMA_L2_PROMOTION_128B, fill)
        self._at = -1  # the address the map holds now (-1: none, or its rows changed since)

    def set_rows(self, rows: int) -> None:
        """Set the outermost dimension (a per-call token count) for the next `encode`."""
        dims, last = self._args[2], self._args[1] - 1
        if dims[last] != rows:
            dims[last] = rows
            self._at = -1

    def encode(self, address: int) -> bool:
        """Encode the descriptor over ``address`` (nothing to do where it already holds that
        address and rows: a workspace kept per stream, a serving loop's static query buffer);
        False on a driver error."""
        if address == self._at:
            return True
        a = self._args
        if self._encode(self.addr, a[0], a[1], address, a[2], a[3], a[4], a[5], a[6], a[7],
                        a[8], a[9]):
            self._at = -1
            return False
        self._at = address
        return True


_SCRATCH_ALIGN = 256  # each scratch tensor's offset in the one allocation a bound call makes
#: Scratch up to this size is kept by a bound call, one buffer per stream (split-K partials: a
#: few MB); larger scratch (a prefill's dequantized workspace, up to hundreds of MB) is
#: allocated per call from the caching allocator like the ordinary path's, so that bound calls
#: over many signatures do not each hold one.
KEEP_SCRATCH_BYTES = 16 << 20
_data_ptr = torch.Tensor.data_ptr


class BoundKernel:
    """One kernel's launch: config, parameter block, the slots written per call (``writes``:
    slot, input or scratch index, byte offset) and the TMA descriptors encoded per call
    (``tmas``: descriptor, input or scratch index, byte offset, and for a descriptor whose
    outermost dimension is an input's per-call row count, that input's index and the slot of
    the i32 shape parameter, else -1 and -1). A launch that follows the call's sequence count
    (`PerSeq`) takes its grid from ``seq_grid(n)`` and ``n`` in slot ``seq_slot`` (-1: none)."""

    __slots__ = (
        "attrs",
        "config",
        "config_addr",
        "descs",
        "function",
        "params",
        "params_addr",
        "seq_grid",
        "seq_slot",
        "slots",
        "tmas",
        "writes",
    )

    def __init__(self, function: int, grid: tuple, block: int, shared: int, attrs: list[int],
                 packed: list, writes: list[tuple[int, int, int]],
                 tmas: tuple | list = (), seq_grid: Callable[[int], tuple] | None = None,
                 seq_slot: int = -1) -> None:
        n = len(packed)
        self.slots = (ctypes.c_uint64 * max(n, 1))()
        raw = memoryview(self.slots).cast("B")
        addrs = []
        base = ctypes.addressof(self.slots)
        for i, b in enumerate(packed):
            if isinstance(b, TmaDesc):  # passed by value from its own aligned buffer
                addrs.append(b.addr)
                continue
            raw[8 * i:8 * i + len(b)] = b
            addrs.append(base + 8 * i)
        self.descs = [b for b in packed if isinstance(b, TmaDesc)]  # kept alive with the block
        self.params = (ctypes.c_void_p * max(n, 1))(*addrs)
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
        self.tmas = tuple(tmas)
        self.seq_grid = seq_grid
        self.seq_slot = seq_slot

    def set_grid(self, grid: tuple) -> None:
        """Launch the next call over ``grid`` (one to three dimensions)."""
        c = self.config
        c.gridDimX = grid[0]
        c.gridDimY = grid[1] if len(grid) > 1 else 1
        c.gridDimZ = grid[2] if len(grid) > 2 else 1


class BoundCall:
    """The launches of one call signature; ``__call__(inputs, stream)`` launches them over new
    input tensors and returns False (launching nothing more) where the ordinary path must run
    instead: a misaligned input, or a driver error."""

    __slots__ = ("_launch", "_lock", "_scratch", "device", "fixed", "kernels", "pinned",
                 "scratch_bytes", "scratch_offsets", "seq_src", "zeroed")

    def __init__(self, kernels: list[BoundKernel], scratch_offsets: list[int],
                 scratch_bytes: int, device: torch.device, launch, zeroed: bool = False,
                 fixed: tuple = (), pinned: tuple = (), seq_src: int = -1) -> None:
        self.kernels = kernels
        self.fixed = fixed  # tensors whose addresses are baked in and that the call keeps
        # (input index, rows): inputs whose row count the caller's key leaves free but these
        # launches were bound for (a call with other rows takes the ordinary path)
        self.pinned = pinned
        # the input whose row count is the call's sequence count, which the kernels with a
        # `PerSeq` rule follow (-1: none do)
        self.seq_src = seq_src
        self.scratch_offsets = scratch_offsets
        self.scratch_bytes = scratch_bytes
        self.zeroed = zeroed
        self.device = device
        self._launch = launch
        self._scratch: dict[int, torch.Tensor] = {}
        self._lock = threading.Lock()

    def __call__(self, inputs: tuple, stream: int) -> bool:
        for i, rows in self.pinned:
            if inputs[i].shape[0] != rows:
                return False
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
        seqs = inputs[self.seq_src].shape[0] if self.seq_src >= 0 else 0
        # one caller at a time: the parameter blocks are shared, and the driver reads them
        # while ctypes has released the GIL
        with self._lock:
            for k in self.kernels:
                slots = k.slots
                for slot, src, off in k.writes:
                    slots[slot] = ptrs[src] + off
                if seqs and k.seq_grid is not None:
                    k.set_grid(k.seq_grid(seqs))
                    if k.seq_slot >= 0:
                        slots[k.seq_slot] = seqs
                for desc, src, off, rows_src, rows_slot in k.tmas:
                    if rows_src >= 0:
                        rows = inputs[rows_src].shape[0]
                        desc.set_rows(rows)
                        slots[rows_slot] = rows
                    if not desc.encode(ptrs[src] + off):
                        return False
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
        never share it; above `KEEP_SCRATCH_BYTES`, a new allocation every call (freed in
        stream order after it, as the ordinary path's). Zeroed when allocated if the recording
        asked (``zeroed``: counters that every call leaves at zero; under capture the zeroing
        is part of the graph)."""
        new = torch.zeros if self.zeroed else torch.empty
        if self.scratch_bytes > KEEP_SCRATCH_BYTES or _capturing(self.device):
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


#: Entries (bound calls, refusals, signatures seen once, recordings to try again) a caller
#: keeps per cache in its dict of bound calls; the oldest go first. Decode keys are few by
#: construction (context buckets); prefill and write keys follow the batch's token count,
#: which a serving loop may change every step.
MAX_ENTRIES = 256


_remember_lock = threading.Lock()


def remember(calls: dict, key, value) -> None:
    """``calls[key] = value`` as the newest entry, dropping the oldest beyond `MAX_ENTRIES`
    (one thread at a time: lookups need no lock, the eviction's iteration does)."""
    with _remember_lock:
        calls.pop(key, None)
        calls[key] = value
        while len(calls) > MAX_ENTRIES:
            del calls[next(iter(calls))]


def first_sight(calls: dict, key) -> bool:
    """Whether ``key`` is new in ``calls`` (then noted as seen): a signature is recorded and
    bound when it comes back, so calls whose shapes never repeat pay no recording."""
    if key in calls or (key, "seen") in calls:
        return False
    remember(calls, (key, "seen"), True)
    return True


def keep(calls: dict, key, rec: Recording, inputs: tuple, fixed: tuple,
         free_rows: tuple[int, ...] = (), free_seqs: int | None = None) -> None:
    """Store the bound call of ``rec`` under ``key`` (False where it cannot be bound; `bind`
    says what ``free_rows`` and ``free_seqs`` do). A recording in which torch ran GPU work of its own (a cached
    constant made on its first use, say) is tried again on the next call, twice at most; one
    over a misaligned input stores nothing (a later call of the signature is recorded)."""
    if any(t.data_ptr() & 15 for t in inputs):
        return  # this call's tensors cannot be bound (16-byte alignment), the next one's may
    if rec.torch_ops:
        tries = calls.get((key, "tries"), 0) + 1
        remember(calls, (key, "tries"), tries)
        if tries >= 2:
            remember(calls, key, False)
        return
    remember(calls, key, bind(rec, inputs, fixed, free_rows, free_seqs) or False)


def aliased(inputs: tuple) -> bool:
    """Whether one tensor is passed as two of the inputs (say the query as the output): the
    recording then cannot tell which argument took which input, so such a call is not bound."""
    return len({id(t) for t in inputs}) != len(inputs)


#: Kernels whose launches depend on their inputs' row count (a prefill's token count) only
#: through TMA descriptors over those inputs: no scalar, grid or scratch size follows it
#: (kvplan.runtime.prefill_gluon, kvplan.runtime.prefill). Bound with `bind`'s ``free_rows``,
#: they serve calls of any row count; other kernels are pinned to the recorded one.
ROW_FREE_KERNELS = frozenset({"_ws_prefill_kernel", "_prefill_kernel", "_dequant_pages_kernel"})


def bind(rec: Recording, inputs: tuple, fixed: tuple, free_rows: tuple[int, ...] = (),
         free_seqs: int | None = None) -> BoundCall | None:
    """A `BoundCall` replaying ``rec``'s launches, with ``inputs`` (tensors, matched by
    identity in the recorded arguments) and the recorded scratch (or views into it) supplied
    per call and every other argument baked in; ``fixed`` (a cache's storage) and the tensors
    the recording noted as fixed are the tensors allowed to be baked in. ``free_rows``: inputs
    whose row count (leading dimension) the caller's key does not fix: where every recorded
    kernel is in `ROW_FREE_KERNELS`, descriptors over them take each call's row count,
    otherwise the call is pinned to the recorded rows. ``free_seqs``: the input whose row
    count is the batch's sequence count, which the caller's key does not fix either: where
    every launch declared how it follows it (`PerSeq`, checked against the recorded grid and
    argument), each call's grids and count argument follow, otherwise the call is pinned to the
    recorded count. None where the recording cannot be replayed exactly (see the module
    doc)."""
    launch = _driver_launch()
    if (launch is None or not rec.complete or rec.torch_ops or not rec.launches
            or aliased(inputs)):
        return None
    input_ids = {id(t): i for i, t in enumerate(inputs)}
    scratch: list[tuple[int, int, int]] = []  # (storage address, bytes, source index)
    scratch_ids: set[int] = set()
    offsets: list[int] = []
    total = 0
    for t in rec.scratch:
        if id(t) in scratch_ids or id(t) in input_ids:
            continue
        scratch_ids.add(id(t))
        nbytes = t.untyped_storage().nbytes()
        scratch.append((t.untyped_storage().data_ptr(), nbytes, len(inputs) + len(offsets)))
        offsets.append(total)
        total += -(-nbytes // _SCRATCH_ALIGN) * _SCRATCH_ALIGN
    fixed_ids = {id(t) for t in (*fixed, *rec.fixed)}

    def source(t: torch.Tensor) -> tuple[int, int] | None:
        """(input or scratch index, byte offset) of a per-call tensor, else None."""
        i = input_ids.get(id(t))
        if i is not None:
            return i, 0
        addr = t.data_ptr()
        for start, nbytes, idx in scratch:
            if start <= addr and addr + _extent(t) <= start + nbytes:
                return idx, addr - start
        return None

    row_free = bool(free_rows) and all(
        getattr(kernel, "name", None) in ROW_FREE_KERNELS for kernel, *_ in rec.launches)
    dynamic_rows = {i: inputs[i].shape[0] for i in free_rows} if row_free else {}
    seqs = inputs[free_seqs].shape[0] if free_seqs is not None else 0
    seq_free = bool(seqs) and all(_follows_seqs(kernel, grid, values, rule, seqs)
                                  for kernel, grid, values, rule in rec.launches)
    kernels = []
    for kernel, grid, values, rule in rec.launches:
        bound = _bind_kernel(kernel, grid, values, source, fixed_ids, dynamic_rows,
                             rule if seq_free else None)
        if bound is None:
            return None
        kernels.append(bound)
    pinned = () if row_free else tuple((i, inputs[i].shape[0]) for i in free_rows)
    if free_seqs is not None and not seq_free:
        pinned += ((free_seqs, seqs),)
    return BoundCall(kernels, offsets, total, inputs[0].device, launch, rec.zeroed,
                     tuple(rec.fixed), pinned,
                     free_seqs if free_seqs is not None and seq_free else -1)


def _follows_seqs(kernel, grid: tuple, values: tuple, rule: PerSeq | None, seqs: int) -> bool:
    """Whether a recorded launch can follow each call's sequence count by its `PerSeq` rule:
    the rule gives the recorded grid at the recorded count, and its count argument is that
    count, compiled as a plain i32 (not specialized on its value: the kernel's
    ``do_not_specialize``)."""
    if rule is None or _grid3(rule.grid(seqs)) != _grid3(grid):
        return False
    if rule.arg is None:
        return True
    types = list(kernel.src.signature.values())
    return (rule.arg < len(values) and values[rule.arg] == seqs and type(seqs) is int
            and rule.arg < len(types) and types[rule.arg] == "i32")


def _grid3(grid: tuple) -> tuple:
    return (*grid, 1, 1)[:3]


def _extent(t: torch.Tensor) -> int:
    """Bytes from a tensor's first element to the end of its last."""
    if t.numel() == 0:
        return 0
    return (1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride(), strict=True))) \
        * t.element_size()


class _Params:
    """A kernel's parameter block as it is packed: 8-byte slots (or a `TmaDesc`), the slots
    written per call and the descriptors encoded per call (see `BoundKernel`). Each ``add_*``
    returns False where the argument cannot be bound."""

    def __init__(self, source, fixed_ids: set, dynamic_rows: dict) -> None:
        self.source, self.fixed_ids, self.dynamic_rows = source, fixed_ids, dynamic_rows
        self.packed: list = []
        self.writes: list[tuple[int, int, int]] = []
        self.tmas: list[tuple[TmaDesc, int, int, int, int]] = []

    def add_desc(self, v, meta: dict) -> bool:
        """A TMA descriptor: its map, then its shape (i32) and strides (i64)."""
        parts = _tma_desc(v, meta, self.source, self.fixed_ids)
        if parts is None:
            return False
        desc, src, shape_strides = parts
        if src is not None:
            rows_src = -1
            if src[0] in self.dynamic_rows:
                # the input's rows must be the descriptor's outermost dimension, from its
                # first element, to follow each call's row count
                if src[1] != 0 or self.dynamic_rows[src[0]] != int(v.shape[0]):
                    return False
                rows_src = src[0]
            self.tmas.append((desc, *src, rows_src,
                              len(self.packed) + 1 if rows_src >= 0 else -1))
        self.packed.append(desc)
        self.packed += shape_strides
        return True

    def add_pointer(self, v) -> bool:
        """A tensor's address: written per call (an input or scratch) or baked in (fixed)."""
        if not isinstance(v, torch.Tensor) or v.data_ptr() & 15:
            return False
        src = self.source(v)
        if src is not None:
            self.writes.append((len(self.packed), *src))
            self.packed.append(b"")
        elif id(v) in self.fixed_ids:
            self.packed.append(struct.pack("<Q", v.data_ptr()))
        else:
            return False
        return True

    def add_scalar(self, ty: str, v) -> bool:
        """A scalar of Triton type ``ty``, packed little endian."""
        fmt = _SCALAR_FORMATS.get(ty)
        if fmt is None or isinstance(v, torch.Tensor):
            return False
        try:
            self.packed.append(struct.pack(fmt, v))
        except (struct.error, TypeError):
            return False
        return True


def _bind_kernel(kernel, grid: tuple, values: tuple, source, fixed_ids: set,
                 dynamic_rows: dict | None = None,
                 per_seq: PerSeq | None = None) -> BoundKernel | None:
    """One recorded launch as a `BoundKernel` (None where it cannot be reproduced);
    ``dynamic_rows``: input index -> recorded rows, for inputs whose descriptors take each
    call's row count; ``per_seq``: the rule by which the launch follows each call's sequence
    count (`_follows_seqs` checked it)."""
    meta = kernel.metadata
    if (getattr(meta, "global_scratch_size", 0) or getattr(meta, "profile_scratch_size", 0)
            or getattr(meta, "num_ctas", 1) != 1
            or getattr(meta, "instrumentation_mode", "")):
        # instrumented kernels (triton 3.9's gsan) take extra parameters from their launcher
        return None
    desc_meta = list(getattr(meta, "tensordesc_meta", None) or ())
    signature = list(kernel.src.signature.values())
    if len(signature) != len(values):
        return None
    params = _Params(source, fixed_ids, dynamic_rows or {})
    seq_slot = -1
    for i, (ty, v) in enumerate(zip(signature, values, strict=True)):
        if not isinstance(ty, str):
            return None  # tuple arguments
        if ty == "constexpr":
            continue
        if per_seq is not None and i == per_seq.arg:
            seq_slot = len(params.packed)
        if ty.startswith("tensordesc"):
            # without TMA metadata the kernel reads the descriptor as a pointer and sizes,
            # which is not packed here
            ok = bool(desc_meta) and params.add_desc(v, desc_meta.pop(0))
        elif ty[0] == "*":
            ok = params.add_pointer(v)
        else:
            ok = params.add_scalar(ty, v)
        if not ok:
            return None
    num_warps, num_ctas, shared = kernel.packed_metadata
    if desc_meta or num_ctas != 1 or kernel.function is None:
        return None
    attrs = []
    if getattr(meta, "launch_pdl", False):
        attrs.append(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
    if getattr(meta, "launch_cooperative_grid", False):
        attrs.append(CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
    packed = params.packed + [b""] * _TRITON_TRAILING_POINTERS
    return BoundKernel(int(kernel.function), grid, 32 * int(num_warps), int(shared), attrs,
                       packed, params.writes, params.tmas,
                       per_seq.grid if per_seq is not None else None, seq_slot)


def _tma_dtype(meta_elem_type: int) -> int | None:
    """The host ``CUtensorMapDataType`` of a descriptor's device-side element type, by
    Triton's own table (None where this Triton has none)."""
    try:
        from triton.backends.nvidia.driver import TMA_DTYPE_DEVICE_TO_HOST
    except ImportError:
        return None
    return TMA_DTYPE_DEVICE_TO_HOST.get(meta_elem_type)


def _tma_desc(d, meta: dict, source, fixed_ids: set):
    """A recorded TMA descriptor argument as (its `TmaDesc`, the (index, offset) of a per-call
    base or None for a fixed one (then encoded here), its shape and strides packed as the
    parameters that follow it: i32 each, then i64 each). None where it cannot be bound."""
    encode = _driver_encode_tiled()
    base = getattr(d, "base", None)
    shape, strides = list(getattr(d, "shape", ())), list(getattr(d, "strides", ()))
    if (encode is None or not isinstance(base, torch.Tensor) or not isinstance(meta, dict)
            or meta.get("fp4_padded") or not shape or len(shape) != len(strides)
            or strides[-1] != 1 or base.data_ptr() & 15):
        return None
    elem_type = _tma_dtype(meta.get("elem_type", -1))
    if elem_type is None:
        return None
    try:
        desc = TmaDesc(encode, elem_type, [int(n) for n in shape], [int(st) for st in strides],
                       int(meta["elem_size"]), [int(b) for b in meta["block_size"]],
                       int(meta["swizzle"]), _TMA_OOB_FILL_NAN if d.padding == "nan" else 0)
        tail = [struct.pack("<i", int(n)) for n in shape] + \
            [struct.pack("<q", int(st)) for st in strides]
    except (KeyError, TypeError, ValueError, AttributeError, struct.error):
        return None
    src = source(base)
    if src is None and (id(base) not in fixed_ids or not desc.encode(base.data_ptr())):
        return None  # neither per call nor fixed, or the driver refused the encoding
    return desc, src, tail
