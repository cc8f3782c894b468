"""The Python package's GPU backend: `import gpu_waterz as waterz` with
backend='gpu' against stock waterz (split and merge VOI within 1 % or 0.005
bits of waterz's at every threshold, the issue's fidelity bar; identical
partitions counted), against the CPU reference, and torch CUDA tensors in
and out without copies. Without a GPU these tests skip visibly, unless
GPU_WATERZ_REQUIRE_GPU=1 (the GPU bundle sets it), where they fail."""

import os
import time

import numpy as np
import pytest

from conftest import gpu_backend_error, require_data, run_waterz
from volumes import affinities_from_boundary, cnn_like, quantize, voronoi_labels

gpu_waterz = pytest.importorskip("gpu_waterz")

THRESHOLDS = [0.1, 0.3, 0.5, 0.7, 0.9]


GPU_ERROR = gpu_backend_error()


@pytest.fixture
def gpu():
    if GPU_ERROR is not None:
        if os.environ.get("GPU_WATERZ_REQUIRE_GPU") == "1":
            pytest.fail(f"GPU_WATERZ_REQUIRE_GPU=1 but the GPU backend failed: {GPU_ERROR}")
        pytest.skip(f"SKIPPED GPU test: {GPU_ERROR}")


def test_without_a_gpu_the_gpu_backend_is_a_clear_runtime_error():
    if GPU_ERROR is None:
        pytest.skip("a GPU is present; the GPU tests below run instead")
    assert "CUDA" in GPU_ERROR, GPU_ERROR


def test_auto_takes_the_gpu_when_usable_else_the_cpu():
    """backend='auto' gives the GPU backend's results on a GPU machine and the
    CPU reference's (stock waterz's) without one."""
    rng = np.random.default_rng(5)
    affs = cnn_like(rng, voronoi_labels(rng, (8, 32, 32), 12))
    expected_backend = "cpu" if GPU_ERROR is not None else "gpu"
    auto = [s.copy() for s in gpu_waterz.agglomerate(affs, [0.3, 0.7], backend="auto")]
    want = [s.copy() for s in gpu_waterz.agglomerate(affs, [0.3, 0.7], backend=expected_backend)]
    for a, b in zip(auto, want):
        np.testing.assert_array_equal(a, b)
    # A setting only the CPU runs makes 'auto' take the CPU, even with a GPU.
    maxed = "OneMinus<MaxAffinity<RegionGraphType, ScoreValue>>"
    auto = [s.copy() for s in gpu_waterz.agglomerate(affs, [0.5], scoring_function=maxed, backend="auto")]
    cpu = [s.copy() for s in gpu_waterz.agglomerate(affs, [0.5], scoring_function=maxed, backend="cpu")]
    np.testing.assert_array_equal(auto[0], cpu[0])


def voi_close(ours, theirs, where):
    """The issue's fidelity bar: each VOI within 1 % or 0.005 bits."""
    for key in ("V_Info_split", "V_Info_merge"):
        a, b = ours["metrics"][key], theirs["metrics"][key]
        assert abs(a - b) <= max(0.01 * abs(b), 0.005), (where, key, a, b)


def same_partition(a, b):
    pairs = np.unique(np.stack([a.ravel(), b.ravel()]), axis=1)
    return pairs.shape[1] == len(np.unique(a)) == len(np.unique(b))


def compare_with_waterz(affs, gt, label):
    ours = run_waterz(affs, THRESHOLDS, gt=gt, module=gpu_waterz, backend="gpu")
    theirs = run_waterz(affs, THRESHOLDS, gt=gt)
    identical = 0
    for t, o, w in zip(THRESHOLDS, ours, theirs):
        assert o["seg"].dtype == np.uint64 and o["seg"].shape == w["seg"].shape
        voi_close(o, w, f"{label} at {t}")
        identical += same_partition(o["seg"], w["seg"])
        merges = {(h["a"], h["b"]) for h in o["history"]}
        assert len(merges) == len(o["history"]), "each merge once"
    print(f"{label}: identical partitions at {identical} of {len(THRESHOLDS)} thresholds")
    return ours


