"""The greyscale watershed of 2D images and 3D volumes, shaped like
``skimage.segmentation.watershed``: a cellular automaton on the lower-complete
image, run block-asynchronously on the GPU (Quesada-Barriuso, Heras and
Argüello's method) or on the CPU's cores.

``gpu_waterz.watershed(image, markers=None, connectivity=1, mask=None,
watershed_line=False)`` works as a call (this module is callable) and as
``gpu_waterz.watershed.watershed``.

Labels: without markers, each regional minimum (a connected plateau with no
lower neighbour) is a basin, numbered 1.. in the order of its first cell
(as ``scipy.ndimage.label`` numbers); with markers, basins take the markers'
labels and the image is first reconstructed so that the markers are its only
minima. Every other cell descends to its lowest neighbour (plateaus by their
distance to a lower border; the first neighbour in C order among equals) and
takes that cell's label. With ``watershed_line``, a cell with a lower
neighbour of another label becomes 0. Ties are broken differently from
scikit-image's flooding queue, so compare partitions (e.g. adjusted Rand),
not labels.
"""

import sys
import types

import numpy as np

from . import _native

__all__ = ["watershed", "fragments_from_boundaries"]

_SCHEDULES = ("artifact-free", "block-asynchronous", "synchronous")
_BACKENDS = ("auto", "gpu", "cpu", "reference")
_MASKED = 0xFFFFFFFF


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def _is_cupy(x):
    return type(x).__module__.startswith("cupy")


def _keys_numpy(image, xp=np):
    """uint32 keys in the order of ``image``'s values (NaN is an error);
    ``xp`` is numpy, or cupy for a cupy array."""
    a = xp.asarray(image)
    if a.dtype == xp.bool_:
        return a.astype(xp.uint32)
    if a.dtype in (xp.uint8, xp.uint16):
        return a.astype(xp.uint32)
    if a.dtype in (xp.int8, xp.int16):
        return (a.astype(xp.int32) - np.iinfo(a.dtype).min).astype(xp.uint32)
    if a.dtype in (xp.float16, xp.float32):
        # + 0.0 turns -0.0 into 0.0: equal floats, one key.
        f = a.astype(xp.float32) + xp.float32(0.0)
        if bool(xp.isnan(f).any()):
            raise ValueError("the image holds NaN, which has no order")
        bits = f.view(xp.uint32)
        return xp.where(bits & 0x80000000, ~bits, bits | 0x80000000).astype(xp.uint32)
    if a.dtype.kind in "iuf":
        if a.dtype.kind == "f" and bool(xp.isnan(a).any()):
            raise ValueError("the image holds NaN, which has no order")
        # Wide types: the rank of each value among the distinct values.
        _, rank = xp.unique(a.ravel(), return_inverse=True)
        return rank.astype(xp.uint32).reshape(a.shape)
    raise TypeError(f"the image must hold numbers, not {a.dtype}")


def _keys_torch(image):
    import torch

    t = image.detach()
    if t.dtype == torch.bool or t.dtype in (torch.uint8,):
        return t.to(torch.int64).to(torch.int32)
    if t.dtype in (torch.int8, torch.int16):
        return (t.to(torch.int32) - torch.iinfo(t.dtype).min).to(torch.int32)
    if t.dtype in (torch.float16, torch.bfloat16, torch.float32):
        # + 0.0 turns -0.0 into 0.0: equal floats, one key.
        f = t.to(torch.float32) + 0.0
        if bool(torch.isnan(f).any()):
            raise ValueError("the image holds NaN, which has no order")
        bits = f.contiguous().view(torch.int32)
        # Negative floats: all bits flipped; others: the sign bit set.
        return torch.where(bits < 0, ~bits, bits | torch.tensor(-0x80000000, dtype=torch.int32, device=t.device))
    if t.dtype.is_floating_point and bool(torch.isnan(t).any()):
        raise ValueError("the image holds NaN, which has no order")
    _, rank = torch.unique(t.reshape(-1), return_inverse=True)
    return rank.to(torch.int32).reshape(t.shape)


