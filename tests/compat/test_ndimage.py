"""gpu_waterz.ndimage's grey-scale and binary morphology against
scipy.ndimage: the same arrays for random inputs of rank 1 to 4 and random
keyword combinations (size, footprint, structure, mode, cval, origin,
output) in float64, float32, uint8 and int16, and the same errors for bad
arguments; on the CPU and on the GPU (numpy, torch CUDA, cupy; skipped
visibly without one), batched with ``batch_dims``.
Integer inputs with a structure stay where the results fit the type:
outside it scipy's result is a C cast of an out-of-range double, undefined."""

import numpy as np
import pytest

gpu_waterz = pytest.importorskip("gpu_waterz")
from gpu_waterz import ndimage as ours  # noqa: E402

ndi = pytest.importorskip("scipy.ndimage")

OPERATORS = ["grey_erosion", "grey_dilation", "grey_opening", "grey_closing", "morphological_gradient",
             "morphological_laplace", "white_tophat", "black_tophat"]
MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]


def _gpu_error():
    """Why the GPU path cannot run here, or None."""
    try:
        ours.grey_erosion(np.zeros(4, np.float32), size=3, backend="gpu")
    except RuntimeError as e:
        return str(e)
    return None


GPU_ERROR = _gpu_error()


def _backend(backend):
    if backend == "gpu" and GPU_ERROR is not None:
        pytest.skip(f"SKIPPED GPU test: {GPU_ERROR}")
    return backend


