"""Morphology with ``scipy.ndimage``'s names, arguments and results:
``grey_erosion``, ``grey_dilation``, ``grey_opening``, ``grey_closing``,
``morphological_gradient``, ``morphological_laplace``, ``white_tophat``,
``black_tophat``, and ``binary_erosion``, ``binary_dilation``,
``binary_opening``, ``binary_closing`` (iterations, masks, border values).

The morphology operators, ``binary_propagation`` and ``binary_fill_holes``
run on the GPU (``backend='auto'``, the default, when one is usable) or on
the CPU (Rust, on all cores), for arrays of spatial rank 1 to 8, batched
with ``batch_dims`` (keyword only): numpy arrays give numpy arrays, CUDA
torch tensors and cupy arrays are filtered in place on their device.
``distance_transform_edt`` (with its indices, the feature transform) and
``distance_transform_cdt`` run on the GPU for arrays of spatial rank 1 to 3
(numpy, or CUDA torch tensors and cupy arrays in place; the chamfer one for
axes of at most 12,288 elements), batched with ``batch_dims``, and on the
CPU otherwise, exact with unit sampling; ``distance_transform_bf`` (the
brute-force oracle) runs on the CPU. ``import gpu_waterz.ndimage as ndi``
replaces these calls: same keyword arguments (``size``, ``footprint``,
``structure``, ``output``, ``mode`` in reflect/constant/nearest/mirror/wrap,
``cval``, ``origin``), same output dtype as the input (or ``output``'s).
Erosion and dilation compare float32, float64 and uint8 values in their
type on the GPU (uint8 with a flat element and, in constant mode, a whole
``cval`` from 0 to 255); bool and other integers of up to 16 bits in
float32 where it holds ``cval`` and the element is flat; other types (and
every type on the CPU) in float64, cast back (exact for flat elements;
weights of a ``structure`` are applied in float64 and the result cast
once, as scipy does). The composite
operators combine them in the input's dtype, step by step, the last step
into ``output``, as scipy does. Differences from scipy: a NaN never wins a
minimum or maximum here (scipy keeps one met first in the element's order;
an all-NaN window gives +inf or -inf here); int64/uint64 values beyond
2^53 and complex values raise.
"""

import hashlib

import numpy as np

from . import _native

__all__ = [
    "distance_transform_edt",
    "distance_transform_bf",
    "distance_transform_cdt",
    "binary_propagation",
    "binary_fill_holes",
    "binary_erosion",
    "binary_dilation",
    "binary_opening",
    "binary_closing",
    "grey_erosion",
    "grey_dilation",
    "grey_opening",
    "grey_closing",
    "morphological_gradient",
    "morphological_laplace",
    "white_tophat",
    "black_tophat",
]

_MODES = ("reflect", "constant", "nearest", "mirror", "wrap")


def _per_axis(name, value, rank):
    """An int or a sequence of `rank` ints, as a list of `rank` ints."""
    if np.ndim(value) == 0:
        return [int(value)] * rank
    values = [int(v) for v in value]
    if len(values) != rank:
        raise RuntimeError(f"{name} must have one value per axis ({rank}), not {len(values)}")
    return values


def _library(x):
    """'torch' or 'cupy' for CUDA arrays, None for host arrays."""
    module = type(x).__module__
    if module.startswith("torch") and x.is_cuda:
        return "torch"
    if module.startswith("cupy"):
        return "cupy"
    return None


def _check_backend(backend, x):
    if backend not in ("auto", "gpu", "cpu"):
        raise ValueError(f"backend must be 'auto', 'gpu' or 'cpu', not {backend!r}")
    if backend == "cpu" and _library(x) is not None:
        raise ValueError("backend='cpu' takes host arrays: move the CUDA array to the host first")


def _host_array(input):
    """A numpy array of a host input (a CPU torch tensor included)."""
    if type(input).__module__.startswith("torch"):
        return input.detach().numpy()
    return np.asarray(input)


def _spatial_rank(ndim, batch_dims):
    rank = ndim - _batch_dims(batch_dims, ndim)
    if rank > 8:
        raise ValueError(f"arrays of spatial rank 1 to 8 are taken, not rank {rank}")
    return rank


def _prepare(input, size, footprint, structure, mode, origin, batch_dims):
    """Checks and normalises scipy's arguments; returns (array, sizes,
    footprint, structure, origins). CUDA arrays stay where they are."""
    array = input if _library(input) is not None else _host_array(input)
    if _library(array) is None and np.iscomplexobj(array):
        raise TypeError("Complex type not supported")
    if array.ndim < 1:
        raise ValueError("arrays of rank 1 to 8 are taken, not rank 0")
    rank = _spatial_rank(array.ndim, batch_dims)
    if mode not in _MODES:
        raise RuntimeError(f"boundary mode not supported: {mode!r} (one of {_MODES})")
    if structure is not None:
        structure = np.ascontiguousarray(structure, dtype=np.float64)
        if structure.ndim != rank:
            raise RuntimeError("structure array has incorrect shape")
    if footprint is not None:
        footprint = np.ascontiguousarray(footprint, dtype=bool)
        if footprint.ndim != rank:
            raise RuntimeError("footprint array has incorrect shape.")
        if not footprint.any():
            raise ValueError("All-zero footprint is not supported.")
    sizes = None
    if footprint is None and structure is None:
        if size is None:
            raise RuntimeError("no footprint or filter size provided")
        sizes = _per_axis("size", size, rank)
        if any(s < 1 for s in sizes):
            raise RuntimeError("incorrect filter size")
    return array, sizes, footprint, structure, _per_axis("origin", origin, rank)


def _per_item(array, batch_dims, function):
    """`function` on each item of the leading `batch_dims` axes (host)."""
    if batch_dims == 0:
        return function(array)
    items = array.reshape((-1,) + array.shape[batch_dims:])
    return np.stack([function(item) for item in items]).reshape(array.shape[:batch_dims] + items.shape[1:])


