"""gpu-waterz: waterz's watershed and agglomeration, in Rust.

A drop-in for `waterz`: ``import gpu_waterz as waterz``. ``agglomerate``
yields waterz's tuples in waterz's order. ``backend='auto'`` (the default)
runs the GPU pipeline when a GPU is usable and the settings are ones it
runs, else the exact CPU reference, which gives the same segmentations,
metrics and merge histories as stock waterz 0.10.1; ``backend='gpu'`` and
``backend='cpu'`` choose one.

As in waterz, numpy results are one uint64 array, relabelled in place for
every threshold (with ``fragments``, the caller's fragments array itself
when it is a writable C-contiguous uint64 array): copy a segmentation to
keep it past the next threshold. This keeps the memory of a call within
stock waterz's. Results on a CUDA device (torch, cupy inputs) are a new
volume per threshold. As in waterz, the work of a threshold happens when
the generator is advanced to it.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

import warnings

from . import _native

__all__ = ["agglomerate", "evaluate", "empty_cache", "watershed", "CudaVolume", "__version__"]

__version__ = _native.__version__

CudaVolume = _native.CudaVolume

_DEFAULT_SCORING = "OneMinus<MeanAffinity<RegionGraphType, ScoreValue>>"
_BACKENDS = ("gpu", "cpu", "auto")


def _affinities(affs):
    """The first three channels of `affs`, as C-contiguous float32 or uint8."""
    if not hasattr(affs, "shape") or not hasattr(affs, "dtype"):
        raise TypeError(f"affs must be a numpy array, not {type(affs).__name__}")
    affs = np.asarray(affs)
    if affs.ndim != 4 or affs.shape[0] < 3:
        raise ValueError(
            f"affs must have the shape (channels, z, y, x), with at least 3 channels, not {affs.shape}"
        )
    affs = affs[:3]
    if affs.dtype == np.float32:
        return np.ascontiguousarray(affs), None
    if affs.dtype == np.uint8:
        return None, np.ascontiguousarray(affs)
    raise TypeError(f"affs must be float32 (or uint8 meaning k/255), not {affs.dtype}")


def _labels(name, volume, shape, keep_uint32=False):
    """`volume` checked against `shape`, as C-contiguous uint64 (uint32
    kept as it is with `keep_uint32`: the pipeline widens it in its own
    copy)."""
    if volume is None:
        return None
    volume = np.asarray(volume)
    if volume.shape != shape:
        raise ValueError(
            f"{name} must have the shape of the affinities without the channels, {shape}, not {volume.shape}"
        )
    if not np.issubdtype(volume.dtype, np.integer):
        raise TypeError(f"{name} must hold integer labels, not {volume.dtype}")
    if np.issubdtype(volume.dtype, np.signedinteger) and volume.size and volume.min() < 0:
        raise ValueError(f"{name} must not hold negative labels")
    if keep_uint32 and volume.dtype == np.uint32:
        return np.ascontiguousarray(volume)
    return np.ascontiguousarray(volume, dtype=np.uint64)


def agglomerate(
    affs,
    thresholds: Sequence[float],
    gt=None,
    fragments=None,
    aff_threshold_low: float = 0.0001,
    aff_threshold_high: float = 0.9999,
    return_merge_history: bool = False,
    return_region_graph: bool = False,
    scoring_function: str = _DEFAULT_SCORING,
    discretize_queue: int = 0,
    force_rebuild: bool = False,
    *,
    epsilon: float | None = None,
    backend: str = "auto",
    max_gpu_bytes: int | None = None,
) -> Iterator:
    """Compute segmentations from an affinity graph for several thresholds.

    Parameters
    ----------

        affs: numpy array, float32 (or uint8 meaning k/255), 4 dimensional

            The affinities as an array with affs[channel][z][y][x]; channel
            c is the face to the previous voxel along z, y, x; the first three
            channels are used, as waterz does. Finite values outside [0, 1]
            are taken as waterz takes them by the CPU backend; the GPU
            backend's exact statistics clamp them to [0, 1] and say so with a
            warning (UserWarning) giving their number. NaN and infinity
            raise ValueError.

        thresholds: list of float

            The thresholds to compute segmentations for: any finite numbers
            (merging goes on while the best score is below the threshold, as
            in waterz). They are sorted; one segmentation is returned per
            threshold, ascending.

        gt: numpy array, integer, 3 dimensional (optional)

            Ground truth; if given, metrics are returned (label 0 ignored).

        fragments: numpy array, integer, 3 dimensional (optional)

            Fragments to use instead of the watershed. As in waterz, a
            writable C-contiguous uint64 numpy array is overwritten with
            each threshold's segmentation (it is the array yielded); other
            arrays are read, not changed.

        aff_threshold_low, aff_threshold_high: float

            The watershed's thresholds (unused with fragments).

        return_merge_history, return_region_graph: bool

            Also return the merges since the previous threshold (dicts with
            'a', 'b', 'c', 'score') and the remaining region graph (dicts
            with 'u', 'v', 'score').

        scoring_function: str

            waterz's C++ spelling; supported: OneMinus of MeanAffinity,
            MaxAffinity, MinAffinity, HistogramQuantileAffinity,
            QuantileAffinity (exact quantiles) and MeanMaxKAffinity, and
            their combinations with ContactArea, MinSize, MaxSize and
            Constant by OneMinus, Invert, Square, Add, Subtract, Multiply,
            Divide and Step (e.g. waterz's size control), with stock
            waterz's results on the CPU backend; not Random. The GPU
            backend runs MeanAffinity ('auto' takes the CPU for the others).

        discretize_queue: int

            0 for waterz's priority queue, else its bin queue's bin count.

        force_rebuild: bool

            Accepted for compatibility; nothing is compiled at run time.

        epsilon: float (keyword only)

            ParHAC's ε for the GPU backend's parallel merging.

        backend: 'auto' (the default), 'gpu' or 'cpu' (keyword only)

            'cpu' runs the exact CPU reference (stock waterz's results, bit
            for bit). 'gpu' runs the GPU pipeline: the same watershed, exact
            integer statistics and ParHAC's parallel merging (at ε = 0 equal
            to waterz's order on tie-free input). CUDA tensors and arrays
            (torch, cupy, ``__cuda_array_interface__``) are read in place,
            and segmentations come back on the same device: int64 torch
            tensors, uint64 cupy arrays. numpy in gives numpy (uint64) out.
            Without a GPU, 'gpu' raises RuntimeError. 'auto' runs the GPU
            pipeline when a GPU is usable and the settings are ones it
            supports, else the CPU reference.

        max_gpu_bytes: int (keyword only)

            A device memory cap in bytes: a volume whose decode would need
            more is decoded in blocks whose decode each fits it
            (``gpu_waterz.blockwise``'s steps in this process: the same
            fragments as the whole volume's watershed, exact statistics
            merged in waterz's serial order), even when the GPU is large
            enough. The blocks' steps run on the CPU for now (CUDA input is
            copied to the host, and the results come back on its device).
            Decoding in blocks scores by the mean affinity and takes no gt,
            fragments, merge history, region graph, discretize_queue or
            epsilon (ValueError).

    Returns
    -------

        A generator of waterz's results, one per threshold: the segmentation
        (uint64; with numpy input one array for every threshold, relabelled
        in place as in waterz, so copy it to keep it), then the metrics ('V_Rand_split', 'V_Rand_merge',
        'V_Info_split', 'V_Info_merge') if gt is given, then the merge history
        and the region graph if asked for; a lone segmentation is yielded
        bare, several items as a tuple.
    """
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, not {backend!r}")
    if not isinstance(scoring_function, str):
        raise TypeError(f"scoring_function must be a string, not {type(scoring_function).__name__}")
    try:
        bins = int(discretize_queue)
    except (TypeError, ValueError):
        raise ValueError(f"discretize_queue must be 0 or a number of bins, not {discretize_queue!r}") from None
    if bins != discretize_queue or not 0 <= bins <= 65536 or isinstance(discretize_queue, bool):
        raise ValueError(f"discretize_queue must be 0 (no bins) or a number of bins of at most 65536, not {discretize_queue!r}")
    if epsilon is not None and not (np.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be a finite number >= 0, not {epsilon!r}")
    cuda = _cuda_affinities(affs) if backend != "cpu" else None
    if cuda is None:
        affs_f32, affs_u8 = _affinities(affs)
        shape = (affs_f32 if affs_f32 is not None else affs_u8).shape[1:]
    else:
        affs_f32 = affs_u8 = None
        shape = cuda["shape"]
    # A CUDA ground truth next to CUDA affinities is read in place.
    cuda_gt = _cuda_labels("gt", gt, shape, cuda["device"]) if cuda is not None else None
    gt_host = _labels("gt", _host(gt), shape, keep_uint32=True) if cuda_gt is None else None
    given_fragments = fragments
    fragments = _labels("fragments", _host(fragments), shape)
    try:
        wanted = sorted(float(t) for t in thresholds)
    except TypeError:
        raise TypeError("thresholds must be an iterable of numbers") from None
    if not wanted:
        return iter(())
    if backend == "cpu" and epsilon is not None:
        raise ValueError("epsilon sets the GPU backend's parallel merging; the CPU reference merges serially")
    # waterz merges once per distinct float32 threshold and yields again for
    # repeats: run the distinct ones, repeat results for the others.
    distinct = sorted(set(np.float32(t).item() for t in wanted))
    common = (float(aff_threshold_low), float(aff_threshold_high), scoring_function, bins,
              bool(return_merge_history), bool(return_region_graph))
    if cuda is not None:
        cuda["synchronize"]()
        cuda_affs = (cuda["address"], cuda["dtype"], cuda["shape"])
        ordinal = cuda["device"]
        convert = cuda["convert"]
    else:
        cuda_affs, ordinal, convert = None, 0, None
    if max_gpu_bytes is not None:
        blocked = _decode_in_blocks(
            affs, affs_f32, affs_u8, cuda, shape, wanted, distinct, max_gpu_bytes, backend, ordinal,
            dict(gt=gt, fragments=given_fragments, return_merge_history=return_merge_history,
                 return_region_graph=return_region_graph, discretize_queue=bins, epsilon=epsilon),
            scoring_function, float(aff_threshold_low), float(aff_threshold_high))
        if blocked is not None:
            return blocked
    in_place = cuda is None
    run = _native.agglomerate(
        affs_f32, affs_u8, cuda_affs, backend, ordinal, distinct, gt_host, fragments, *common,
        0.0 if epsilon is None else float(epsilon), cuda_gt, in_place,
    )
    for warning in run.warnings:
        warnings.warn(f"gpu_waterz: {warning}", UserWarning, stacklevel=2)
    buffer = None
    if in_place:
        # waterz's one result array: the caller's fragments when they can
        # be written as they are, else a new array.
        if fragments is not None and fragments is given_fragments and fragments.flags.writeable:
            buffer = fragments
        else:
            buffer = np.empty(shape, dtype=np.uint64)
    return _results(run, wanted, gt is not None, return_merge_history, return_region_graph, convert, buffer)


def _decode_in_blocks(affs, affs_f32, affs_u8, cuda, shape, wanted, distinct, max_gpu_bytes, backend, ordinal,
                      extras, scoring_function, low, high):
    """agglomerate's results decoded in blocks when the whole volume's
    decode would need more than ``max_gpu_bytes`` of device memory, else
    None (the volume is decoded whole)."""
    from .blockwise import _blocks_within

    if cuda is not None:
        value_bytes = 4 if cuda["dtype"] == "f4" else 1
    else:
        value_bytes = 4 if affs_f32 is not None else 1
    needed, block = _blocks_within(shape, 3 * value_bytes, max_gpu_bytes)
    cap = int(max_gpu_bytes)
    if needed <= cap:
        return None
    if backend != "cpu" and value_bytes != 4:
        # The blocks' steps on the GPU upload float32 affinities.
        _, block = _blocks_within(shape, 12, max_gpu_bytes)
    given = [name for name, value in extras.items()
             if value is not None and value is not False and not (name == "discretize_queue" and value == 0)]
    if given:
        raise ValueError(f"{', '.join(given)}: not available when max_gpu_bytes decodes in blocks "
                         f"(the volume needs {needed} bytes, more than {cap})")
    if scoring_function.replace(" ", "") != _DEFAULT_SCORING.replace(" ", ""):
        raise ValueError(f"scoring_function={scoring_function!r}: decoding in blocks (max_gpu_bytes) scores by the "
                         "mean affinity only")
    if cuda is not None:
        cuda["synchronize"]()
        host = _host(affs)
        values = host[:3].astype(np.float32) / np.float32(255) if cuda["dtype"] == "u1" else host[:3]
    elif affs_f32 is not None:
        values = affs_f32[:3]
    else:
        values = affs_u8[:3].astype(np.float32) / np.float32(255)
    values = np.ascontiguousarray(values, dtype=np.float32)
    (fragments, segmentations, _n, _open, _edges), _on_gpu = _native.blockwise_decode(
        values, list(block), [float(t) for t in distinct], low, high, backend, ordinal)
    del fragments, values
    by_threshold = dict(zip(distinct, segmentations))
    if cuda is not None:
        from_host = cuda["from_host"]
        by_threshold = {t: from_host(s) for t, s in by_threshold.items()}

    def results():
        buffer = np.empty(shape, dtype=np.uint64) if cuda is None else None
        for t in wanted:
            seg = by_threshold[np.float32(t).item()]
            if buffer is not None:
                # waterz's way: the same array, relabelled for each threshold.
                np.copyto(buffer, seg)
                seg = buffer
            yield seg

    return results()


def _cuda_labels(name, volume, shape, device):
    """The device address of CUDA labels that can be read in place: int64
    or uint64, C-contiguous, of the volume's shape, on the affinities'
    device, none negative (checked on the device). None for anything else,
    which is then copied to the host and checked there."""
    cai = getattr(volume, "__cuda_array_interface__", None)
    if cai is None or cai["typestr"] not in ("<i8", "<u8"):
        return None
    if tuple(int(d) for d in cai["shape"]) != tuple(shape):
        return None
    strides = cai.get("strides")
    if strides is not None and tuple(strides) != (8 * shape[1] * shape[2], 8 * shape[2], 8):
        return None
    module = type(volume).__module__.split(".")[0]
    if module == "torch":
        on = volume.device.index
        negative = cai["typestr"] == "<i8" and bool((volume < 0).any())
    elif module == "cupy":
        on = volume.device.id
        negative = cai["typestr"] == "<i8" and bool((volume < 0).any())
    else:
        return None
    if on != device:
        return None
    if negative:
        raise ValueError(f"{name} must not hold negative labels")
    return int(cai["data"][0])


def _host(volume):
    """A CUDA tensor or array (gt, fragments) copied to numpy; others as given."""
    if volume is None or not hasattr(volume, "__cuda_array_interface__"):
        return volume
    if hasattr(volume, "cpu"):
        return volume.cpu().numpy()
    if hasattr(volume, "get"):
        return volume.get()
    raise TypeError(f"cannot copy {type(volume).__name__} to the host")


class _Int64View:
    """The same device memory, described as int64 (torch's label type)."""

    def __init__(self, volume):
        self._volume = volume
        cai = dict(volume.__cuda_array_interface__)
        cai["typestr"] = "<i8"
        self.__cuda_array_interface__ = cai


def _cuda_affinities(affs):
    """Describes CUDA affinities (torch tensor, cupy array, anything with
    ``__cuda_array_interface__``) for zero-copy use, or None for host data."""
    cai = getattr(affs, "__cuda_array_interface__", None)
    if cai is None:
        return None
    shape = tuple(int(d) for d in cai["shape"])
    if len(shape) != 4 or shape[0] < 3:
        raise ValueError(f"affs must have the shape (channels, z, y, x), with at least 3 channels, not {shape}")
    dtypes = {"<f4": "f4", "|u1": "u1", "<u1": "u1"}
    if cai["typestr"] not in dtypes:
        raise TypeError(f"CUDA affs must be float32 (or uint8 meaning k/255), not {cai['typestr']}")
    itemsize = 4 if dtypes[cai["typestr"]] == "f4" else 1
    strides = cai.get("strides")
    if strides is not None:
        expected, step = [], itemsize
        for d in reversed(shape):
            expected.append(step)
            step *= d
        if tuple(strides) != tuple(reversed(expected)) and any(d > 1 for d in shape):
            raise ValueError("CUDA affs must be C-contiguous (call .contiguous() first)")
    module = type(affs).__module__.split(".")[0]
    if module == "torch":
        import torch

        device = affs.device.index if affs.device.index is not None else torch.cuda.current_device()

        def synchronize():
            torch.cuda.synchronize(affs.device)

        def convert(volume):
            return torch.as_tensor(_Int64View(volume), device=affs.device)

        def from_host(volume):
            return torch.from_numpy(volume.view(np.int64)).to(affs.device)
    elif module == "cupy":
        import cupy

        device = affs.device.id

        def synchronize():
            cupy.cuda.Device(device).synchronize()

        def convert(volume):
            return cupy.asarray(volume)

        def from_host(volume):
            with cupy.cuda.Device(device):
                return cupy.asarray(volume)
    else:
        device = 0

        def synchronize():
            pass

        def convert(volume):
            return volume

        def from_host(volume):
            return volume
    return {
        "address": int(cai["data"][0]),
        "dtype": dtypes[cai["typestr"]],
        "shape": shape[1:],
        "device": int(device),
        "synchronize": synchronize,
        "convert": convert,
        "from_host": from_host,
    }


def _results(run, wanted, has_gt, history, graph, convert=None, buffer=None):
    current = None
    current_threshold = None
    for t in wanted:
        t32 = np.float32(t).item()
        repeat = current is not None and t32 == current_threshold
        if not repeat:
            current = run.next_threshold() if buffer is None else run.next_threshold_into(buffer)
            current_threshold = t32
        _, seg, metrics, merges, rg = current
        if buffer is not None:
            # waterz's way: the same array, relabelled for each threshold.
            result = (buffer,)
        elif convert is None:
            # Each distinct threshold's segmentation is a new array that
            # nothing else holds; a repeated threshold gets its own copy.
            result = (seg.copy() if repeat else seg,)
        else:
            # A fresh device volume for each distinct threshold; repeats
            # share it (as views of one tensor, like waterz's copies).
            if not repeat:
                current = (current[0], convert(seg)) + tuple(current[2:])
            result = (current[1],)
        if has_gt:
            result += (dict(metrics),)
        if history:
            result += ([] if repeat else list(merges),)
        if graph:
            result += (list(rg),)
        yield result[0] if len(result) == 1 else result


def evaluate(segmentation, gt):
    """waterz's metrics: 'voi_split', 'voi_merge', 'rand_split', 'rand_merge' (gt label 0 ignored)."""
    for name, array in (("segmentation", segmentation), ("gt", gt)):
        if not isinstance(array, np.ndarray):
            raise TypeError(f"Argument '{name}' has incorrect type (expected numpy.ndarray, got {type(array).__name__})")
        if array.ndim != 3:
            raise ValueError(f"{name} must be 3-dimensional, not {array.ndim}-dimensional")
    if segmentation.shape != gt.shape:
        raise ValueError(f"Shapes do not match: segmentation {segmentation.shape}, gt {gt.shape}")
    return _native.evaluate(
        np.ascontiguousarray(segmentation, dtype=np.uint64), np.ascontiguousarray(gt, dtype=np.uint64)
    )


def empty_cache():
    """Returns the device memory that gpu_waterz keeps between calls (its
    stream-ordered pool keeps up to a quarter of each device's memory once
    freed, so that the next call need not map it again) to the driver, as
    ``torch.cuda.empty_cache()`` does for torch's; a no-op before any GPU
    call."""
    _native.empty_cache()


# The greyscale watershed: a callable module, so that both
# ``gpu_waterz.watershed(image)`` and ``gpu_waterz.watershed.watershed(image)`` work.
from . import watershed  # noqa: E402