@pytest.mark.parametrize("seed", range(4))
def test_gpu_matches_waterz_on_cnn_like_volumes(gpu, seed):
    rng = np.random.default_rng(100 + seed)
    gt = voronoi_labels(rng, (16, 48, 48), 25)
    affs = cnn_like(rng, gt)
    ours = compare_with_waterz(affs, gt, f"cnn-like seed {seed}")
    cpu_exact = run_waterz(affs, THRESHOLDS, gt=gt, module=gpu_waterz, backend="cpu")
    for o, c in zip(ours, cpu_exact):
        voi_close(o, c, "GPU against the CPU reference")


def test_gpu_uint8_and_fragments(gpu):
    rng = np.random.default_rng(7)
    gt = voronoi_labels(rng, (12, 40, 40), 20)
    k, as_float = quantize(cnn_like(rng, gt))
    # Stock waterz takes float32 only: k / 255, the values uint8 stands for.
    ours = run_waterz(k, THRESHOLDS, gt=gt, module=gpu_waterz, backend="gpu")
    theirs = run_waterz(as_float, THRESHOLDS, gt=gt)
    for t, o, w in zip(THRESHOLDS, ours, theirs):
        voi_close(o, w, f"uint8 at {t}")
    affs = as_float
    fragments = (gt.astype(np.uint64) * 3 + 5) * (gt > 0)
    ours = run_waterz(affs, [0.5], gt=gt, fragments=fragments, module=gpu_waterz, backend="gpu")
    theirs = run_waterz(affs, [0.5], gt=gt, fragments=fragments)
    voi_close(ours[0], theirs[0], "user fragments")
    assert set(np.unique(ours[0]["seg"])) <= set(np.unique(fragments)), "regions keep the user's ids"


@pytest.mark.parametrize("name", ["gala-em-train.h5", "snemi-mini.h5"])
def test_gpu_matches_waterz_on_real_volumes(gpu, name):
    h5py = pytest.importorskip("h5py")

    path = require_data(name)
    with h5py.File(path, "r") as f:
        if "boundary_probability" in f:
            affs = affinities_from_boundary(f["boundary_probability"][:].astype(np.float32))
        else:
            from volumes import affinities_from_inside

            affs = affinities_from_inside(f["inside_probability"][:].astype(np.float32))
        gt = f["gt"][:]
    compare_with_waterz(affs, gt.astype(np.uint32), name)


def test_torch_cuda_tensors_in_and_out_without_copies(gpu):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("SKIPPED: torch has no CUDA")
    rng = np.random.default_rng(3)
    gt = voronoi_labels(rng, (16, 64, 64), 30)
    affs = cnn_like(rng, gt)
    expected = [r["seg"] for r in run_waterz(affs, [0.3, 0.5], gt=gt, module=gpu_waterz, backend="gpu")]
    tensor = torch.from_numpy(affs).cuda()
    gt_tensor = torch.from_numpy(gt.astype(np.int64)).cuda()
    before = torch.cuda.memory_allocated()
    results = list(gpu_waterz.agglomerate(tensor, [0.3, 0.5], gt=gt_tensor, backend="gpu"))
    # No torch-side copy of the input (a .contiguous() or .float() would
    # show up in torch's allocator), and the outputs are not torch
    # allocations either: they are the pipeline's own buffers, shared.
    assert torch.cuda.memory_allocated() == before
    for (seg, metrics), want in zip(results, expected):
        assert seg.is_cuda and seg.device == tensor.device and seg.dtype == torch.int64
        assert seg.shape == tuple(affs.shape[1:])
        np.testing.assert_array_equal(seg.cpu().numpy(), want.astype(np.int64))
        assert set(metrics) == {"V_Rand_split", "V_Rand_merge", "V_Info_split", "V_Info_merge"}
    assert results[0][0].data_ptr() != results[1][0].data_ptr()
    # The tensor shares the pipeline's buffer: its address is the volume's.
    run = gpu_waterz._native.agglomerate(
        None, None, (tensor.data_ptr(), "f4", tuple(affs.shape[1:])), "gpu", tensor.device.index or 0, [0.5],
        None, None, 0.0001, 0.9999, "OneMinus<MeanAffinity<RegionGraphType, ScoreValue>>", 0, False, False, 0.0)
    assert run.backend == "gpu"
    volume = run.next_threshold()[1]
    shared = torch.as_tensor(gpu_waterz._Int64View(volume), device=tensor.device)
    assert shared.data_ptr() == volume.__cuda_array_interface__["data"][0]
    # A non-contiguous view is refused, not silently copied.
    with pytest.raises(ValueError, match="C-contiguous"):
        list(gpu_waterz.agglomerate(tensor.transpose(2, 3), [0.5], backend="gpu"))