def random_case(rng, dtype):
    rank = int(rng.integers(1, 5))
    shape = tuple(int(rng.integers(1, 9 if rank < 4 else 5)) for _ in range(rank))
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        array = rng.integers(max(info.min, -100), min(info.max, 100) + 1, size=shape).astype(dtype)
    else:
        array = rng.normal(size=shape).astype(dtype)
    kind = rng.integers(0, 3)
    element_shape = tuple(int(rng.integers(1, 5)) for _ in range(rank))
    kwargs = {"mode": MODES[int(rng.integers(0, 5))], "cval": float(rng.normal()) if rng.random() < 0.5 else 0.0}
    if kind == 0:
        if rng.random() < 0.7:
            kwargs["size"] = element_shape
        else:
            kwargs["size"] = element_shape[0]
            element_shape = (element_shape[0],) * rank
    elif kind == 1:
        footprint = rng.random(element_shape) < 0.6
        footprint.flat[int(rng.integers(0, footprint.size))] = True
        kwargs["footprint"] = footprint
    else:
        kwargs["structure"] = rng.integers(-2, 3, size=element_shape).astype(float)
        if rng.random() < 0.5:
            footprint = rng.random(element_shape) < 0.6
            footprint.flat[0] = True
            kwargs["footprint"] = footprint
    if rng.random() < 0.5:
        kwargs["origin"] = [int(rng.integers(-(n // 2), (n - 1) - n // 2 + 1)) for n in element_shape]
    return array, kwargs


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_boolean_inputs_take_a_cval_as_scipys_cast(backend):
    """A bool array's grey-scale operators in constant mode with a cval
    that scipy's C cast sends toward zero (0.5 and -0.5 are false, numpy's
    cast makes them true): scipy's values, with a size and with a
    footprint with holes, for the filters and their compositions."""
    backend = _backend(backend)
    rng = np.random.default_rng(17)
    array = rng.random((6, 7)) < 0.6
    holes = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0]], bool)
    operators = ["grey_erosion", "grey_dilation", "grey_opening", "grey_closing", "white_tophat", "black_tophat"]
    for cval in (0.5, -0.5, 0.99, -0.99, 0.0, 1.0, 1.5, 255.5):
        for element in ({"size": 3}, {"footprint": holes}):
            for operator in operators:
                want = getattr(ndi, operator)(array, mode="constant", cval=cval, **element)
                got = getattr(ours, operator)(array, mode="constant", cval=cval, backend=backend, **element)
                np.testing.assert_array_equal(got, want, err_msg=f"{operator} cval {cval} {element}")


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.uint8, np.int16])
@pytest.mark.parametrize("operator", OPERATORS)
def test_random_cases_equal_scipy(operator, dtype, backend):
    backend = _backend(backend)
    # A fixed seed per case (str hashes change from run to run).
    rng = np.random.default_rng(list((operator + np.dtype(dtype).name).encode()))
    for case in range(60):
        array, kwargs = random_case(rng, dtype)
        if np.issubdtype(dtype, np.integer) and "structure" in kwargs:
            # Integer results outside the type's range are undefined in
            # scipy (a C cast of an out-of-range double): stay inside it.
            array = np.clip(array, 10, 100).astype(dtype)
            kwargs["cval"] = float(rng.integers(10, 50))
        want = getattr(ndi, operator)(array, **kwargs)
        got = getattr(ours, operator)(array, backend=backend, **kwargs)
        assert got.dtype == want.dtype, (operator, kwargs)
        if backend == "gpu":
            # Equal exactly: flat elements compare values, weights apply
            # in float64 and round once (scipy rounds each, monotonically).
            np.testing.assert_array_equal(got, want, err_msg=f"{operator} case {case} {array.shape} {kwargs}")
        elif np.issubdtype(dtype, np.floating):
            np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-12, atol=1e-6,
                                       err_msg=f"{operator} case {case} {array.shape} {kwargs}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{operator} case {case} {array.shape} {kwargs}")


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nan_never_wins_a_window(dtype, backend):
    """Erosion and dilation of arrays holding NaN, as the module's
    docstring says: a NaN never wins a minimum or maximum, so each window
    gives the least (greatest) of its other values and a window of NaN
    alone +inf (-inf), which is scipy's result on the array with its NaN
    replaced so; scipy's own values equal it wherever the window holds no
    NaN (where it does, scipy's depend on the order in which it
    compares)."""
    backend = _backend(backend)
    rng = np.random.default_rng(23)
    for case in range(40):
        array, kwargs = random_case(rng, dtype)
        kwargs.pop("structure", None)
        if "footprint" not in kwargs and "size" not in kwargs:
            kwargs["size"] = 3
        array[rng.random(array.shape) < 0.08] = np.nan
        if case % 8 == 0:
            array[:] = np.nan
        nan = np.isnan(array)
        for operator, never in (("grey_erosion", np.inf), ("grey_dilation", -np.inf)):
            got = getattr(ours, operator)(array, backend=backend, **kwargs)
            want = getattr(ndi, operator)(np.where(nan, never, array).astype(dtype), **kwargs)
            context = f"{operator} case {case} {array.shape} {kwargs}"
            np.testing.assert_array_equal(got, want, err_msg=context)
            # The windows without NaN, from the same operator on the NaN
            # mask (outside, in constant mode, a cval that is no NaN):
            # scipy's values there.
            if operator == "grey_erosion":
                clear = ndi.grey_erosion((~nan).astype(np.uint8), **dict(kwargs, cval=1.0)) == 1
            else:
                clear = ndi.grey_dilation(nan.astype(np.uint8), **dict(kwargs, cval=0.0)) == 0
            scipy_values = getattr(ndi, operator)(array, **kwargs)
            np.testing.assert_array_equal(got[clear], scipy_values[clear], err_msg=context)


def test_output_argument_and_bad_arguments():
    rng = np.random.default_rng(7)
    a = rng.normal(size=(6, 7))
    out = np.empty_like(a)
    assert ours.grey_erosion(a, size=3, output=out) is out
    np.testing.assert_array_equal(out, ndi.grey_erosion(a, size=3))
    assert ours.grey_dilation(a, size=3, output=np.float32).dtype == np.float32
    with pytest.raises(RuntimeError):
        ours.grey_erosion(a)
    with pytest.raises(RuntimeError):
        ours.grey_erosion(a, size=3, mode="bogus")
    with pytest.raises(RuntimeError):
        ours.grey_erosion(a, footprint=np.ones((3,), bool))
    with pytest.raises(ValueError):
        ours.grey_erosion(a, size=3, origin=5)
    with pytest.raises(TypeError):
        ours.grey_erosion(a.astype(complex), size=3)