def _apply(operation, array, sizes, footprint, structure, mode, cval, origins, backend="cpu", batch_dims=0,
           strategy="auto", into=None):
    """Erosion or dilation of `array`, in its dtype: on the GPU in the type
    `_gpu_type` picks and cast back (exact for flat elements); on the CPU
    in float64. A CUDA array `into` that the kernels can write as it is
    (`_writable_into`) receives the result and is returned."""
    library = _library(array)
    if library is not None:
        return _apply_cuda(library, operation, array, sizes, footprint, structure, mode, cval, origins, batch_dims,
                           strategy, into)
    if backend in ("auto", "gpu"):
        values = np.ascontiguousarray(array, dtype=_gpu_type(array.dtype, structure, cval, mode))
        try:
            result = _native.grey_filter_gpu(operation, values, int(batch_dims), sizes, footprint, structure, mode,
                                             float(cval), origins, strategy, 0)
            return result.astype(array.dtype, copy=False)
        except RuntimeError:
            if backend == "gpu":
                raise

    def one(item):
        return _native.grey_morphology(operation, np.ascontiguousarray(item, dtype=np.float64), sizes, footprint,
                                       structure, mode, float(cval), origins)

    return _per_item(array, int(batch_dims), one).astype(array.dtype, copy=False)


def _gpu_type(dtype, structure, cval, mode):
    """The type a host array goes to the native GPU call in: its own for
    float32 and float64, and for uint8 with a flat element and, in
    constant mode, a whole `cval` from 0 to 255 (filtered as bytes on the
    device); float32 for bool and other integers of up to 16 bits when
    the element is flat and float32 holds `cval` (each result is an input
    value or `cval`, so it comes back exact); else float64."""
    if dtype == np.float32 or dtype == np.float64:
        return dtype
    flat = structure is None
    if dtype == np.uint8 and flat and (mode != "constant" or (float(cval).is_integer() and 0 <= cval <= 255)):
        return dtype
    small = dtype == np.bool_ or (dtype.kind in "ui" and dtype.itemsize <= 2)
    if small and flat and float(np.float32(cval)) == float(cval):
        return np.float32
    return np.float64


def _output_type(output):
    """The numpy dtype of an output array or of the dtype `output` names
    (None when numpy knows none)."""
    if _is_array(output):
        return _numpy_dtype(output.dtype)
    try:
        return np.dtype(output)
    except TypeError:
        return None


def _writable_into(library, values, into):
    """Whether the kernels can write CUDA array `into` in place of a new
    output for the input `values`: the same library, dtype, shape and
    device, C-contiguous, and no byte shared with the input."""
    if into is None or _library(into) != library or into.dtype != values.dtype:
        return False
    if getattr(into, "requires_grad", False):
        # A tensor in autograd's graph keeps torch's own copy into it.
        return False
    if tuple(into.shape) != tuple(values.shape):
        return False
    if library == "torch":
        if not into.is_contiguous() or into.device != values.device:
            return False
        (a, b) = (into.data_ptr(), values.data_ptr())
        n = values.numel() * values.element_size()
    else:
        if not into.flags.c_contiguous or into.device != values.device:
            return False
        (a, b) = (into.data.ptr, values.data.ptr)
        n = values.nbytes
    return n == 0 or a + n <= b or b + n <= a


def _apply_cuda(library, operation, x, sizes, footprint, structure, mode, cval, origins, batch_dims, strategy,
                into=None):
    """Erosion or dilation of a CUDA array on its device, in its dtype:
    float32, float64 and uint8 (within `_gpu_type`'s conditions) as they
    are; other types converted to float32 where `_gpu_type` finds it exact,
    else to float64, and back. The result goes straight into `into` when
    the type is taken as it is and `_writable_into` allows (no copy after)."""
    dtype = _numpy_dtype(x.dtype)
    wide = np.float64 if dtype is None else _gpu_type(dtype, structure, cval, mode)
    kernel = {np.dtype(np.uint8): "u1", np.dtype(np.float32): "f4"}.get(np.dtype(wide), "f8")
    if library == "torch":
        import torch

        native = kernel == "u1" or x.dtype in (torch.float32, torch.float64)
        work = torch.float32 if kernel == "f4" else torch.float64
        values = x.detach().contiguous() if native else x.detach().to(work).contiguous()
        out = into if native and _writable_into(library, values, into) else torch.empty_like(values)
        torch.cuda.synchronize(values.device)
        pointers, ordinal = [values.data_ptr(), out.data_ptr()], values.device.index or 0
        back = (lambda r: r) if native else (lambda r: r.to(x.dtype))
    else:
        import cupy as cp

        native = kernel == "u1" or dtype in (np.dtype(np.float32), np.dtype(np.float64))
        with x.device:
            values = cp.ascontiguousarray(x if native else x.astype(cp.float32 if kernel == "f4" else cp.float64))
            out = into if native and _writable_into(library, values, into) else cp.empty_like(values)
            cp.cuda.runtime.deviceSynchronize()
        pointers, ordinal = [values.data.ptr, out.data.ptr], x.device.id
        back = (lambda r: r) if native else (lambda r: r.astype(x.dtype))
    _native.grey_filter_cuda(operation, pointers, kernel, list(values.shape), int(batch_dims), sizes,
                             footprint, structure, mode, float(cval), origins, strategy, ordinal)
    return back(out)


def _is_array(x):
    return isinstance(x, np.ndarray) or (x is not None and _library(x) is not None)


def _check_output(array, output):
    """An output array lives where the input does and has its shape."""
    if not _is_array(output):
        return
    if (_library(array) is None) != (_library(output) is None):
        raise ValueError("output must be on the input's device (a numpy array for host input, a CUDA array of the "
                         "same library for CUDA input)")
    if tuple(output.shape) != tuple(array.shape):
        raise RuntimeError("output shape not correct")


def _store(result, output):
    """`result` into an output array (cast), or as the dtype `output`
    names, or as it is."""
    if output is None or result is output:
        return result
    if _is_array(output):
        if tuple(output.shape) != tuple(result.shape):
            raise RuntimeError("output shape not correct")
        if type(output).__module__.startswith("torch"):
            output.copy_(result)
        else:
            output[...] = result
        return output
    if type(result).__module__.startswith("torch"):
        import torch

        return result.to(getattr(torch, np.dtype(output).name))
    return result.astype(np.dtype(output), copy=False)


def _is_bool(x):
    return str(x.dtype) in ("bool", "torch.bool")


def _ufunc(name, a, b, out=None):
    """numpy's `subtract`, `add` or `bitwise_xor` (cupy takes numpy's), or
    torch's, into `out` when given."""
    if type(a).__module__.startswith("torch"):
        import torch

        f = {"subtract": torch.sub, "add": torch.add, "bitwise_xor": torch.bitwise_xor}[name]
    else:
        f = getattr(np, name)
    return f(a, b) if out is None else f(a, b, out=out)