def test_timing_against_waterz(gpu):
    """Not an assertion: prints both times on the same array (pytest -s)."""
    import waterz

    rng = np.random.default_rng(11)
    gt = voronoi_labels(rng, (64, 256, 256), 200)
    affs = cnn_like(rng, gt)
    list(gpu_waterz.agglomerate(affs[:, :8], [0.5], backend="gpu"))  # warm up the device
    start = time.perf_counter()
    ours = list(gpu_waterz.agglomerate(affs, THRESHOLDS, gt=gt, backend="gpu"))
    t_ours = time.perf_counter() - start
    start = time.perf_counter()
    theirs = list(waterz.agglomerate(affs, THRESHOLDS, gt=gt.astype(np.uint32)))
    t_theirs = time.perf_counter() - start
    print(f"TIMING {affs.shape[1:]} ({gt.size} voxels), thresholds {THRESHOLDS}, with metrics: "
          f"gpu_waterz (GPU) {t_ours:.3f} s, stock waterz {t_theirs:.3f} s, {t_theirs / t_ours:.1f}x")
    for (_, m_ours), (_, m_theirs) in zip(ours, theirs):
        voi_close({"metrics": m_ours}, {"metrics": m_theirs}, "timing volume")


def test_cli_gpu_backend_writes_what_the_python_gpu_backend_returns(gpu, tmp_path):
    import json

    from conftest import run_cli

    rng = np.random.default_rng(21)
    gt = voronoi_labels(rng, (12, 40, 40), 20)
    affs = cnn_like(rng, gt)
    np.save(tmp_path / "affs.npy", affs)
    np.save(tmp_path / "gt.npy", gt.astype(np.uint64))
    out = tmp_path / "out"
    run_cli("segment", "--backend", "gpu", "--affinities", tmp_path / "affs.npy", "--ground-truth",
            tmp_path / "gt.npy", "--thresholds", "0.3,0.6", "--out-dir", out, "--merge-history", "--quiet")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["backend"] == "gpu" and summary["gpu"]["parhac_rounds"] > 0
    assert summary["timings_s"]["stages"]["merging_s"] >= 0
    ours = run_waterz(affs, [0.3, 0.6], gt=gt, module=gpu_waterz, backend="gpu")
    for entry, r in zip(summary["thresholds"], ours):
        np.testing.assert_array_equal(np.load(out / entry["file"]), r["seg"])
        assert abs(entry["metrics"]["voi_split"] - r["metrics"]["V_Info_split"]) < 1e-12
        history = json.loads((out / entry["merge_history_file"]).read_text())
        assert [(h["a"], h["b"], h["score"]) for h in history] == [(h["a"], h["b"], h["score"]) for h in r["history"]]