def _check_markers_numpy(markers, shape):
    if np.ndim(markers) == 0:
        raise ValueError("markers must be a label array of the image's shape (a number of markers to place, as "
                         "scikit-image also takes, is not supported)")
    m = np.asarray(markers)
    if m.shape != shape:
        raise ValueError(f"markers must have the image's shape {shape}, not {m.shape}")
    if m.dtype == np.bool_:
        m = m.astype(np.uint32)
    if m.dtype.kind not in "iu":
        raise TypeError(f"markers must be integers, not {m.dtype}")
    if m.size and (m.min() < 0 or m.max() > 0xFFFFFFFF):
        raise ValueError("markers must lie in 0..2**32 - 1 (0: unmarked)")
    return np.ascontiguousarray(m, dtype=np.uint32)


def _check_mask_numpy(mask, shape):
    m = np.asarray(mask)
    if m.shape != shape:
        raise ValueError(f"mask must have the image's shape {shape}, not {m.shape}")
    return np.ascontiguousarray(m != 0, dtype=np.uint8)


def _settings(connectivity, schedule, backend, ndim):
    if ndim not in (2, 3):
        raise ValueError(f"the image must be 2D or 3D, not {ndim}D")
    try:
        connectivity = int(connectivity)
    except (TypeError, ValueError):
        raise TypeError(f"connectivity must be an integer, not {connectivity!r}") from None
    if not 1 <= connectivity <= ndim:
        raise ValueError(f"connectivity must lie in 1..{ndim} for a {ndim}D image, not {connectivity}")
    if schedule not in _SCHEDULES:
        raise ValueError(f"schedule must be one of {_SCHEDULES}, not {schedule!r}")
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, not {backend!r}")
    return connectivity


def watershed(image, markers=None, connectivity=1, mask=None, watershed_line=False, *,
              schedule="artifact-free", backend="auto", return_info=False):
    """The watershed of ``image`` (2D or 3D), as ``skimage.segmentation.watershed``.

    Parameters
    ----------
    image: numpy array, torch tensor or cupy array (CUDA tensors and cupy
        arrays stay on their GPU), any real dtype; NaN is an error.
    markers: None (the regional minima) or integer labels of the image's
        shape, 0 unmarked. (An integer number of markers, as scikit-image
        accepts, is not supported.)
    connectivity: 1 to ``image.ndim``: neighbours with at most that many
        non-zero offset coordinates (4/8 in 2D, 6/18/26 in 3D).
    mask: None or an array of the image's shape; cells where it is 0 get 0.
    watershed_line: set the cells separating basins to 0.
    schedule: 'artifact-free' (default; equal to the synchronous automaton),
        'block-asynchronous' (the first-arrival wavefront: faster to write,
        leaves artifacts on plateaus) or 'synchronous' (one step per cell per
        global synchronisation).
    backend: 'auto' (the GPU when usable, else the CPU), 'gpu', 'cpu' (tiles
        on every core) or 'reference' (the plain synchronous automaton).
    return_info: also return a dict of global steps per phase.

    Returns
    -------
    int32 labels of the image's shape (int64 past 2**31 - 1), numpy for numpy
    input, a torch tensor on the input's device for torch input, a cupy
    array for cupy input; with
    ``return_info``, ``(labels, info)``.
    """
    if _is_torch(image) and image.is_cuda and backend in ("auto", "gpu"):
        return _watershed_cuda(image, markers, connectivity, mask, watershed_line, schedule, return_info)
    if _is_cupy(image) and backend in ("auto", "gpu"):
        return _watershed_cupy(image, markers, connectivity, mask, watershed_line, schedule, return_info)
    if _is_torch(image):
        import torch

        host = lambda x: None if x is None else (x.detach().cpu().numpy() if _is_torch(x) else x)  # noqa: E731
        out = watershed(image.detach().cpu().numpy(), host(markers), connectivity, host(mask), watershed_line,
                        schedule=schedule, backend=backend, return_info=return_info)
        if return_info:
            return torch.from_numpy(out[0]).to(image.device), out[1]
        return torch.from_numpy(out).to(image.device)
    a = np.asarray(image)
    connectivity = _settings(connectivity, schedule, backend, a.ndim)
    # float32 goes to the native side as it is (turned into keys there, on
    # every core); other dtypes become uint32 keys here.
    keys = np.ascontiguousarray(a if a.dtype == np.float32 else _keys_numpy(a))
    shape3 = (1,) + a.shape if a.ndim == 2 else a.shape
    m = None if markers is None else _check_markers_numpy(markers, a.shape).ravel()
    k = None if mask is None else _check_mask_numpy(mask, a.shape).ravel()
    order = ["gpu", "cpu"] if backend == "auto" else [backend]
    for i, b in enumerate(order):
        try:
            labels, info = _native.grey_watershed(keys.ravel(), shape3, m, k, connectivity, bool(watershed_line),
                                                  schedule, b, 0)
            break
        except RuntimeError:
            if i + 1 == len(order):
                raise
    # uint32 labels below 2**31 are int32 labels: a view, not a copy.
    labels = labels.view(np.int32) if info["max_label"] < 2**31 else labels.astype(np.int64)
    labels = labels.reshape(a.shape)
    return (labels, info) if return_info else labels