def _numpy_dtype(dtype):
    """The numpy dtype of a numpy, cupy or torch dtype, or None (bfloat16)."""
    try:
        return np.dtype(str(dtype).replace("torch.", ""))
    except TypeError:
        return None


def _check_values(array, structure):
    """Complex values, and 64-bit integers beyond 2^53 (not exact in the
    float64 the filters compute in), are refused."""
    library = _library(array)
    dtype = _numpy_dtype(array.dtype)
    if (dtype is not None and dtype.kind == "c") or (library == "torch" and array.is_complex()):
        raise TypeError("Complex type not supported")
    if dtype is not None and dtype in (np.dtype(np.int64), np.dtype(np.uint64)) and _size(array) > 0:
        bound = 2 ** 53
        if library == "torch":
            large = bool((array.abs() > bound).any())
        else:
            xp = np if library is None else __import__("cupy")
            large = bool(xp.any(array > bound)) or (dtype.kind == "i" and bool(xp.any(array < -bound)))
        if large:
            raise ValueError("int64/uint64 values beyond 2^53 are not exact in the float64 the filters compute in: "
                             "relabel them to smaller values first")


def _size(x):
    return x.numel() if type(x).__module__.startswith("torch") else x.size


def _copy(x):
    return x.clone() if type(x).__module__.startswith("torch") else x.copy()


def _grey(operation, input, size, footprint, structure, output, mode, cval, origin, backend="auto", batch_dims=0):
    """One operator, composed from erosions and dilations as scipy composes
    it: each step in the input's dtype, the last one into ``output`` (an
    array or a dtype), so integer wrap-around and rounding match."""
    _check_backend(backend, input)
    array, sizes, footprint, structure, origins = _prepare(input, size, footprint, structure, mode, origin,
                                                           batch_dims)
    _check_output(array, output)
    _check_values(array, structure)
    # scipy takes cval as a double in its separable path (a box: a size, or
    # a footprint of only ones) and converted to the input's type in the
    # general one (a footprint with holes, or a structure).
    separable = structure is None and (footprint is None or footprint.all())
    dtype = _numpy_dtype(array.dtype)
    if dtype == np.bool_ and -1.0 < float(cval) < 256.0:
        # scipy's C code casts a result taken against cval to a bool array's
        # type toward zero (0.5 is false, where numpy's cast makes it true),
        # in both paths: a cval whose cast C defines is replaced by that
        # cast, so that the filters and numpy's cast give scipy's values.
        cval = float(int(float(cval)) != 0)
    if not separable and dtype is not None:
        with np.errstate(invalid="ignore", over="ignore"):
            cval = float(np.array(float(cval)).astype(dtype))

    def run(op, x, out=None):
        if _size(x) == 0:
            return _store(_copy(x), out)
        into = out if _is_array(out) else None
        return _store(_apply(op, x, sizes, footprint, structure, mode, cval, origins, backend, batch_dims,
                             into=into), out)

    if operation in ("erosion", "dilation"):
        return run(operation, array, output)
    # A host array the native call takes as it is (float32, float64, and
    # uint8 within `_gpu_type`'s conditions) on the GPU: uploaded once, the
    # filters on the device, the differences on the host in its type, when
    # the result is asked for in that type (else step by step below, as
    # scipy casts between the steps).
    native = (_library(array) is None and array.size > 0
              and _gpu_type(array.dtype, structure, cval, mode) == array.dtype)
    if native and backend in ("auto", "gpu") and (output is None or _output_type(output) == array.dtype):
        try:
            result = _native.grey_filter_gpu(operation, np.ascontiguousarray(array), int(batch_dims), sizes,
                                             footprint, structure, mode, float(cval), origins, "auto", 0)
            return _store(result, output)
        except RuntimeError:
            if backend == "gpu":
                raise
    if operation == "opening":
        return run("dilation", run("erosion", array), output)
    if operation == "closing":
        return run("erosion", run("dilation", array), output)
    if operation == "gradient":
        dilated = run("dilation", array)
        if _is_array(output):
            run("erosion", array, output)
            return _ufunc("subtract", dilated, output, out=output)
        return _ufunc("subtract", dilated, run("erosion", array))
    if operation == "laplace":
        dilated = run("dilation", array)
        if _is_array(output):
            run("erosion", array, output)
            _ufunc("add", dilated, output, out=output)
            _ufunc("subtract", output, array, out=output)
            return _ufunc("subtract", output, array, out=output)
        result = _ufunc("add", dilated, run("erosion", array))
        return _ufunc("subtract", _ufunc("subtract", result, array), array)
    if operation == "white_tophat":
        opened = run("dilation", run("erosion", array), output)
        if _is_bool(array) and _is_bool(opened):
            return _ufunc("bitwise_xor", array, opened, out=opened if output is not None else None)
        return _ufunc("subtract", array, opened, out=opened if output is not None else None)
    closed = run("erosion", run("dilation", array), output)
    if _is_bool(array) and _is_bool(closed):
        return _ufunc("bitwise_xor", closed, array, out=closed if output is not None else None)
    return _ufunc("subtract", closed, array, out=closed if output is not None else None)


_GREY_DOC = """

    Beyond scipy's arguments (keyword only): ``backend`` 'auto' (the
    default: the GPU when one is usable, else the CPU), 'gpu' or 'cpu';
    ``batch_dims``, the number of leading axes that index independent
    arrays (``(B, C, spatial…)`` is ``batch_dims=2``), the element then
    having the spatial rank. numpy in gives numpy out; a CUDA torch tensor
    or cupy array is filtered on its device and gives one back."""


def grey_erosion(input, size=None, footprint=None, structure=None, output=None, mode="reflect", cval=0.0, origin=0,
                 *, backend="auto", batch_dims=0):
    """scipy.ndimage.grey_erosion: the minimum over the structuring element
    (of ``input - structure`` when ``structure`` is given)."""
    return _grey("erosion", input, size, footprint, structure, output, mode, cval, origin, backend, batch_dims)


def grey_dilation(input, size=None, footprint=None, structure=None, output=None, mode="reflect", cval=0.0, origin=0,
                  *, backend="auto", batch_dims=0):
    """scipy.ndimage.grey_dilation: the maximum over the reflected
    structuring element (of ``input + structure`` when given)."""
    return _grey("dilation", input, size, footprint, structure, output, mode, cval, origin, backend, batch_dims)