def test_the_cli_streams_npy_affinities_to_the_gpu_with_the_host_paths_result(gpu, tmp_path):
    import json

    import h5py
    from conftest import run_cli

    rng = np.random.default_rng(22)
    gt = voronoi_labels(rng, (10, 36, 44), 16)
    affs = cnn_like(rng, gt)
    # A fourth channel (unused, as waterz), uint8 as well, and HDF5 (read
    # on the host, then uploaded).
    four = np.concatenate([affs, affs[:1]], axis=0)
    np.save(tmp_path / "affs.npy", four)
    np.save(tmp_path / "affs_u8.npy", np.round(affs * 255).astype(np.uint8))
    with h5py.File(tmp_path / "affs.h5", "w") as f:
        f["affs"] = four
        # Chunked and compressed: decoded in pieces and streamed, like a .npy.
        f.create_dataset("chunked", data=four, chunks=(2, 3, 16, 16), compression="gzip", shuffle=True)
    results = {}
    specs = [("npy", "affs.npy"), ("u8", "affs_u8.npy"), ("h5", "affs.h5:/affs"), ("h5c", "affs.h5:/chunked")]
    for name, spec in specs:
        out = tmp_path / f"out-{name}"
        run_cli("segment", "--backend", "gpu", "--affinities", f"{tmp_path}/{spec}", "--thresholds", "0.3,0.6",
                "--out-dir", out, "--quiet")
        summary = json.loads((out / "summary.json").read_text())
        assert summary["affinities_streamed_to_gpu"] == (name != "h5"), name
        assert summary["timings_s"]["finish"] >= 0
        results[name] = [np.load(out / e["file"]) for e in summary["thresholds"]]
    for a, b, c in zip(results["npy"], results["h5"], results["h5c"]):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    u8 = run_waterz(np.round(affs * 255).astype(np.uint8), [0.3, 0.6], module=gpu_waterz, backend="gpu")
    for a, r in zip(results["u8"], u8):
        np.testing.assert_array_equal(a, r["seg"])
    # NaN in a streamed file is the host path's error.
    bad = affs.copy()
    bad[2, 3, 4, 5] = np.nan
    np.save(tmp_path / "bad.npy", bad)
    failed = run_cli("segment", "--backend", "gpu", "--affinities", tmp_path / "bad.npy", "--thresholds", "0.3",
                     "--out-dir", tmp_path / "out-bad", "--quiet", check=False)
    assert failed.returncode != 0 and "NaN" in failed.stderr, failed.stderr
    assert not (tmp_path / "out-bad").exists()