def _watershed_cuda(image, markers, connectivity, mask, watershed_line, schedule, return_info):
    """The same on a CUDA torch tensor: keys, markers and mask on the
    device, labels written into a new int32 tensor there."""
    import torch

    connectivity = _settings(connectivity, schedule, "gpu", image.dim())
    device = image.device
    if image.numel() == 0:
        labels = torch.zeros(tuple(image.shape), dtype=torch.int32, device=device)
        return (labels, {"total": 0, "n_minima": 0, "backend": "gpu"}) if return_info else labels
    keys = _keys_torch(image).contiguous()
    shape3 = (1,) + tuple(image.shape) if image.dim() == 2 else tuple(image.shape)
    pointers = [keys.data_ptr(), 0, 0, 0]
    held = [keys]
    if markers is not None:
        m = torch.as_tensor(markers, device=device)
        if tuple(m.shape) != tuple(image.shape):
            raise ValueError(f"markers must have the image's shape {tuple(image.shape)}, not {tuple(m.shape)}")
        if m.dtype.is_floating_point:
            raise TypeError(f"markers must be integers, not {m.dtype}")
        m64 = m.to(torch.int64)
        if m64.numel() and (int(m64.min()) < 0 or int(m64.max()) > 0xFFFFFFFF):
            raise ValueError("markers must lie in 0..2**32 - 1 (0: unmarked)")
        m32 = m64.to(torch.int32).contiguous()  # the low 32 bits: read as uint32
        held.append(m32)
        pointers[1] = m32.data_ptr()
    if mask is not None:
        k = torch.as_tensor(mask, device=device)
        if tuple(k.shape) != tuple(image.shape):
            raise ValueError(f"mask must have the image's shape {tuple(image.shape)}, not {tuple(k.shape)}")
        k8 = (k != 0).to(torch.uint8).contiguous()
        held.append(k8)
        pointers[2] = k8.data_ptr()
    labels = torch.empty(tuple(image.shape), dtype=torch.int32, device=device)
    pointers[3] = labels.data_ptr()
    torch.cuda.synchronize(device)
    info = _native.grey_watershed_cuda(pointers, shape3, connectivity, bool(watershed_line), schedule,
                                       device.index or 0)
    del held
    # uint32 labels past 2**31 - 1 read as negative int32: widen them.
    if int(labels.min()) < 0:
        labels = labels.to(torch.int64) & 0xFFFFFFFF
    return (labels, info) if return_info else labels


