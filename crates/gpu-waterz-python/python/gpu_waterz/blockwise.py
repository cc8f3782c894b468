"""Exact blockwise decoding of affinity volumes larger than memory, in
parallel on Dask (``dask.distributed``) or in this process.

``agglomerate(affinities, output, thresholds, block_shape, client=...)``
gives the same fragments (waterz's labels, not only its partition) and the
same segmentations as decoding the whole volume at once in exact
arithmetic (integer contact statistics merged in waterz's serial order:
the reference that the GPU pipeline equals on tie-free input; stock
waterz's float32 statistics can order near-ties differently), while every
task reads one block.

The steps (``gpu_waterz_blockwise`` in Rust documents each):

1. per block: the watershed's mask and corners, and the division of every
   plateau that stays inside the block (reads the block's affinities with
   one voxel below and two above);
2. once: the division of the plateaus that cross block faces, over their
   voxels only;
3. per block: basins inside the block, with their faces;
4. once: basins joined across faces and numbered as waterz numbers them;
5. per block: the region graph's faces in the block and across its lower
   faces (re-reads the block's affinities);
6. once: the graph summed over blocks and merged to every threshold;
7. per block: the segmentations written to the output, one chunk per block.

What stays on the workers between steps is one byte per voxel (after
step 1) and then four (after step 3). What travels to the client: the
voxels of plateaus that cross faces, one entry per basin per block, the
block faces, and the region graph; each block's write task gets the rows
of step 6's tables for its components (8 bytes per component per
threshold). An affinity array in memory is sent to each worker once; a path
is what travels best (each task reads its block).
"""

import os
import shutil
import threading
import time
import uuid

import numpy as np

from . import _native

__all__ = ["agglomerate", "BlockwiseResult", "ImplicitCells"]


class BlockwiseResult(dict):
    """What ``agglomerate`` did: ``n_fragments``, ``thresholds``,
    ``n_blocks``, ``open_voxels`` (voxels of plateaus that crossed a block
    face), ``n_edges`` (region-graph pairs summed over blocks, counting a
    pair once per block that holds it), ``gathered_bytes`` (what the global
    steps read from the workers), ``sent_bytes`` (what this process sent
    with the tasks: settled directions, fragment ids, the layers before
    blocks' faces, the rows of the segment tables), ``moved_bytes`` (a
    block's results copied between workers because a later task of the
    block ran on another worker: 0 without a client), ``seconds`` (per
    step), ``output`` and ``merged_on`` (``"cpu"`` or ``"gpu"``: where the
    merge ran)."""

    __getattr__ = dict.__getitem__


class ImplicitCells:
    """A generated affinity volume that any block computes alone, for scale
    runs without a file: CNN-like affinities of cells seeded on a grid of
    ``cell`` voxels (``gpu-waterz generate --implicit``'s field, without
    merge and split bait). Call it with ``(lo, hi)`` for the affinities of
    voxels ``lo..hi``; pass it as ``affinities`` to :func:`agglomerate`
    (it pickles to its parameters), whose tasks then make each block
    themselves: on the worker's GPU when the steps run there, the same
    values as on the host."""

    def __init__(self, shape, seed=1, cell=(48, 24, 24)):
        shape = tuple(int(s) for s in shape)
        if len(shape) != 3 or min(shape) < 1:
            raise ValueError(f"shape must be three positive extents (z, y, x), not {shape}")
        self.dims = shape
        self.shape = (3,) + shape
        self.seed = int(seed)
        self.cell = tuple(int(c) for c in cell)

    def __call__(self, lo, hi):
        return _native.implicit_cell_affinities(self.seed, list(self.cell), list(self.dims), list(lo), list(hi))


# CPython 3.11 keeps the AST constructor's recursion depth per interpreter,
# not per thread: two threads parsing at once (NumPy parses each .npy header
# with ``ast.literal_eval``) can fail with "SystemError: AST constructor
# recursion depth mismatch" (python/cpython#106905). Every .npy header this
# module reads is parsed under this lock; the array data is read outside it.
_NPY_HEADER_LOCK = threading.Lock()