def grey_opening(input, size=None, footprint=None, structure=None, output=None, mode="reflect", cval=0.0, origin=0,
                 *, backend="auto", batch_dims=0):
    """scipy.ndimage.grey_opening: the dilation of the erosion."""
    return _grey("opening", input, size, footprint, structure, output, mode, cval, origin, backend, batch_dims)


def grey_closing(input, size=None, footprint=None, structure=None, output=None, mode="reflect", cval=0.0, origin=0,
                 *, backend="auto", batch_dims=0):
    """scipy.ndimage.grey_closing: the erosion of the dilation."""
    return _grey("closing", input, size, footprint, structure, output, mode, cval, origin, backend, batch_dims)


def morphological_gradient(input, size=None, footprint=None, structure=None, output=None, mode="reflect", cval=0.0,
                           origin=0, *, backend="auto", batch_dims=0):
    """scipy.ndimage.morphological_gradient: dilation minus erosion."""
    return _grey("gradient", input, size, footprint, structure, output, mode, cval, origin, backend, batch_dims)


def morphological_laplace(input, size=None, footprint=None, structure=None, output=None, mode="reflect", cval=0.0,
                          origin=0, *, backend="auto", batch_dims=0):
    """scipy.ndimage.morphological_laplace: dilation plus erosion minus
    twice the input."""
    return _grey("laplace", input, size, footprint, structure, output, mode, cval, origin, backend, batch_dims)


def white_tophat(input, size=None, footprint=None, structure=None, output=None, mode="reflect", cval=0.0, origin=0,
                 *, backend="auto", batch_dims=0):
    """scipy.ndimage.white_tophat: the input minus its opening."""
    return _grey("white_tophat", input, size, footprint, structure, output, mode, cval, origin, backend, batch_dims)


def black_tophat(input, size=None, footprint=None, structure=None, output=None, mode="reflect", cval=0.0, origin=0,
                 *, backend="auto", batch_dims=0):
    """scipy.ndimage.black_tophat: the closing minus the input."""
    return _grey("black_tophat", input, size, footprint, structure, output, mode, cval, origin, backend, batch_dims)


for _f in (grey_erosion, grey_dilation, grey_opening, grey_closing, morphological_gradient, morphological_laplace,
           white_tophat, black_tophat):
    _f.__doc__ += _GREY_DOC


def _binary_structure(rank, structure):
    if structure is None:
        # scipy's generate_binary_structure(rank, 1): the cross.
        structure = np.zeros((3,) * rank, dtype=bool)
        centre = (1,) * rank
        structure[centre] = True
        for axis in range(rank):
            for step in (0, 2):
                index = list(centre)
                index[axis] = step
                structure[tuple(index)] = True
        return structure
    structure = np.asarray(structure, dtype=bool)
    if structure.ndim != rank:
        raise RuntimeError("structure and input must have same dimensionality")
    if not structure.any():
        raise RuntimeError("structure must not be empty")
    return np.ascontiguousarray(structure)