def fragments_from_boundaries(boundary, threshold=0.5, *, min_seed_distance=0.0, sampling=None, connectivity=1,
                              backend="auto"):
    """Supervoxels from a boundary map, the other way connectomics makes
    fragments: ``boundary < threshold`` is inside; its exact distance
    transform (``gpu_waterz.ndimage.distance_transform_edt``, with
    ``sampling``); the local maxima of the distance at least
    ``min_seed_distance`` from a boundary, labelled by the basin of the
    distance's maximum they belong to, are the seeds; the seeded watershed
    of the boundary map grows them over every voxel.

    ``boundary``: a 2D or 3D numpy array or CUDA torch tensor (high on
    membranes). Returns uint64 fragments (1.., numpy) or an int64 CUDA
    tensor, ready for ``gpu_waterz.agglomerate(affs, thresholds,
    fragments=...)``. Without any inside voxel, the watershed of the
    boundary map's own minima gives the fragments.
    """
    from . import ndimage

    if _is_torch(boundary) and boundary.is_cuda and backend in ("auto", "gpu"):
        import torch

        b = boundary.detach()
        inside = b < threshold
        dt = ndimage.distance_transform_edt(inside, sampling=sampling).to(torch.float32)
        pool = {2: torch.nn.functional.max_pool2d, 3: torch.nn.functional.max_pool3d}[b.dim()]
        local_max = pool(dt[None, None], 3, stride=1, padding=1)[0, 0] == dt
        seeds_mask = inside & local_max & (dt >= min_seed_distance)
        if not bool(seeds_mask.any()):
            return watershed(b, connectivity=connectivity).to(torch.int64)
        basins = watershed(-dt, connectivity=b.dim(), mask=inside)
        seeds = torch.where(seeds_mask, basins, torch.zeros_like(basins))
        return watershed(b, markers=seeds, connectivity=connectivity).to(torch.int64)
    b = boundary.detach().cpu().numpy() if _is_torch(boundary) else np.asarray(boundary)
    inside = b < threshold
    order = ["gpu", "cpu"] if backend == "auto" else [backend]
    for i, name in enumerate(order):
        try:
            dt = ndimage.distance_transform_edt(inside, sampling=sampling, backend=name).astype(np.float32)
            backend = name
            break
        except RuntimeError:
            if i + 1 == len(order):
                raise
    local_max = dt == ndimage.grey_dilation(dt, size=(3,) * dt.ndim, mode="nearest")
    seeds_mask = inside & local_max & (dt >= min_seed_distance)
    if not seeds_mask.any():
        return watershed(b, connectivity=connectivity, backend=backend).astype(np.uint64)
    basins = watershed(-dt, connectivity=b.ndim, mask=inside, backend=backend)
    seeds = np.where(seeds_mask, basins, 0)
    return watershed(b, markers=seeds, connectivity=connectivity, backend=backend).astype(np.uint64)


def _watershed_cupy(image, markers, connectivity, mask, watershed_line, schedule, return_info):
    """The same on a cupy array: keys, markers and mask made with cupy on
    its device, labels written into a new int32 cupy array there."""
    import cupy as cp

    connectivity = _settings(connectivity, schedule, "gpu", image.ndim)
    if image.size == 0:
        labels = cp.zeros(image.shape, dtype=cp.int32)
        return (labels, {"total": 0, "n_minima": 0, "backend": "gpu"}) if return_info else labels
    with image.device:
        keys = cp.ascontiguousarray(_keys_numpy(image, cp))
        shape3 = (1,) + image.shape if image.ndim == 2 else image.shape
        pointers = [keys.data.ptr, 0, 0, 0]
        held = [keys]
        if markers is not None:
            m = cp.asarray(markers)
            if m.shape != image.shape:
                raise ValueError(f"markers must have the image's shape {image.shape}, not {m.shape}")
            if m.dtype.kind not in "biu":
                raise TypeError(f"markers must be integers, not {m.dtype}")
            if m.size and (int(m.min()) < 0 or int(m.max()) > 0xFFFFFFFF):
                raise ValueError("markers must lie in 0..2**32 - 1 (0: unmarked)")
            m32 = cp.ascontiguousarray(m.astype(cp.uint32))
            held.append(m32)
            pointers[1] = m32.data.ptr
        if mask is not None:
            k = cp.asarray(mask)
            if k.shape != image.shape:
                raise ValueError(f"mask must have the image's shape {image.shape}, not {k.shape}")
            k8 = cp.ascontiguousarray((k != 0).astype(cp.uint8))
            held.append(k8)
            pointers[2] = k8.data.ptr
        labels = cp.empty(image.shape, dtype=cp.uint32)
        pointers[3] = labels.data.ptr
        cp.cuda.runtime.deviceSynchronize()
        info = _native.grey_watershed_cuda(pointers, shape3, connectivity, bool(watershed_line), schedule,
                                           image.device.id)
        del held
        labels = labels.view(cp.int32) if (labels.size == 0 or int(labels.max()) < 2**31) else labels.astype(cp.int64)
    return (labels, info) if return_info else labels


class _CallableModule(types.ModuleType):
    """Lets ``gpu_waterz.watershed(...)`` call :func:`watershed`."""

    def __call__(self, *args, **kwargs):
        return watershed(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