def _open_path(spec):
    """The array that ``spec`` names: ``FILE.npy`` (memory-mapped),
    ``FILE.h5:DATASET`` or ``FILE.hdf5:DATASET`` (h5py), ``DIR`` (a zarr
    array) or ``DIR:ARRAY`` (an array of a zarr group)."""
    path, _, key = spec.partition(":") if not os.path.exists(spec) else (spec, "", "")
    if path.endswith(".npy"):
        with _NPY_HEADER_LOCK:
            return np.load(path, mmap_mode="r")
    if path.endswith((".h5", ".hdf5", ".hdf")):
        import h5py

        if not key:
            raise ValueError(f"{spec}: name the HDF5 dataset, as FILE.h5:DATASET")
        return h5py.File(path, "r")[key]
    import zarr

    return zarr.open_group(path, mode="r")[key] if key else zarr.open_array(path, mode="r")


class _Source:
    """Affinities read by region: a path (``.npy``, ``FILE.h5:DATASET``, a
    zarr array or ``GROUP:ARRAY``; opened again in each task), a zarr or
    numpy array or anything sliced like one, or a callable ``f(lo, hi)``
    that returns the ``(3, z, y, x)`` affinities of voxels ``lo..hi``."""

    def __init__(self, affinities, shape=None):
        self.path = None
        self.array = None
        self.function = None
        if isinstance(affinities, (str, os.PathLike)):
            self.path = os.fspath(affinities)
            self.shape = tuple(_open_path(self.path).shape)
        elif callable(affinities) and not isinstance(affinities, np.ndarray):
            shape = shape if shape is not None else getattr(affinities, "shape", None)
            if shape is None:
                raise ValueError("a callable affinity source needs shape=(3, z, y, x)")
            self.function = affinities
            self.shape = tuple(int(s) for s in shape)
        else:
            self.array = affinities
            self.shape = tuple(affinities.shape)
        if len(self.shape) != 4 or self.shape[0] < 3 or 0 in self.shape:
            raise ValueError(f"affinities must be (3, z, y, x) with no empty axis, not {self.shape}")

    def __getstate__(self):
        state = dict(self.__dict__)
        if self.path is not None:
            state["array"] = None
        return state

    def read(self, lo, hi):
        if self.function is not None:
            values = np.asarray(self.function(tuple(lo), tuple(hi)))
            expected = (3,) + tuple(h - l for l, h in zip(lo, hi))
            if values.shape != expected:
                raise ValueError(f"the affinity source gave {values.shape} for {lo}..{hi}, not {expected}")
        else:
            if self.array is None:
                self.array = _open_path(self.path)
            values = np.asarray(self.array[0:3, lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]])
        if values.dtype == np.uint8:
            # uint8 codes (k / 255) go to the native steps as they are: the
            # GPU's upload them so (a quarter of float32's bytes), the CPU's
            # read them as float32.
            return np.ascontiguousarray(values)
        if values.dtype != np.float32:
            if values.dtype.kind not in "fiu":
                raise ValueError(f"affinities of dtype {values.dtype} are not taken")
            values = values.astype(np.float32)
        # NaN and infinity are refused by the native step 1, with their voxel.
        return np.ascontiguousarray(values)


def _c(a, dtype):
    """``a`` as a C-contiguous, aligned array of ``dtype`` (arrays that come
    back from Dask's serialisation may be neither)."""
    return None if a is None else np.require(a, dtype=dtype, requirements=("C", "A"))