def write_plain_zarr_v2(path, array, chunks):
    """A zarr v2 array without compression, written by hand (the format is
    a JSON header and one C-ordered file per chunk), so that the streamed
    zarr path is tested where the zarr package is not installed."""
    import itertools
    import json

    path.mkdir(parents=True)
    (path / ".zarray").write_text(json.dumps({
        "zarr_format": 2, "shape": list(array.shape), "chunks": list(chunks), "dtype": array.dtype.str,
        "compressor": None, "fill_value": 0, "order": "C", "filters": None}))
    grid = [range(-(-n // c)) for n, c in zip(array.shape, chunks)]
    for index in itertools.product(*grid):
        block = np.zeros(chunks, array.dtype)
        part = array[tuple(slice(i * c, (i + 1) * c) for i, c in zip(index, chunks))]
        block[tuple(slice(0, n) for n in part.shape)] = part
        (path / ".".join(map(str, index))).write_bytes(block.tobytes())


def test_the_cli_streams_zarr_affinities_to_the_gpu_with_the_npy_result(gpu, tmp_path):
    import json

    from conftest import run_cli

    rng = np.random.default_rng(22)
    gt = voronoi_labels(rng, (10, 36, 44), 16)
    affs = cnn_like(rng, gt)
    four = np.concatenate([affs, affs[:1]], axis=0)
    u8 = np.round(affs * 255).astype(np.uint8)
    np.save(tmp_path / "affs.npy", four)
    # float32 and uint8, in chunks that do not divide the shape: decoded in
    # pieces and streamed, like a .npy. Written by hand (uncompressed zarr
    # v2), and with the zarr package (v3, v2 with its default compressor)
    # where it is installed.
    write_plain_zarr_v2(tmp_path / "plain.zarr" / "affs", four, (2, 3, 16, 16))
    write_plain_zarr_v2(tmp_path / "plain.zarr" / "u8", u8, (1, 4, 20, 32))
    specs = [("npy", "affs.npy"), ("zarr", "plain.zarr/affs"), ("zarr-u8", "plain.zarr/u8")]
    try:
        import zarr
    except ImportError:
        zarr = None
    # zarr_format= and create_array came with zarr-python 3.
    if zarr is not None and int(zarr.__version__.split(".")[0]) >= 3:
        zarr.open_group(tmp_path / "affs.zarr", mode="w", zarr_format=3).create_array(
            "affs", data=four, chunks=(2, 3, 16, 16))
        zarr.open_group(tmp_path / "affs2.zarr", mode="w", zarr_format=2).create_array(
            "affs", data=u8, chunks=(1, 4, 20, 32))
        specs += [("zarr", "affs.zarr/affs"), ("zarr-u8", "affs2.zarr/affs")]
    results = {}
    for name, spec in specs:
        out = tmp_path / f"out-{len(results)}"
        run_cli("segment", "--backend", "gpu", "--affinities", f"{tmp_path}/{spec}", "--thresholds", "0.3,0.6",
                "--out-dir", out, "--quiet")
        summary = json.loads((out / "summary.json").read_text())
        assert summary["affinities_streamed_to_gpu"], spec
        results.setdefault(name, []).append([np.load(out / e["file"]) for e in summary["thresholds"]])
    expected = run_waterz(u8, [0.3, 0.6], module=gpu_waterz, backend="gpu")
    for segs in results["zarr"]:
        for a, b in zip(results["npy"][0], segs):
            np.testing.assert_array_equal(a, b)
    for segs in results["zarr-u8"]:
        for a, r in zip(segs, expected):
            np.testing.assert_array_equal(a, r["seg"])


def test_cuda_affinities_are_checked_as_numpy_ones_are(gpu):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("SKIPPED: torch has no CUDA")
    affs = np.full((3, 4, 8, 8), 0.5, np.float32)
    affs[1, 2, 3, 4] = np.nan
    for data in (affs, torch.from_numpy(affs).cuda()):
        with pytest.raises(ValueError, match="NaN"):
            list(gpu_waterz.agglomerate(data, [0.5], backend="gpu"))


def test_a_cuda_ground_truth_is_read_in_place_with_the_same_metrics(gpu):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("SKIPPED: torch has no CUDA")
    rng = np.random.default_rng(5)
    gt = voronoi_labels(rng, (16, 64, 64), 30).astype(np.int64)
    affs = cnn_like(rng, gt)
    tensor = torch.from_numpy(affs).cuda()
    for labels in (gt, gt + (1 << 40)):  # fits u32 (narrowed on the device) / does not (downloaded)
        labels[0, 0, :5] = 0
        host = list(gpu_waterz.agglomerate(affs, [0.3, 0.5], gt=labels.astype(np.uint64), backend="gpu"))
        device = list(gpu_waterz.agglomerate(tensor, [0.3, 0.5], gt=torch.from_numpy(labels).cuda(), backend="gpu"))
        for (_, want), (_, got) in zip(host, device):
            assert got == want, "metrics from a CUDA ground truth equal those from a numpy one, bit for bit"
    negative = torch.from_numpy(gt).cuda()
    negative[0, 0, 0] = -3
    with pytest.raises(ValueError, match="negative"):
        list(gpu_waterz.agglomerate(tensor, [0.5], gt=negative, backend="gpu"))