BINARY = ["binary_erosion", "binary_dilation", "binary_opening", "binary_closing"]


def _centre_is_set(structure, origin):
    """scipy's `_center_is_true`: the element at the structure's centre,
    moved by the origin."""
    origin = [0] * structure.ndim if origin is None else list(np.broadcast_to(origin, (structure.ndim,)))
    centre = tuple(n // 2 + o for n, o in zip(structure.shape, origin))
    return bool(structure[centre])


def test_cycling_until_stable_is_an_error():
    # The neighbours but not the centre: [1, 0, 0] -> [0, 1, 0] -> [1, 0, 1]
    # -> [0, 1, 0] -> ... for ever.
    structure = np.array([True, False, True])
    array = np.array([True, False, False])
    np.testing.assert_array_equal(ours.binary_dilation(array, structure=structure, iterations=3),
                                  ndi.binary_dilation(array, structure=structure, iterations=3))
    with pytest.raises(ValueError, match="cycles"):
        ours.binary_dilation(array, structure=structure, iterations=0)


def _scipy_binary(operator, array, kwargs):
    """scipy's result; masked runs of several iterations as single
    iterations repeated (their definition), since scipy 1.17's own path for
    them corrupts its heap now and then."""
    if "mask" not in kwargs or kwargs["iterations"] == 1:
        return getattr(ndi, operator)(array, **kwargs)
    rest = dict(kwargs)
    iterations = rest.pop("iterations")

    def repeat(name, x):
        count = 0
        while True:
            y = getattr(ndi, name)(x, iterations=1, **rest)
            count += 1
            if (iterations >= 1 and count >= iterations) or (iterations < 1 and np.array_equal(x, y)):
                return y
            x = y

    if operator == "binary_opening":
        return repeat("binary_dilation", repeat("binary_erosion", array))
    if operator == "binary_closing":
        return repeat("binary_erosion", repeat("binary_dilation", array))
    return repeat(operator, array)


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
@pytest.mark.parametrize("operator", BINARY)
def test_binary_operators_equal_scipy(operator, backend):
    backend = _backend(backend)
    # A fixed seed per operator (str hashes change from run to run).
    rng = np.random.default_rng(list(operator.encode()))
    for case in range(80):
        rank = int(rng.integers(1, 4))
        shape = tuple(int(rng.integers(1, 10)) for _ in range(rank))
        array = rng.random(shape) < rng.uniform(0.2, 0.8)
        kwargs = {}
        if rng.random() < 0.6:
            element = tuple(int(rng.integers(1, 4)) for _ in range(rank))
            structure = rng.random(element) < 0.6
            structure.flat[int(rng.integers(0, structure.size))] = True
            kwargs["structure"] = structure
            if rng.random() < 0.5:
                kwargs["origin"] = [int(rng.integers(-(n // 2), (n - 1) - n // 2 + 1)) for n in element]
        kwargs["iterations"] = int(rng.choice([1, 2, 3, 0]))
        centred = "structure" not in kwargs or _centre_is_set(kwargs["structure"], kwargs.get("origin"))
        if kwargs["iterations"] < 1 and not centred:
            # Until stable, a structure whose centre is not set may cycle
            # forever: scipy never returns; ours raises (tested below).
            kwargs["iterations"] = 2
        if rng.random() < 0.4:
            kwargs["border_value"] = 1
        if rng.random() < 0.3:
            kwargs["mask"] = rng.random(shape) < 0.7
        want = _scipy_binary(operator, array, kwargs)
        got = getattr(ours, operator)(array, backend=backend, **kwargs)
        np.testing.assert_array_equal(got, want, err_msg=f"{operator} case {case} {shape} {kwargs}")


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_batches_equal_each_item(backend):
    backend = _backend(backend)
    rng = np.random.default_rng(11)
    volumes = rng.normal(size=(3, 2, 9, 7, 5)).astype(np.float32)
    footprint = rng.random((3, 2, 3)) < 0.6
    footprint[0, 0, 0] = True
    for operator, kwargs in [("grey_erosion", {"size": 3}), ("grey_opening", {"size": (2, 3, 1), "mode": "wrap"}),
                             ("grey_dilation", {"footprint": footprint, "mode": "constant", "cval": 0.5}),
                             ("morphological_laplace", {"size": 2, "mode": "mirror"})]:
        got = getattr(ours, operator)(volumes, batch_dims=2, backend=backend, **kwargs)
        want = np.stack([[getattr(ndi, operator)(v, **kwargs) for v in row] for row in volumes])
        np.testing.assert_array_equal(got, want, err_msg=operator)
    masks = rng.random((4, 10, 11)) < 0.55
    got = ours.binary_closing(masks, iterations=2, batch_dims=1, backend=backend)
    np.testing.assert_array_equal(got, np.stack([ndi.binary_closing(m, iterations=2) for m in masks]))
    got = ours.binary_fill_holes(masks, batch_dims=1, backend=backend)
    np.testing.assert_array_equal(got, np.stack([ndi.binary_fill_holes(m) for m in masks]))
    with pytest.raises(ValueError, match="batch_dims"):
        ours.grey_erosion(volumes, size=3, batch_dims=5, backend=backend)
    with pytest.raises(ValueError, match="spatial rank"):
        ours.grey_erosion(np.zeros((1,) * 9), size=1)


@pytest.mark.parametrize("library", ["torch", "cupy"])
def test_cuda_arrays_stay_on_their_device(library):
    _backend("gpu")
    if library == "torch":
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("SKIPPED: torch has no CUDA")

        def to_device(a):
            return torch.as_tensor(a, device="cuda")

        def to_host(t):
            assert t.is_cuda
            return t.cpu().numpy()
    else:
        cp = pytest.importorskip("cupy")

        def to_device(a):
            return cp.asarray(a)

        def to_host(t):
            assert isinstance(t, cp.ndarray)
            return cp.asnumpy(t)
    rng = np.random.default_rng(13)
    for dtype in (np.float32, np.float64, np.uint8, np.int16):
        for operator in OPERATORS:
            for case in range(6):
                array, kwargs = random_case(rng, dtype)
                if np.issubdtype(dtype, np.integer) and "structure" in kwargs:
                    array = np.clip(array, 10, 100).astype(dtype)
                    kwargs["cval"] = float(rng.integers(10, 50))
                got = to_host(getattr(ours, operator)(to_device(array), **kwargs))
                np.testing.assert_array_equal(got, getattr(ndi, operator)(array, **kwargs),
                                              err_msg=f"{library} {operator} {array.shape} {kwargs}")
    for operator in BINARY + ["binary_propagation", "binary_fill_holes"]:
        array = rng.random((12, 9, 8)) < 0.5
        mask = rng.random(array.shape) < 0.7
        kwargs = {"mask": to_device(mask)} if operator == "binary_propagation" else {}
        want_kwargs = {"mask": mask} if operator == "binary_propagation" else {}
        got = to_host(getattr(ours, operator)(to_device(array), **kwargs))
        np.testing.assert_array_equal(got, getattr(ndi, operator)(array, **want_kwargs), err_msg=operator)
    # One-byte inputs and masks are read in place: any non-zero byte is true.
    values = rng.integers(-3, 4, size=(10, 11, 12)).astype(np.int8)
    mask_bytes = (rng.integers(0, 3, size=values.shape) * 100).astype(np.uint8)
    for dtype in (np.int8, np.uint8, np.int32):
        array = values.astype(dtype)
        got = to_host(ours.binary_dilation(to_device(array), iterations=2, mask=to_device(mask_bytes)))
        assert got.dtype == bool
        want = ndi.binary_dilation(array, iterations=2, mask=mask_bytes)
        np.testing.assert_array_equal(got, want, err_msg=f"{library} one-byte input {dtype}")
        np.testing.assert_array_equal(to_host(ours.binary_erosion(to_device(array))), ndi.binary_erosion(array))
    # CUDA outputs: filled and returned, whether written in place (same
    # dtype, contiguous, apart from the input), cast into (another dtype),
    # or the input itself (as scipy's: its composites read the input after
    # the output is written).
    array = rng.random((9, 70, 40)).astype(np.float32)
    for operator in ("grey_erosion", "grey_opening", "white_tophat", "morphological_laplace"):
        for out_dtype in (np.float32, np.float64):
            # scipy's composites take their differences in the output's
            # type: the reference writes an output of that type too.
            want = np.full(array.shape, -1, out_dtype)
            getattr(ndi, operator)(array, size=(3, 5, 7), output=want)
            out = to_device(np.full(array.shape, -1, out_dtype))
            assert getattr(ours, operator)(to_device(array), size=(3, 5, 7), output=out) is out
            np.testing.assert_array_equal(to_host(out), want, err_msg=f"{library} {operator} {np.dtype(out_dtype)}")
        same, want_same = to_device(array), array.copy()
        getattr(ndi, operator)(want_same, size=(3, 5, 7), output=want_same)
        assert getattr(ours, operator)(same, size=(3, 5, 7), output=same) is same
        np.testing.assert_array_equal(to_host(same), want_same, err_msg=f"{library} {operator} in place")
    mask = rng.random((12, 9, 8)) < 0.7
    array = rng.random(mask.shape) < 0.5
    for operator in BINARY:
        kwargs = {"iterations": 2} if operator in ("binary_erosion", "binary_dilation") else {}
        want = getattr(ndi, operator)(array, **kwargs)
        out = to_device(np.zeros(array.shape, bool))
        assert getattr(ours, operator)(to_device(array), output=out, **kwargs) is out
        np.testing.assert_array_equal(to_host(out), want, err_msg=f"{library} {operator} output=")
        if operator == "binary_dilation":
            want = ndi.binary_dilation(array, mask=mask, **kwargs)
            assert ours.binary_dilation(to_device(array), mask=to_device(mask), output=out, **kwargs) is out
            np.testing.assert_array_equal(to_host(out), want, err_msg=f"{library} {operator} mask, output=")
    # Until stable with a ring runs on the host and comes back to the device.
    ring = np.array([True, False, True])
    with pytest.raises(ValueError, match="cycles"):
        ours.binary_dilation(to_device(np.array([True, False, False])), structure=ring, iterations=0)


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.uint32, np.uint64])
def test_the_cli_equals_scipy(tmp_path, dtype):
    """`gpu-waterz ndimage` on a file: every grey-scale operator equals
    scipy, composites stepped in the input's type (unsigned types wrap), on
    the CPU and (when one is usable) the GPU (float32 kernels for float32
    and uint8, float64 for uint32 and uint64)."""
    from conftest import BIN, run_cli

    if not BIN.exists():
        pytest.skip(f"SKIPPED: the CLI is not built at {BIN}")
    rng = np.random.default_rng(17)
    volume = (rng.random((9, 12, 14)) * 200).astype(dtype)
    source = tmp_path / "v.npy"
    np.save(source, volume)
    backends = ["cpu"] + ([] if GPU_ERROR is not None else ["gpu"])
    for op in OPERATORS:
        want = getattr(ndi, op)(volume, size=(3, 2, 4), mode="wrap")
        for backend in backends:
            out = tmp_path / f"{op}_{backend}.npy"
            run_cli("ndimage", "--op", op.replace("_", "-"), "--input", source, "--out", out, "--size", "3,2,4",
                    "--mode", "wrap", "--backend", backend)
            got = np.load(out)
            assert got.dtype == want.dtype, (op, backend)
            np.testing.assert_array_equal(got, want, err_msg=f"{op} on the {backend}")


def test_the_cli_takes_only_a_cval_of_an_integer_inputs_type(tmp_path):
    """`--mode constant` on an integer volume: a cval of its type equals
    scipy on every backend; another (scipy casts it as C, undefined outside
    the range) is refused with one error line and no output."""
    from conftest import BIN, run_cli

    if not BIN.exists():
        pytest.skip(f"SKIPPED: the CLI is not built at {BIN}")
    volume = (np.random.default_rng(5).random((7, 9, 8)) * 200).astype(np.uint8)
    source = tmp_path / "v.npy"
    np.save(source, volume)
    backends = ["cpu"] + ([] if GPU_ERROR is not None else ["gpu"])
    for backend in backends:
        for op in OPERATORS:
            out = tmp_path / f"{op}_{backend}.npy"
            run_cli("ndimage", "--op", op.replace("_", "-"), "--input", source, "--out", out, "--mode", "constant",
                    "--cval", "37", "--backend", backend)
            want = getattr(ndi, op)(volume, size=3, mode="constant", cval=37)
            np.testing.assert_array_equal(np.load(out), want, err_msg=f"{op} on the {backend}")
        for cval in ["-1", "256", "2.5"]:
            out = tmp_path / f"bad_{backend}.npy"
            proc = run_cli("ndimage", "--op", "grey-erosion", "--input", source, "--out", out, "--mode", "constant",
                           "--cval", cval, "--backend", backend, check=False)
            assert proc.returncode == 1 and "--cval" in proc.stderr and not out.exists(), (cval, proc.stderr)


def test_the_cli_binary_operators_equal_scipy(tmp_path):
    """`gpu-waterz ndimage --op binary-…`: scipy's results (as uint8),
    with connectivity, iterations (also until stable) and border values,
    on the CPU and (when one is usable) the GPU."""
    from conftest import BIN, run_cli

    if not BIN.exists():
        pytest.skip(f"SKIPPED: the CLI is not built at {BIN}")
    rng = np.random.default_rng(19)
    volume = (rng.random((10, 13, 40)) < 0.6).astype(np.uint8)
    source = tmp_path / "m.npy"
    np.save(source, volume)
    backends = ["cpu"] + ([] if GPU_ERROR is not None else ["gpu"])
    cases = [("binary_erosion", 1, 1, 0), ("binary_dilation", 2, 2, 1), ("binary_opening", 3, 1, 0),
             ("binary_closing", 1, 2, 1), ("binary_erosion", 1, 0, 0), ("binary_dilation", 3, -1, 0),
             ("binary_fill_holes", 1, 1, 0), ("binary_fill_holes", 3, 1, 0)]
    for op, connectivity, iterations, border in cases:
        structure = ndi.generate_binary_structure(3, connectivity)
        if op == "binary_fill_holes":
            want = ndi.binary_fill_holes(volume, structure=structure)
        else:
            want = getattr(ndi, op)(volume, structure=structure, iterations=iterations, border_value=border)
        for backend in backends:
            out = tmp_path / f"{op}_{connectivity}_{iterations}_{backend}.npy"
            run_cli("ndimage", "--op", op.replace("_", "-"), "--input", source, "--out", out, "--connectivity",
                    connectivity, "--iterations", iterations, "--border-value", border, "--backend", backend)
            got = np.load(out)
            assert got.dtype == np.uint8
            np.testing.assert_array_equal(got.astype(bool), want, err_msg=f"{op} {connectivity} {iterations} on the "
                                                                             f"{backend}")


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_outputs_of_another_dtype_compose_as_scipy(backend):
    """scipy writes the last step into `output` and combines in its dtype
    (on the GPU, float input with an output of its own dtype takes the
    one-upload path, of another dtype the step-by-step one)."""
    backend = _backend(backend)
    small = np.array([0, 10, 0], np.uint8)
    floats = np.array([0.5, 10.25, -3.0, 7.0, 1e-8], np.float32)
    for a, out_dtype in [(small, np.int16), (floats, np.float64), (floats, np.float32)]:
        for op in OPERATORS:
            want_out = np.empty(a.shape, out_dtype)
            got_out = np.empty(a.shape, out_dtype)
            want = getattr(ndi, op)(a, size=3, output=want_out)
            got = getattr(ours, op)(a, size=3, output=got_out, backend=backend)
            np.testing.assert_array_equal(got_out, want_out, err_msg=f"{op} {a.dtype} into {out_dtype}")
            np.testing.assert_array_equal(got, want, err_msg=f"{op} {a.dtype} into {out_dtype}")
            # A dtype as output.
            got = getattr(ours, op)(a, size=3, output=out_dtype, backend=backend)
            want = getattr(ndi, op)(a, size=3, output=out_dtype)
            assert got.dtype == want.dtype, (op, out_dtype)
            np.testing.assert_array_equal(got, want, err_msg=f"{op} {a.dtype} as {out_dtype}")


def test_empty_large_and_complex_inputs():
    for op in OPERATORS:
        got = getattr(ours, op)(np.zeros((0, 4), np.float32), size=3)
        assert got.shape == (0, 4) and got.dtype == np.float32
    assert ours.binary_erosion(np.zeros((3, 0), bool)).shape == (3, 0)
    with pytest.raises(ValueError, match="beyond 2"):
        ours.grey_erosion(np.array([2 ** 60, 1], np.int64), size=2)
    np.testing.assert_array_equal(ours.grey_erosion(np.array([2 ** 52, 1, 5], np.int64), size=2),
                                  ndi.grey_erosion(np.array([2 ** 52, 1, 5], np.int64), size=2))
    with pytest.raises(TypeError):
        ours.grey_erosion(np.ones(4, np.complex64), size=2)
    with pytest.raises(ValueError, match="device"):
        ours.grey_erosion(np.ones(4), size=2, output=_FakeDevice())


class _FakeDevice:
    """Stands for a CUDA array given as the output of a host input."""
    __module__ = "cupy"
    shape = (4,)


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_fill_holes_by_components_and_by_dilation(backend):
    """binary_fill_holes equals scipy's on dense masks (many holes) of rank 1
    to 4: scipy's default structure runs by components on the GPU (rank 1 to
    3), other structures, origins and rank 4 by the dilation from the border;
    a given output is filled and None returned."""
    backend = _backend(backend)
    rng = np.random.default_rng(23)
    for shape in [(300,), (41, 57), (23, 35, 70), (6, 7, 8, 9)]:
        for density in (0.5, 0.72):
            mask = rng.random(shape) < density
            rank = len(shape)
            cases = [{}, {"structure": ndi.generate_binary_structure(rank, rank)}]
            if rank > 1:
                cases.append({"origin": 1 if rank == 2 else 0, "structure": ndi.generate_binary_structure(rank, 1)})
            for kwargs in cases:
                # A moved cross does not hold its centre: the dilation until
                # stable runs on the CPU then ('gpu' refuses it).
                run = "auto" if "origin" in kwargs and backend == "gpu" else backend
                want = ndi.binary_fill_holes(mask, **kwargs)
                got = ours.binary_fill_holes(mask.astype(np.uint8) * 3, backend=run, **kwargs)
                np.testing.assert_array_equal(got, want, err_msg=f"{shape} {density} {kwargs}")
                out = np.zeros(shape, bool)
                assert ours.binary_fill_holes(mask, output=out, backend=run, **kwargs) is None
                np.testing.assert_array_equal(out, want, err_msg=f"{shape} {density} {kwargs} (output)")