def _blocks(dims, block_shape):
    counts = [-(-d // b) for d, b in zip(dims, block_shape)]
    blocks = []
    for z in range(counts[0]):
        for y in range(counts[1]):
            for x in range(counts[2]):
                at = (z, y, x)
                lo = tuple(a * b for a, b in zip(at, block_shape))
                hi = tuple(min(l + b, d) for l, b, d in zip(lo, block_shape, dims))
                blocks.append((at, lo, hi))
    return counts, blocks


# The per-block steps, as plain functions of their inputs (tasks).

class _Spilled:
    """A block's array kept in a ``.npy`` file instead of in memory."""

    def __init__(self, path):
        self.path = path


def _kept(value, spill):
    """``value`` (an array, or the bytes of a block's packed components),
    or with ``spill`` (a file path) the value written there."""
    if spill is None:
        return value
    if isinstance(value, bytes):
        with open(spill, "wb") as f:
            f.write(value)
    else:
        np.save(spill, value)
    return _Spilled(spill)


def _read_npy(path):
    """The array in the .npy file ``path``, read into memory, its header
    parsed under :data:`_NPY_HEADER_LOCK`."""
    fmt = np.lib.format
    with open(path, "rb") as f:
        with _NPY_HEADER_LOCK:
            version = fmt.read_magic(f)
            if version == (1, 0):
                shape, fortran_order, dtype = fmt.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran_order, dtype = fmt.read_array_header_2_0(f)
            else:
                f.seek(0)
                return np.load(f)
        count = int(np.prod(shape, dtype=np.int64))
        data = np.fromfile(f, dtype=dtype, count=count)
    if data.size != count:
        raise ValueError(f"{path}: the file ends after {data.size} of its {count} elements")
    if fortran_order:
        return data.reshape(shape[::-1]).transpose()
    return data.reshape(shape)


def _load(value):
    if not isinstance(value, _Spilled):
        return value
    if value.path.endswith(".npy"):
        return _read_npy(value.path)
    with open(value.path, "rb") as f:
        return f.read()


def _generated(source):
    """The :class:`ImplicitCells` that ``source`` reads, or None: its blocks
    are made by the native steps themselves (on the worker's GPU when the
    steps run there), not read here."""
    return source.function if isinstance(source.function, ImplicitCells) else None


def _plateaus(source, dims, lo, hi, low, high, spill=None, backend="cpu"):
    # Where this worker runs the step: the GPU's reads one more voxel below.
    steps = _native.blockwise_steps(backend)
    generated = _generated(source)
    if generated is not None:
        bits, index, mask = _native.blockwise_local_plateaus_implicit(
            generated.seed, list(generated.cell), list(dims), list(lo), list(hi), low, high, steps)
        return _kept(bits, spill), index, mask
    below = 2 if steps == "gpu" else 1
    halo_lo = tuple(max(l - below, 0) for l in lo)
    halo_hi = tuple(min(h + 2, d) for h, d in zip(hi, dims))
    affs = source.read(halo_lo, halo_hi)
    bits, index, mask = _native.blockwise_local_plateaus(affs, list(dims), list(lo), list(hi), low, high, steps)
    return _kept(bits, spill), index, mask


def _open_part(plateaus):
    return plateaus[1], plateaus[2]


def _basins(dims, lo, hi, plateaus, settled, spill=None, backend="cpu"):
    # The components come back packed (their runs through zstd, about a
    # twentieth of four bytes per voxel): what the block keeps, and what
    # moves when a later task runs elsewhere.
    bits, index, mask = plateaus
    out = _native.blockwise_basins_packed(list(dims), list(lo), list(hi), _c(_load(bits), np.uint8),
                                          _c(index, np.uint64), _c(mask, np.uint8), _c(settled, np.uint8),
                                          _native.blockwise_steps(backend))
    if isinstance(bits, _Spilled):
        os.remove(bits.path)
    return _kept(out[0], spill), out[1:]


def _summary(basins):
    return basins[1]


def _edges(source, dims, lo, hi, basins, ids, lower, backend="cpu"):
    generated = _generated(source)
    if generated is not None:
        return _native.blockwise_edges_implicit_packed(
            generated.seed, list(generated.cell), list(dims), list(lo), list(hi), _load(basins[0]),
            _c(ids, np.uint64), [_c(layer, np.uint64) for layer in lower], _native.blockwise_steps(backend))
    affs = source.read(lo, hi)
    return _native.blockwise_edges_packed(list(dims), list(lo), list(hi), _load(basins[0]),
                                          _c(ids, np.uint64), [_c(layer, np.uint64) for layer in lower], affs,
                                          _native.blockwise_steps(backend))


_LABEL_TYPES = ("auto", "uint32", "uint64")


def _label_dtype(label_type, max_label):
    """The output's element type for labels up to ``max_label``."""
    fits = max_label <= np.iinfo(np.uint32).max
    if label_type == "uint32" and not fits:
        raise ValueError(f"label_type uint32: fragment id {max_label} does not fit uint32 (use auto or uint64)")
    return np.dtype(np.uint32 if fits and label_type != "uint64" else np.uint64)


def _write(output, lo, hi, basins, ids, segments, write_fragments):
    """Writes a block: ``segments[t]`` is the segment of each of its
    components at threshold ``t`` (the global tables at its fragments), in
    the output arrays' type."""
    import zarr

    region = (slice(lo[0], hi[0]), slice(lo[1], hi[1]), slice(lo[2], hi[2]))
    segmentation = zarr.open_array(os.path.join(output, "segmentation"), mode="r+")
    # Every table's labels from one unpacking of the block's components
    # (the fragments' table after the thresholds').
    tables = segments if not write_fragments else np.concatenate([segments, ids[None].astype(segments.dtype)])
    labels = _native.blockwise_labels_packed(list(lo), list(hi), _load(basins[0]), _c(tables, segmentation.dtype))
    segmentation[(slice(None),) + region] = labels[:segments.shape[0]]
    if write_fragments:
        fragments = zarr.open_array(os.path.join(output, "fragments"), mode="r+")
        fragments[region] = labels[-1]
    if isinstance(basins[0], _Spilled):
        os.remove(basins[0].path)
    return None


class _Local:
    """Runs tasks in this process on a thread pool (the native steps release
    the GIL)."""

    def __init__(self, workers):
        from concurrent.futures import ThreadPoolExecutor

        self.pool = ThreadPoolExecutor(max_workers=workers)

    def map(self, fn, calls):
        return list(self.pool.map(lambda args: fn(*args), calls))

    def gather(self, handles):
        return list(handles)

    def release(self, handles):
        pass

    def share(self, value):
        return value

    def replicated_bytes(self, handles):
        return 0

    def close(self):
        # Queued tasks are dropped, running ones finish: nothing writes
        # after this returns.
        self.pool.shutdown(wait=True, cancel_futures=True)


class _Dask:
    """Runs tasks on a ``dask.distributed`` client; what a task returns
    stays on its worker until a later task or the client reads it."""

    def __init__(self, client):
        self.client = client
        self.submitted = []

    def map(self, fn, calls):
        futures = [self.client.submit(fn, *args, pure=False) for args in calls]
        self.submitted.extend(futures)
        return futures

    def gather(self, handles):
        return self.client.gather(handles)

    def release(self, handles):
        for h in handles:
            h.release()

    def share(self, value):
        """``value`` sent to the workers once, not with every task."""
        return self.client.scatter(value, broadcast=True, hash=False)

    def replicated_bytes(self, handles):
        """The bytes of the results of ``handles`` that were copied from the
        worker that made them to others (each further worker that holds a
        result counts its size once): what moved between workers because a
        later task ran elsewhere. Asked of the scheduler before the results
        are released."""
        if not handles:
            return 0
        holders = self.client.who_has(handles)
        sizes = self.client.nbytes([h.key for h in handles], summary=False)
        return int(sum((len(holders.get(h.key, ())) - 1) * sizes.get(h.key, 0)
                       for h in handles if len(holders.get(h.key, ())) > 1))

    def close(self):
        # Cancels what has not run and waits for what is running, so that
        # nothing writes after this returns.
        import distributed

        pending = [f for f in self.submitted if not f.done()]
        if pending:
            self.client.cancel(pending)
            try:
                distributed.wait(pending, timeout=300)
            except Exception:  # noqa: BLE001 - cancelled or failed tasks are what is waited for
                pass
        self.submitted = []


def _nbytes(value):
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    return 8


def _blocks_within(dims, affinity_bytes_per_voxel, max_gpu_bytes):
    """The device bytes that decoding the volume of ``dims`` whole needs
    (affinities of ``affinity_bytes_per_voxel``), and the largest cubic
    block whose decode, halo included, fits ``max_gpu_bytes``
    (``gpu_waterz::block_shape_within``); ValueError for a cap that is no
    byte count or that not even one voxel fits."""
    if isinstance(max_gpu_bytes, bool) or not isinstance(max_gpu_bytes, (int, np.integer)) or max_gpu_bytes < 0:
        raise ValueError(f"max_gpu_bytes must be a number of bytes (an int >= 0), not {max_gpu_bytes!r}")
    cap = min(int(max_gpu_bytes), 2**64 - 1)
    needed, block = _native.decode_bytes([int(d) for d in dims], affinity_bytes_per_voxel, cap)
    if block is None:
        raise ValueError(f"max_gpu_bytes={max_gpu_bytes}: not even a block of one voxel (with its halo) fits")
    return needed, tuple(block)


def agglomerate(affinities, output, thresholds, block_shape=None, client=None, *, shape=None,
                aff_threshold_low=0.0001, aff_threshold_high=0.9999, write_fragments=True,
                overwrite=False, workers=None, spill=None, max_gpu_bytes=None, backend="auto",
                label_type="auto"):
    """Decodes ``affinities`` block by block into the zarr group ``output``.

    ``affinities``: the ``(3, z, y, x)`` affinities (float32, other floats
    or integers converted to float32, uint8 meaning ``k / 255`` as in
    waterz): a path (``FILE.npy``, ``FILE.h5:DATASET``, a zarr array's
    directory or ``GROUP:ARRAY``), a zarr array or numpy array, or a
    callable ``f(lo, hi)`` giving the affinities of voxels ``lo..hi`` (with
    ``shape=``), which must be picklable to run on Dask workers (a path is
    what travels best: each task opens it and reads its block). ``output``: a directory path; it gets the zarr
    arrays ``segmentation`` (``(len(thresholds), z, y, x)``, one chunk per
    block and threshold) and ``fragments`` (unless ``write_fragments`` is
    false), of ``label_type``: ``"auto"`` (uint32 when every fragment id
    fits, else uint64; as the CLI's ``--label-type``), ``"uint32"`` (an
    error when an id does not fit) or ``"uint64"`` (waterz's type). It is written under a temporary name and
    renamed once complete, so a failed run leaves no partial output; an
    existing ``output`` is an error unless ``overwrite``. ``thresholds``:
    ascending, as waterz's. ``block_shape``: ``(z, y, x)`` voxels per task;
    or, instead, ``max_gpu_bytes``: a device memory cap in bytes, which
    picks the largest cubic blocks whose decode (float32 affinities, halo
    included) fits it, as ``gpu_waterz.agglomerate``'s does.
    ``client``: a ``dask.distributed.Client`` (one worker per GPU, as
    dask-cuda's ``LocalCUDACluster`` starts them, or CPU workers), or None
    to run on a thread pool here (``workers`` threads, default every core).
    ``backend``: where the blocks' watershed steps, the faces of their
    region graphs and the merge run:
    ``"cpu"``; ``"gpu"`` (each worker's first visible GPU, and the merge on
    this process's, an error where there is none); or ``"auto"`` (each
    worker's GPU when it has a usable one, else its CPU: the same results;
    the merge on this process's GPU when it has one). The merge decides
    the segmentations: on the CPU, waterz's serial merging in exact
    arithmetic (the CPU reference's ``arithmetic="exact"`` on the whole
    volume); on the GPU, ParHAC, as ``gpu_waterz.agglomerate`` on the GPU
    merges the whole volume (the two agree on tie-free graphs). Between steps each block keeps one byte per voxel (after
    step 1), then its components packed (after step 3: their runs through
    zstd, about 0.2 bytes per voxel on cell-like data), where its tasks
    ran: in the workers' memory with a client (Dask spills it to disk
    under memory pressure); without one, in files in the staging folder
    (``spill``, the default without a client; ``spill=False`` keeps them in
    memory), so that one process decodes volumes larger than its memory.

    Returns a :class:`BlockwiseResult`. Segment ids are fragment ids (each
    segment is named by its smallest fragment, as waterz merges into the
    smaller id); background is 0.
    """
    import zarr

    if label_type not in _LABEL_TYPES:
        raise ValueError(f"label_type must be one of {_LABEL_TYPES}, not {label_type!r}")
    thresholds = [float(t) for t in np.atleast_1d(np.asarray(thresholds, dtype=np.float64))]
    low, high = float(aff_threshold_low), float(aff_threshold_high)
    # The rules every step applies, checked before any work.
    _native.blockwise_check_parameters(thresholds, low, high)
    if backend not in ("auto", "cpu", "gpu"):
        raise ValueError(f"backend must be 'auto', 'cpu' or 'gpu', not {backend!r}")
    # The merge's side is this process's, settled before any work.
    merge_on = _native.blockwise_steps(backend)
    source = _Source(affinities, shape)
    dims = tuple(int(s) for s in source.shape[1:])
    if (block_shape is None) == (max_gpu_bytes is None):
        raise ValueError("give block_shape or max_gpu_bytes (one of them)")
    if max_gpu_bytes is not None:
        _, block_shape = _blocks_within(dims, 12, max_gpu_bytes)
    block_shape = tuple(int(b) for b in block_shape)
    if len(block_shape) != 3 or min(block_shape) < 1:
        raise ValueError(f"block_shape must be three positive extents, not {block_shape}")
    output = os.path.normpath(os.path.abspath(os.fspath(output)))
    if os.path.exists(output) and not overwrite:
        raise FileExistsError(f"{output} exists; pass overwrite=True to replace it")
    counts, blocks = _blocks(dims, block_shape)
    runner = _Dask(client) if client is not None else _Local(workers or os.cpu_count() or 1)
    if source.path is None and source.function is None:
        # An array in memory travels to each worker once, not with each task.
        source = runner.share(source)
    partial = f"{output}.partial-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    spill = client is None if spill is None else bool(spill)
    if spill and client is not None:
        raise ValueError("spill=True is for runs without a client (Dask workers spill by themselves)")
    scratch = os.path.join(partial, "blocks")

    def spill_to(k, what, suffix=".npy"):
        return os.path.join(scratch, f"{what}-{k}{suffix}") if spill else None
    seconds = {}
    gathered = 0
    sent = 0
    moved = 0
    try:
        # The output's arrays first: a bad path fails before any work.
        zarr.open_group(partial, mode="w")
        if spill:
            os.makedirs(scratch)

        started = time.perf_counter()
        plateaus = runner.map(_plateaus, [(source, dims, lo, hi, low, high, spill_to(k, "directions"), backend)
                                          for k, (_, lo, hi) in enumerate(blocks)])
        open_parts = runner.gather(runner.map(_open_part, [(p,) for p in plateaus]))
        gathered += _nbytes(open_parts)
        seconds["plateaus"] = time.perf_counter() - started

        started = time.perf_counter()
        settled = _native.blockwise_settle(list(dims), [_c(o[0], np.uint64) for o in open_parts],
                                           [_c(o[1], np.uint8) for o in open_parts])
        open_voxels = int(sum(len(o[0]) for o in open_parts))
        del open_parts
        seconds["settle"] = time.perf_counter() - started

        started = time.perf_counter()
        basins = runner.map(_basins, [(dims, lo, hi, p, s, spill_to(k, "components", ".zst"), backend)
                                      for k, ((_, lo, hi), p, s) in enumerate(zip(blocks, plateaus, settled))])
        summaries = runner.gather(runner.map(_summary, [(b,) for b in basins]))
        sent += _nbytes(list(settled))
        moved += runner.replicated_bytes(plateaus)
        runner.release(plateaus)
        del plateaus
        gathered += _nbytes(summaries)
        seconds["basins"] = time.perf_counter() - started

        started = time.perf_counter()
        n_fragments, ids, _sizes = _native.blockwise_fragment_ids(
            list(dims), list(block_shape),
            [(_c(s[0], np.uint64), _c(s[1], np.uint64), int(s[2]), [_c(f, np.uint32) for f in s[3]],
              [_c(b, np.uint8) for b in s[4]]) for s in summaries])
        index = {at: k for k, (at, _, _) in enumerate(blocks)}
        lower = []
        for at, _, _ in blocks:
            layers = []
            for axis in range(3):
                if at[axis] == 0:
                    layers.append(None)
                else:
                    before = list(at)
                    before[axis] -= 1
                    b = index[tuple(before)]
                    layers.append(ids[b][summaries[b][3][3 + axis]])
            lower.append(layers)
        del summaries
        # The output's arrays, in the type the fragment ids fit (segment
        # ids are fragment ids).
        dtype = _label_dtype(label_type, int(n_fragments))
        zarr.open_array(os.path.join(partial, "segmentation"), mode="w", shape=(len(thresholds),) + dims,
                        chunks=(1,) + block_shape, dtype=dtype, fill_value=0)
        if write_fragments:
            zarr.open_array(os.path.join(partial, "fragments"), mode="w", shape=dims, chunks=block_shape,
                            dtype=dtype, fill_value=0)
        seconds["fragments"] = time.perf_counter() - started

        started = time.perf_counter()
        edges = runner.gather(runner.map(
            _edges, [(source, dims, lo, hi, b, i, l, backend)
                     for (_, lo, hi), b, i, l in zip(blocks, basins, ids, lower)]))
        gathered += _nbytes(edges)
        sent += _nbytes(list(ids)) + _nbytes([layer for layers in lower for layer in layers if layer is not None])
        n_edges = int(sum(len(e[0]) for e in edges))
        seconds["edges"] = time.perf_counter() - started

        started = time.perf_counter()
        tables = _native.blockwise_merge(int(n_fragments), [tuple(_c(c, np.uint64) for c in e) for e in edges],
                                         thresholds, merge_on)
        del edges
        seconds["merge"] = time.perf_counter() - started

        started = time.perf_counter()
        # Each block's rows of the tables, in the output's type (segment ids
        # are fragment ids, which fit it): half the bytes sent for uint32.
        rows = [np.ascontiguousarray(tables[:, i], dtype=dtype) for i in ids]
        sent += _nbytes(rows)
        runner.gather(runner.map(_write, [(partial, lo, hi, b, i, r, write_fragments)
                                          for (_, lo, hi), b, i, r in zip(blocks, basins, ids, rows)]))
        del tables, rows
        moved += runner.replicated_bytes(basins)
        runner.release(basins)
        zarr.open_group(partial, mode="r+").attrs.update(
            {"thresholds": thresholds, "n_fragments": int(n_fragments), "block_shape": list(block_shape),
             "aff_threshold_low": low, "aff_threshold_high": high})
        seconds["write"] = time.perf_counter() - started
        if spill:
            shutil.rmtree(scratch, ignore_errors=True)
        if os.path.exists(output):
            if not overwrite:
                raise FileExistsError(f"{output} appeared while decoding; pass overwrite=True to replace it")
            shutil.rmtree(output)
        os.rename(partial, output)
    except BaseException:
        # Stop the tasks first: one still running could write after the
        # folder is removed.
        runner.close()
        shutil.rmtree(partial, ignore_errors=True)
        raise
    finally:
        runner.close()
    return BlockwiseResult(n_fragments=int(n_fragments), thresholds=thresholds, n_blocks=len(blocks),
                           open_voxels=open_voxels, n_edges=n_edges, gathered_bytes=int(gathered),
                           sent_bytes=int(sent), moved_bytes=int(moved),
                           seconds=seconds, output=output, merged_on=merge_on)