def _centre_is_set(structure, origin):
    """Whether the element at the structure's centre, moved by the origin,
    is set (then repeated erosion or dilation only shrinks or grows)."""
    centre = tuple(n // 2 + o for n, o in zip(structure.shape, origin))
    if any(not 0 <= c < n for c, n in zip(centre, structure.shape)):
        return False
    return bool(structure[centre])


def _binary_cpu(operation, current, structure, steps, mask, border_value, origins, batch_dims):
    """Binary steps on the CPU (bool arrays); until stable (steps < 1), a
    state seen before is an error (a structure whose centre is not set can
    cycle for ever; scipy then never returns)."""
    count = 0
    seen = set()
    centred = _centre_is_set(structure, origins)
    while True:
        def one(item):
            return _native.grey_morphology(operation, item.astype(np.float64), None, structure, None, "constant",
                                           float(bool(border_value)), origins)

        result = _per_item(current.astype(np.uint8), batch_dims, one) != 0
        if mask is not None:
            result = np.where(mask, result, current)
        count += 1
        changed = not np.array_equal(result, current)
        current = result
        if (steps >= 1 and count >= steps) or (steps < 1 and not changed):
            return current
        if steps < 1 and not centred:
            state = hashlib.sha1(np.packbits(current).tobytes()).digest()
            if state in seen:
                raise ValueError(
                    f"binary_{operation} with iterations < 1 cycles without settling (a structure whose centre "
                    f"is not set can make it oscillate; scipy never returns): give a number of iterations")
            seen.add(state)


def _binary(dilate, input, structure, iterations, mask, output, border_value, origin, backend="auto", batch_dims=0):
    _check_backend(backend, input)
    library = _library(input)
    array = input if library is not None else _host_array(input)
    if library is None and np.iscomplexobj(array):
        raise TypeError("Complex type not supported")
    if array.ndim < 1:
        raise RuntimeError("input must have at least one dimension")
    rank = _spatial_rank(array.ndim, batch_dims)
    structure = _binary_structure(rank, structure)
    origins = _per_axis("origin", origin, rank)
    operation = "dilation" if dilate else "erosion"
    steps = int(iterations)
    # Until stable with a structure whose centre is not set, the states may
    # cycle: the CPU path detects it (the GPU runs only the others).
    gpu_fits = steps >= 1 or _centre_is_set(structure, origins)
    _check_output(array, output)
    if library is not None:
        if mask is not None and _library(mask) is None:
            # A host mask goes to the input's device.
            if library == "torch":
                import torch

                mask = torch.as_tensor(np.asarray(mask), device=array.device)
            else:
                import cupy as cp

                with array.device:
                    mask = cp.asarray(np.asarray(mask))
        if mask is not None and tuple(mask.shape) != tuple(array.shape):
            raise RuntimeError("mask and input must have equal sizes")
        if _size(array) == 0:
            return _store(array != 0, output)
        if not gpu_fits:
            host = array.detach().cpu().numpy() if library == "torch" else array.get()
            host_mask = None if mask is None else (mask.detach().cpu().numpy() if library == "torch" else mask.get())
            result = _binary(dilate, host, structure, iterations, host_mask, None, border_value, origin, "cpu",
                             batch_dims)
            if library == "torch":
                import torch

                return _store(torch.as_tensor(result, device=array.device), output)
            import cupy as cp

            with array.device:
                return _store(cp.asarray(result), output)
        into = output if _is_array(output) else None
        return _store(_binary_cuda(library, dilate, array, structure, steps, mask, border_value, origins, batch_dims,
                                   into), output)
    # A boolean array as it is (its bytes, 0 or 1, are the kernels').
    current = np.asarray(array, dtype=bool)
    if mask is not None and _library(mask) is not None:
        raise ValueError("mask must be on the input's device: a numpy array for host input")
    if current.size == 0:
        return _store(current.copy(), output)
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != current.shape:
            raise RuntimeError("mask and input must have equal sizes")
    if backend in ("auto", "gpu") and gpu_fits:
        try:
            result = _native.binary_filter_gpu(dilate, np.ascontiguousarray(current).view(np.uint8),
                                               None if mask is None else np.ascontiguousarray(mask).view(np.uint8),
                                               int(batch_dims), structure, origins, bool(border_value), steps, 0)
            return _store(result.view(bool), output)
        except RuntimeError:
            if backend == "gpu":
                raise
    elif backend == "gpu":
        raise ValueError("iterations < 1 with a structure whose centre is not set runs on the CPU (it may cycle): "
                         "use backend='cpu' or 'auto'")
    return _store(_binary_cpu(operation, current, structure, steps, mask, border_value, origins, int(batch_dims)),
                  output)


def _binary_cuda(library, dilate, x, structure, steps, mask, border_value, origins, batch_dims, into=None):
    """Binary steps of a CUDA array on its device; a bool array back (`into`
    itself when the kernels can write it, `_cuda_bytes_and_output`)."""
    values, out, pointers, ordinal = _cuda_bytes_and_output(x, mask, into)
    _native.binary_filter_cuda(dilate, pointers, list(values.shape), int(batch_dims), structure, origins,
                               bool(border_value), steps, ordinal)
    # The kernels write 0 or 1 per byte: a bool array's own bytes.
    return out


def _cuda_bytes_and_output(x, mask=None, into=None):
    """For the binary kernels on CUDA array ``x`` (and ``mask``): its bytes
    (``_cuda_bytes``), a bool output of its shape on its device (``into``
    when it is a bool array the kernels can write, sharing no byte with
    the input or the mask: ``_writable_into``; else a new one), their
    addresses ``[input, output, mask or 0]``, and the device's ordinal;
    the device synchronized, so that the native call sees the bytes."""

    def fits(values, mask_values):
        if into is None or not _is_bool(into):
            return False
        # The bytes as bool, so that `_writable_into` compares dtypes.
        as_bool = values.view(into.dtype)
        return _writable_into(_library(x), as_bool, into) and (
            mask_values is None or _writable_into(_library(x), mask_values.view(into.dtype), into))

    if type(x).__module__.startswith("torch"):
        import torch

        values = _cuda_bytes(x)
        mask_values = None if mask is None else _cuda_bytes(mask)
        out = into if fits(values, mask_values) else torch.empty(values.shape, dtype=torch.bool, device=values.device)
        torch.cuda.synchronize(values.device)
        pointers = [values.data_ptr(), out.data_ptr(), 0 if mask_values is None else mask_values.data_ptr()]
        return values, out, pointers, values.device.index or 0
    import cupy as cp

    with x.device:
        values = _cuda_bytes(x)
        mask_values = None if mask is None else _cuda_bytes(mask)
        out = into if fits(values, mask_values) else cp.empty(values.shape, dtype=bool)
        cp.cuda.runtime.deviceSynchronize()
    pointers = [values.data.ptr, out.data.ptr, 0 if mask_values is None else mask_values.data.ptr]
    return values, out, pointers, x.device.id


def _cuda_bytes(x):
    """A C-contiguous array of one byte per element on ``x``'s device
    (torch or cupy) whose non-zero bytes mark ``x``'s non-zero elements: ``x``
    itself when it is bool, uint8 or int8 and contiguous (the kernels read any
    non-zero byte as true), else ``x != 0``."""
    if type(x).__module__.startswith("torch"):
        import torch

        x = x.detach()
        if x.dtype in (torch.bool, torch.uint8, torch.int8):
            return x.contiguous()
        return (x != 0).contiguous()
    import cupy as cp

    if x.dtype.itemsize == 1 and x.dtype.kind in "biu":
        return cp.ascontiguousarray(x)
    return cp.ascontiguousarray(x != 0)


_BINARY_DOC = """

    Beyond scipy's arguments (keyword only): ``backend`` ('auto', 'gpu' or
    'cpu') and ``batch_dims`` (leading axes indexing independent arrays),
    as for the grey-scale operators; numpy in gives numpy out, CUDA arrays
    stay on their device. Until stable (``iterations`` < 1) with a
    structure whose centre is not set runs on the CPU, which detects a
    cycle (scipy never returns then) and raises ValueError."""


def binary_erosion(input, structure=None, iterations=1, mask=None, output=None, border_value=0, origin=0,
                   brute_force=False, *, backend="auto", batch_dims=0):
    """scipy.ndimage.binary_erosion: true where the structuring element
    (scipy's cross by default) fits, repeated ``iterations`` times (< 1:
    until nothing changes), only where ``mask`` is true; outside the array
    the value is ``border_value``. ``brute_force`` is accepted (the result
    is the same)."""
    return _binary(False, input, structure, iterations, mask, output, border_value, origin, backend, batch_dims)


def binary_dilation(input, structure=None, iterations=1, mask=None, output=None, border_value=0, origin=0,
                    brute_force=False, *, backend="auto", batch_dims=0):
    """scipy.ndimage.binary_dilation: true where the reflected structuring
    element touches a true element, repeated as binary_erosion is."""
    return _binary(True, input, structure, iterations, mask, output, border_value, origin, backend, batch_dims)


def binary_opening(input, structure=None, iterations=1, output=None, origin=0, mask=None, border_value=0,
                   brute_force=False, *, backend="auto", batch_dims=0):
    """scipy.ndimage.binary_opening: ``iterations`` erosions, then as many
    dilations."""
    eroded = binary_erosion(input, structure, iterations, mask, None, border_value, origin, backend=backend,
                            batch_dims=batch_dims)
    return binary_dilation(eroded, structure, iterations, mask, output, border_value, origin, backend=backend,
                           batch_dims=batch_dims)


def binary_closing(input, structure=None, iterations=1, output=None, origin=0, mask=None, border_value=0,
                   brute_force=False, *, backend="auto", batch_dims=0):
    """scipy.ndimage.binary_closing: ``iterations`` dilations, then as many
    erosions."""
    dilated = binary_dilation(input, structure, iterations, mask, None, border_value, origin, backend=backend,
                              batch_dims=batch_dims)
    return binary_erosion(dilated, structure, iterations, mask, output, border_value, origin, backend=backend,
                          batch_dims=batch_dims)


for _f in (binary_erosion, binary_dilation, binary_opening, binary_closing):
    _f.__doc__ += _BINARY_DOC


_DISTANCE_BATCH_DOC = """

    ``batch_dims`` (keyword only): the number of leading axes that index
    independent arrays (``(B, C, spatial…)`` is ``batch_dims=2``), each
    transformed on its own as scipy would; the indices are then ``batch +
    (rank,) + spatial``. ``backend``: 'auto' (the GPU where it takes the
    arrays, else the CPU), 'gpu' or 'cpu' (keyword only)."""


def _batch_dims(batch_dims, ndim):
    """``batch_dims`` as an int that leaves at least one spatial axis."""
    import operator

    batch_dims = operator.index(batch_dims)
    if batch_dims < 0 or ndim - batch_dims < 1:
        raise ValueError(f"batch_dims={batch_dims} leaves no spatial axis of an array of rank {ndim}")
    return batch_dims


def _host_mask(input):
    """The non-zero elements of a host or CUDA input as a contiguous bool
    numpy array (a CUDA input is copied to the host)."""
    if type(input).__module__.startswith("torch"):
        input = input.detach().cpu().numpy()
    elif _library(input) == "cupy":
        input = input.get()
    if np.iscomplexobj(input):
        raise TypeError("Complex type not supported")
    # np.ascontiguousarray would make a rank-0 array rank 1.
    a = np.asarray(input, dtype=bool)
    return a if a.flags.c_contiguous else a.copy(order="C")


def _per_item_pair(a, batch_dims, function):
    """``function`` (an array to (distances, indices or None)) of each array
    of the leading ``batch_dims`` axes: distances of ``a``'s shape, indices
    ``batch + (rank,) + spatial``."""
    if batch_dims == 0:
        return function(a)
    batch, spatial = a.shape[:batch_dims], a.shape[batch_dims:]
    if a.size == 0 and 0 in batch:
        # No array: the results' shapes, from one array of the spatial shape.
        d, i = function(np.ones(spatial, bool))
        return (np.empty(a.shape, d.dtype),
                None if i is None else np.empty(batch + (len(spatial),) + spatial, np.int32))
    results = [function(item) for item in a.reshape((-1,) + spatial)]
    dist = np.stack([d for d, _ in results]).reshape(a.shape)
    ind = None
    if results[0][1] is not None:
        ind = np.stack([i for _, i in results]).reshape(batch + (len(spatial),) + spatial)
    return dist, ind


def _like_input(input, array):
    """A host result as an array of ``input``'s library on its device."""
    library = _library(input)
    if array is None or library is None:
        return array
    if library == "torch":
        import torch

        return torch.from_numpy(np.ascontiguousarray(array)).to(input.device)
    import cupy as cp

    with input.device:
        return cp.asarray(array)


def _device_results(input, dist, ind, return_distances, return_indices, distances, indices):
    """scipy's return convention for a CUDA input computed on the host: the
    results on the input's device; given CUDA arrays are filled in place."""
    out = []
    for wanted, value, given, name in ((return_distances, dist, distances, "distances"),
                                       (return_indices, ind, indices, "indices")):
        if not wanted:
            continue
        value = _like_input(input, value)
        if given is None:
            out.append(value)
            continue
        if tuple(given.shape) != tuple(value.shape) or str(given.dtype).split(".")[-1] != str(value.dtype).split(".")[-1]:
            raise RuntimeError(f"{name} array has wrong shape or type (want {value.dtype}, {tuple(value.shape)})")
        given[...] = value
    if not out:
        return None
    return out[0] if len(out) == 1 else tuple(out)


def distance_transform_edt(input, sampling=None, return_distances=True, return_indices=False, distances=None,
                           indices=None, *, backend="auto", batch_dims=0):
    """``scipy.ndimage.distance_transform_edt``: for every non-zero element,
    the Euclidean distance to the nearest zero element, with ``sampling`` (a
    spacing per axis, or one for all), float64, equal to scipy's with unit
    sampling and within float64 rounding otherwise; with
    ``return_indices``, the feature transform: the coordinates of a nearest
    zero element (int32, ``(rank,) + shape``; ties: any nearest; without
    zero elements scipy's ``(-1, 0, ..., 0)``). ``distances`` and
    ``indices`` receive the results when given, as in scipy.

    numpy in gives numpy out (the GPU for spatial rank 1 to 3 when one is
    usable, else the CPU on all cores); a CUDA torch tensor (a cupy array)
    gives CUDA tensors (cupy arrays), computed on its device (spatial rank
    1 to 3; given ``distances`` and ``indices`` must then be contiguous
    arrays of that device)."""
    _check_distance_args(return_distances, return_indices, distances, indices)
    if backend not in ("auto", "gpu", "cpu"):
        raise ValueError(f"backend must be 'auto', 'gpu' or 'cpu', not {backend!r}")
    library = _library(input)
    if library is not None and backend != "cpu":
        ndim = input.ndim
        if ndim == 0:
            raise ValueError("arrays of rank 1 to 8 are taken, not rank 0")
        batch_dims = _batch_dims(batch_dims, ndim)
        if ndim - batch_dims > 3:
            raise ValueError(f"CUDA arrays of spatial rank 1 to 3 are taken, not rank {ndim - batch_dims} (numpy "
                             "arrays of any rank)")
        sampling = _sampling(sampling, ndim - batch_dims)
        return _transform_cuda(library, input, "edt", sampling, batch_dims, return_distances, return_indices,
                               distances, indices)
    a = _host_mask(input)
    if a.ndim == 0:
        raise ValueError("arrays of rank 1 to 8 are taken, not rank 0")
    batch_dims = _batch_dims(batch_dims, a.ndim)
    rank = a.ndim - batch_dims
    s = _sampling(sampling, rank)
    order = (["gpu", "cpu"] if rank <= 3 else ["cpu"]) if backend == "auto" else [backend]

    def compute(b):
        if b == "gpu":
            if not return_indices:
                return _native.distance_transform_edt(a, batch_dims, s, "gpu", 0), None
            return _native.distance_transform_edt_indices_gpu(a, batch_dims, s, 0)
        if not return_indices:
            return _per_item_pair(a, batch_dims, lambda x: (_native.distance_transform_edt(x, 0, s, "cpu", 0), None))
        return _per_item_pair(a, batch_dims, lambda x: _native.distance_transform_indices("edt", x, "euclidean", s))
    dist, ind = _on_first_backend(order, compute)
    return _results_for(input, dist, ind, return_distances, return_indices, distances, indices)


def _on_first_backend(order, compute):
    """``compute(backend)`` on the first backend of ``order`` that runs (a
    RuntimeError moves on to the next; the last one's is raised)."""
    for i, b in enumerate(order):
        try:
            return compute(b)
        except RuntimeError:
            if i + 1 == len(order):
                raise


def _results_for(input, dist, ind, return_distances, return_indices, distances, indices):
    """scipy's return convention for host results: on ``input``'s device
    for a CUDA input, else numpy."""
    if _library(input) is not None:
        return _device_results(input, dist, ind, return_distances, return_indices, distances, indices)
    return _distance_results(dist, ind, return_distances, return_indices, distances, indices)


def _transform_cuda(library, input, kind, argument, batch_dims, return_distances, return_indices, distances,
                    indices):
    """A distance transform of a CUDA array on its device: ``kind`` 'edt'
    (float64 distances, ``argument`` the sampling) or 'cdt' (int32,
    ``argument`` the metric)."""
    rank = input.ndim - batch_dims
    if library == "torch":
        import torch

        mask = _cuda_bytes(input)
        device, ordinal = mask.device, mask.device.index or 0
        value_type = torch.float64 if kind == "edt" else torch.int32
        int32 = torch.int32

        def new(shape, dtype):
            return torch.empty(shape, dtype=dtype, device=device)

        def fits(a, shape, dtype):
            return (type(a).__module__.startswith("torch") and a.dtype == dtype and tuple(a.shape) == shape
                    and a.is_contiguous() and a.device == device)

        def pointer(a):
            return a.data_ptr()

        def synchronize():
            torch.cuda.synchronize(device)
    else:
        import cupy as cp

        device, ordinal = input.device, input.device.id
        with device:
            mask = _cuda_bytes(input)
        value_type = cp.float64 if kind == "edt" else cp.int32
        int32 = cp.int32

        def new(shape, dtype):
            with device:
                return cp.empty(shape, dtype=dtype)

        def fits(a, shape, dtype):
            return (type(a).__module__.startswith("cupy") and a.dtype == dtype and tuple(a.shape) == shape
                    and a.flags.c_contiguous and a.device == device)

        def pointer(a):
            return a.data.ptr

        def synchronize():
            with device:
                cp.cuda.runtime.deviceSynchronize()
    shape = tuple(mask.shape)
    index_shape = shape[:batch_dims] + (rank,) + shape[batch_dims:]
    out = distances if distances is not None else new(shape, value_type)
    if not fits(out, shape, value_type):
        raise ValueError(f"distances must be a contiguous {'float64' if kind == 'edt' else 'int32'} array of the "
                         "input's shape on its device")
    ind = None
    if return_indices:
        ind = indices if indices is not None else new(index_shape, int32)
        if not fits(ind, index_shape, int32):
            raise ValueError("indices must be a contiguous int32 array of shape batch + (rank,) + spatial on the "
                             "input's device")
    synchronize()
    pointers = [pointer(mask), pointer(out), 0 if ind is None else pointer(ind)]
    if kind == "edt":
        _native.distance_transform_edt_cuda(pointers, list(shape), batch_dims, argument, ordinal)
    else:
        _native.distance_transform_cdt_cuda(pointers, list(shape), batch_dims, argument, ordinal)
    results = []
    if return_distances and distances is None:
        results.append(out)
    if return_indices and indices is None:
        results.append(ind)
    if not results:
        return None
    return results[0] if len(results) == 1 else tuple(results)


def _sampling(sampling, rank):
    """One positive spacing per axis (a scalar for all), or None."""
    if sampling is None:
        return None
    s = np.atleast_1d(np.asarray(sampling, dtype=np.float64)).tolist()
    if len(s) == 1:
        s = s * rank
    if len(s) != rank:
        raise RuntimeError("sequence argument must have length equal to input rank")
    return s


def _on_device(x):
    module = type(x).__module__
    return (module.startswith("torch") and x.is_cuda) or module.startswith("cupy")


def _check_distance_args(return_distances, return_indices, distances, indices):
    """scipy's checks of the four arguments."""
    if not (return_distances or return_indices):
        raise RuntimeError("at least one of return_distances/return_indices must be True")
    if distances is not None and not return_distances:
        raise RuntimeError("return_distances must be True if distances is supplied")
    if indices is not None and not return_indices:
        raise RuntimeError("return_indices must be True if indices is supplied")


def _distance_results(dist, ind, return_distances, return_indices, distances, indices):
    """scipy's return convention: the arrays asked for and not given, in
    the order (distances, indices); given arrays are filled in place."""
    out = []
    if return_distances:
        if isinstance(distances, np.ndarray):
            if distances.shape != dist.shape or distances.dtype != dist.dtype:
                raise RuntimeError(f"distances array has wrong shape or type (want {dist.dtype}, {dist.shape})")
            distances[...] = dist
        else:
            out.append(dist)
    if return_indices:
        if isinstance(indices, np.ndarray):
            if indices.shape != ind.shape or indices.dtype != np.int32:
                raise RuntimeError(f"indices array has wrong shape or type (want int32, {ind.shape})")
            indices[...] = ind
        else:
            out.append(ind)
    if not out:
        return None
    return out[0] if len(out) == 1 else tuple(out)


def distance_transform_bf(input, metric="euclidean", sampling=None, return_distances=True, return_indices=False,
                          distances=None, indices=None, *, batch_dims=0):
    """scipy.ndimage.distance_transform_bf: the distance of every non-zero
    element to the nearest zero element by brute force (the exactness
    oracle; quadratic, for small arrays, on the CPU), in 'euclidean'
    (float64, with ``sampling``), 'taxicab' or 'chessboard' (uint32)
    metric; indices as scipy's (int32, ``(rank,) + shape``; ties: any
    nearest). A CUDA input is copied to the host and its results come back
    to its device; ``batch_dims`` (keyword only) as for
    distance_transform_edt."""
    _check_distance_args(return_distances, return_indices, distances, indices)
    a = _host_mask(input)
    if a.ndim == 0:
        raise RuntimeError("input must have at least one dimension")
    batch_dims = _batch_dims(batch_dims, a.ndim)
    metric = str(metric).lower()
    if metric not in ("euclidean", "taxicab", "cityblock", "manhattan", "chessboard"):
        raise RuntimeError("distance metric not supported")
    s = _sampling(sampling, a.ndim - batch_dims) if metric == "euclidean" else None
    dist, ind = _per_item_pair(a, batch_dims, lambda x: _native.distance_transform_indices("bf", x, metric, s))
    return _results_for(input, dist, ind, return_distances, return_indices, distances, indices)


def distance_transform_cdt(input, metric="chessboard", return_distances=True, return_indices=False,
                           distances=None, indices=None, *, backend="auto", batch_dims=0):
    """scipy.ndimage.distance_transform_cdt for the 'chessboard' and
    'taxicab' metrics, computed exactly (separable passes, as the Euclidean
    transform): int32 distances, -1 where no zero element is reachable (an
    array without zeros); indices as scipy's (an unreached element's own
    coordinates). A structuring element as the metric is not supported
    (ValueError).

    The GPU takes spatial rank 1 to 3 with axes of at most 12,288
    elements; numpy in gives numpy out, CUDA torch tensors and cupy arrays
    give results on their device (computed there when the GPU takes the
    shape, else on the host and copied back)."""
    if not isinstance(metric, str):
        raise ValueError("a structuring element as the metric is not supported: use 'chessboard' or 'taxicab'")
    metric = metric.lower()
    if metric not in ("chessboard", "taxicab", "cityblock", "manhattan"):
        raise ValueError(f"invalid metric provided: {metric!r}")
    _check_distance_args(return_distances, return_indices, distances, indices)
    if backend not in ("auto", "gpu", "cpu"):
        raise ValueError(f"backend must be 'auto', 'gpu' or 'cpu', not {backend!r}")
    library = _library(input)
    a = None if library is not None else _host_mask(input)
    shape = tuple(input.shape) if a is None else a.shape
    if len(shape) == 0:
        raise RuntimeError("input must have at least one dimension")
    batch_dims = _batch_dims(batch_dims, len(shape))
    spatial = shape[batch_dims:]
    on_gpu = _native.takes_chamfer(list(spatial))
    if backend == "gpu" and not on_gpu:
        raise ValueError(f"the GPU chamfer transform takes spatial rank 1 to 3 and axes of at most 12,288 elements, "
                         f"not {spatial}")
    if library is not None and backend != "cpu" and on_gpu:
        return _transform_cuda(library, input, "cdt", metric, batch_dims, return_distances, return_indices,
                               distances, indices)
    if a is None:
        a = _host_mask(input)
    order = (["gpu", "cpu"] if on_gpu else ["cpu"]) if backend == "auto" else [backend]

    def compute(b):
        if b == "gpu":
            return _native.distance_transform_cdt_gpu(a, batch_dims, metric, bool(return_indices), 0)
        return _per_item_pair(a, batch_dims,
                              lambda x: _native.distance_transform_indices("cdt", x, metric, None, bool(return_indices)))
    dist, ind = _on_first_backend(order, compute)
    return _results_for(input, dist, ind, return_distances, return_indices, distances, indices)


for _f in (distance_transform_edt, distance_transform_cdt):
    _f.__doc__ += _DISTANCE_BATCH_DOC


def binary_propagation(input, structure=None, mask=None, output=None, border_value=0, origin=0, *, backend="auto",
                       batch_dims=0):
    """scipy.ndimage.binary_propagation: binary_dilation repeated until
    nothing changes, only where ``mask`` is true (``backend`` and
    ``batch_dims`` as for binary_dilation)."""
    return binary_dilation(input, structure, -1, mask, output, border_value, origin, backend=backend,
                           batch_dims=batch_dims)


def _fill_holes_components(input, structure, origin, backend, batch_dims, output):
    """binary_fill_holes on the GPU by the background's connected components
    when the structure is scipy's default (the cross) without an origin and
    the spatial rank is 1 to 3: a bool array where the result lives, or
    None (then the caller dilates from the border until stable)."""
    _check_backend(backend, input)
    if backend == "cpu":
        return None
    library = _library(input)
    array = input if library is not None else _host_array(input)
    if library is None and np.iscomplexobj(array):
        raise TypeError("Complex type not supported")
    if array.ndim < 1:
        raise RuntimeError("input must have at least one dimension")
    rank = _spatial_rank(array.ndim, batch_dims)
    if rank > 3 or _size(array) == 0:
        return None
    structure = _binary_structure(rank, structure)
    origins = _per_axis("origin", origin, rank)
    _check_output(array, output)
    if library is None:
        try:
            values = np.ascontiguousarray(np.asarray(array, dtype=bool)).view(np.uint8)
            result = _native.binary_fill_holes_gpu(values, int(batch_dims), structure, origins, 0)
        except RuntimeError:
            if backend == "gpu":
                raise
            return None
        return None if result is None else result.view(bool)
    values, out, pointers, ordinal = _cuda_bytes_and_output(array)
    ran = _native.binary_fill_holes_cuda(pointers[:2], list(values.shape), int(batch_dims), structure, origins,
                                         ordinal)
    # The kernels write 0 or 1 per byte: a bool array's own bytes.
    return out if ran else None


def binary_fill_holes(input, structure=None, output=None, origin=0, *, backend="auto", batch_dims=0):
    """scipy.ndimage.binary_fill_holes: the holes (background not connected
    to the border through ``structure``) set to true (``backend`` and
    ``batch_dims`` as for binary_dilation)."""
    filled = _fill_holes_components(input, structure, origin, backend, batch_dims, output)
    if filled is not None:
        if _is_array(output):
            # scipy fills a given output and returns None.
            _store(filled, output)
            return None
        return _store(filled, output)
    if _library(input) is not None:
        mask = input == 0
        seed = mask & False
        filled = binary_dilation(seed, structure, -1, mask, None, 1, origin, backend=backend, batch_dims=batch_dims)
        if _is_array(output):
            # scipy fills a given output and returns None.
            _store(~filled, output)
            return None
        return _store(~filled, output)
    mask = np.logical_not(input)
    seed = np.zeros(mask.shape, bool)
    if isinstance(output, np.ndarray):
        binary_dilation(seed, structure, -1, mask, output, 1, origin, backend=backend, batch_dims=batch_dims)
        np.logical_not(output, output)
        return None
    filled = binary_dilation(seed, structure, -1, mask, None, 1, origin, backend=backend, batch_dims=batch_dims)
    np.logical_not(filled, filled)
    return filled
