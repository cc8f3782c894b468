"""The same volume as .npy, HDF5 (`file.h5:/dataset`) and zarr v2/v3
(`dir.zarr/array`) gives the same segmentations and metrics."""

import json

import numpy as np
import pytest

from conftest import run_cli
from volumes import cnn_like, voronoi_labels

zarr = pytest.importorskip("zarr")


def segment(tmp_path, name, affs, gt=None):
    """Segmentations (and metrics, with a ground truth) of `gpu-waterz
    segment --backend cpu` into the folder `name`."""
    out = tmp_path / name
    extra = [] if gt is None else ["--ground-truth", gt]
    run_cli("segment", "--affinities", affs, *extra, "--thresholds", "0.3,0.5", "--out-dir", out, "--backend", "cpu")
    summary = json.loads((out / "summary.json").read_text())
    segs = [np.load(out / t["file"]) for t in summary["thresholds"]]
    if gt is None:
        return segs
    return segs, [t["metrics"] for t in summary["thresholds"]]


def test_npy_hdf5_and_zarr_agree(tmp_path):
    import h5py

    rng = np.random.default_rng(5)
    gt = voronoi_labels(rng, (8, 32, 32), 10)
    affs = cnn_like(rng, gt)
    np.save(tmp_path / "affs.npy", affs)
    np.save(tmp_path / "gt.npy", gt)
    with h5py.File(tmp_path / "data.h5", "w") as f:
        f.create_dataset("volumes/affs", data=affs, chunks=(3, 4, 16, 16), compression="gzip")
        f.create_dataset("volumes/gt", data=gt.astype(np.uint64))
    for fmt in (2, 3):
        root = zarr.open_group(tmp_path / f"v{fmt}.zarr", mode="w", zarr_format=fmt)
        root.create_array("volumes/affs", data=affs, chunks=(3, 4, 16, 16))
        root.create_array("volumes/gt", data=gt, chunks=(4, 16, 16))
    expected = segment(tmp_path, "npy", tmp_path / "affs.npy", tmp_path / "gt.npy")
    sources = {
        "h5": (f"{tmp_path}/data.h5:/volumes/affs", f"{tmp_path}/data.h5:/volumes/gt"),
        "zarr2": (f"{tmp_path}/v2.zarr/volumes/affs", f"{tmp_path}/v2.zarr/volumes/gt"),
        "zarr3": (f"{tmp_path}/v3.zarr/volumes/affs", f"{tmp_path}/v3.zarr/volumes/gt"),
    }
    for name, (affs_src, gt_src) in sources.items():
        segs, metrics = segment(tmp_path, name, affs_src, gt_src)
        for a, b in zip(segs, expected[0]):
            np.testing.assert_array_equal(a, b, err_msg=name)
        assert metrics == expected[1], name


def test_missing_zarr_array_is_a_clear_error(tmp_path):
    zarr.open_group(tmp_path / "empty.zarr", mode="w", zarr_format=3)
    proc = run_cli("segment", "--affinities", f"{tmp_path}/empty.zarr/nothing", "--thresholds", "0.5",
                   "--out-dir", tmp_path / "out", check=False)
    assert proc.returncode != 0 and "no array" in proc.stderr and "panicked" not in proc.stderr
    proc = run_cli("segment", "--affinities", f"{tmp_path}/absent.zarr/affs", "--thresholds", "0.5",
                   "--out-dir", tmp_path / "out", check=False)
    assert proc.returncode != 0 and "cannot read" in proc.stderr


def test_corrupt_zarr_chunk_is_named_with_its_codec(tmp_path):
    """A chunk that does not decode is named (indices and file) with the
    codecs that failed, not reported as an unsupported element type."""
    rng = np.random.default_rng(6)
    affs = cnn_like(rng, voronoi_labels(rng, (4, 16, 16), 4))
    for fmt in (2, 3):
        path = tmp_path / f"c{fmt}.zarr"
        root = zarr.open_group(path, mode="w", zarr_format=fmt)
        root.create_array("affs", data=affs, chunks=(3, 2, 16, 16))
        chunk_files = sorted(p for p in (path / "affs").rglob("*") if p.is_file() and not p.name.startswith((".z", "zarr.json")))
        assert chunk_files, "the array has chunk files"
        chunk_files[0].write_bytes(b"not a compressed chunk" * 3)
        proc = run_cli("segment", "--affinities", f"{path}/affs", "--thresholds", "0.5",
                       "--out-dir", tmp_path / f"out{fmt}", check=False)
        assert proc.returncode != 0 and "panicked" not in proc.stderr, proc.stderr
        assert "chunk [" in proc.stderr and "cannot be decoded by the codecs" in proc.stderr, proc.stderr
        assert "unsupported element type" not in proc.stderr, proc.stderr


def test_newest_hdf5_storage_is_read(tmp_path):
    """HDF5 2.0's newest data layout (h5py libver='latest') and the
    version-2 B-tree chunk index (several unlimited dimensions, libver
    'v110' and later) are read, with the same result as the .npy."""
    import h5py

    rng = np.random.default_rng(7)
    gt = voronoi_labels(rng, (4, 16, 16), 4)
    affs = cnn_like(rng, gt)
    np.save(tmp_path / "affs.npy", affs)
    expected = segment(tmp_path, "npy", tmp_path / "affs.npy")
    for libver in ("latest", ("v110", "latest"), ("v112", "latest")):
        name = libver if isinstance(libver, str) else libver[0]
        path = tmp_path / f"{name}.h5"
        with h5py.File(path, "w", libver=libver) as f:
            f.create_dataset("affs", data=affs, chunks=(3, 2, 8, 8), maxshape=(None,) * 4, compression="gzip")
        got = segment(tmp_path, name, f"{path}:/affs")
        for a, b in zip(got, expected):
            np.testing.assert_array_equal(a, b, err_msg=name)


def test_zarr_and_hdf5_outputs_with_funlib_attributes(tmp_path):
    """`--out x.zarr` and `--out x.h5`: one segmentation per threshold, the
    same labels as the .npy folder (uint32 when they fit), the input's
    resolution and offset with axis names and units, the threshold, merge
    histories as arrays, the summary as an attribute; read back by
    zarr-python and h5py. An existing file is replaced only with
    --overwrite."""
    import h5py

    rng = np.random.default_rng(8)
    gt = voronoi_labels(rng, (8, 32, 32), 10)
    affs = cnn_like(rng, gt)
    root = zarr.open_group(tmp_path / "in.zarr", mode="w", zarr_format=3)
    a = root.create_array("affs", data=affs, chunks=(3, 4, 16, 16))
    a.attrs["resolution"] = [40, 4, 4]
    a.attrs["offset"] = [400, 8, 8]
    source = f"{tmp_path}/in.zarr/affs"
    run_cli("segment", "--affinities", source, "--thresholds", "0.3,0.5", "--out-dir", tmp_path / "npy",
            "--merge-history", "--backend", "cpu")
    summary = json.loads((tmp_path / "npy" / "summary.json").read_text())
    expected = [np.load(tmp_path / "npy" / t["file"]) for t in summary["thresholds"]]
    histories = [json.loads((tmp_path / "npy" / t["merge_history_file"]).read_text()) for t in summary["thresholds"]]
    assert all(t["dtype"] == "uint32" and e.dtype == np.uint32 for t, e in zip(summary["thresholds"], expected))

    run_cli("segment", "--affinities", source, "--thresholds", "0.3,0.5", "--out", tmp_path / "out.zarr",
            "--merge-history", "--units", "nm", "--backend", "cpu", "--write-fragments")
    z = zarr.open_group(tmp_path / "out.zarr", mode="r")
    # The fragments: every one lies in a single segment of each threshold.
    fragments = z["fragments"][:]
    assert list(z["fragments"].attrs["resolution"]) == [40, 4, 4]
    for want in expected:
        pairs = np.unique(np.stack([fragments.ravel(), want.ravel()]), axis=1)
        assert len(np.unique(pairs[0])) == pairs.shape[1]
    h5_path = tmp_path / "out.h5"
    run_cli("segment", "--affinities", source, "--thresholds", "0.3,0.5", "--out", h5_path, "--merge-history",
            "--units", "nm", "--resolution", "40,4,4", "--backend", "cpu")
    with h5py.File(h5_path, "r") as f:
        for i, (want, history) in enumerate(zip(expected, histories)):
            for name, arr, attrs in (("zarr", z[f"segmentation_{i}"][:], dict(z[f"segmentation_{i}"].attrs)),
                                     ("hdf5", f[f"segmentation_{i}"][:], dict(f[f"segmentation_{i}"].attrs))):
                np.testing.assert_array_equal(arr, want, err_msg=name)
                assert arr.dtype == np.uint32, name
                assert list(attrs["resolution"]) == [40, 4, 4], (name, attrs)
                assert list(attrs["offset"]) == [400, 8, 8], (name, attrs)
                assert [_text(x) for x in attrs["axis_names"]] == ["z", "y", "x"], (name, attrs)
                assert [_text(x) for x in attrs["units"]] == ["nm"] * 3, (name, attrs)
                assert float(attrs["threshold"]) == [0.3, 0.5][i], (name, attrs)
            for name, triples, scores in (("zarr", z[f"merge_history_{i}"][:], z[f"merge_scores_{i}"][:]),
                                          ("hdf5", f[f"merge_history_{i}"][:], f[f"merge_scores_{i}"][:])):
                assert triples.shape == (len(history), 3), name
                assert [list(map(int, t)) for t in triples] == [[m["a"], m["b"], m["c"]] for m in history], name
                assert list(scores) == [m["score"] for m in history], name
        assert json.loads(f.attrs["gpu_waterz"])["thresholds"][1]["file"] == "segmentation_1"
    assert z.attrs["gpu_waterz"]["thresholds"][0]["file"] == "segmentation_0"
    # zarr v2, for readers that have not moved to v3.
    run_cli("segment", "--affinities", source, "--thresholds", "0.3,0.5", "--out", tmp_path / "v2out.zarr",
            "--zarr-format", "2", "--merge-history", "--backend", "cpu")
    z2 = zarr.open_group(tmp_path / "v2out.zarr", mode="r", zarr_format=2)
    for i, want in enumerate(expected):
        np.testing.assert_array_equal(z2[f"segmentation_{i}"][:], want)
        assert list(z2[f"segmentation_{i}"].attrs["resolution"]) == [40, 4, 4]
        assert z2[f"merge_history_{i}"].shape == (len(histories[i]), 3)
    assert z2.attrs["gpu_waterz"]["thresholds"][1]["threshold"] == 0.5
    proc = run_cli("segment", "--affinities", source, "--thresholds", "0.5", "--out", h5_path, check=False)
    assert proc.returncode != 0 and "--overwrite" in proc.stderr, proc.stderr
    run_cli("segment", "--affinities", source, "--thresholds", "0.5", "--out", h5_path, "--overwrite")
    with h5py.File(h5_path, "r") as f:
        assert sorted(f.keys()) == ["segmentation_0"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.zarr", "npy", "out.h5", "out.zarr", "v2out.zarr"]


def _text(x):
    """An HDF5 fixed-length string attribute element (bytes) or a str."""
    return x.decode() if isinstance(x, bytes) else str(x)


def test_funlib_reads_the_outputs(tmp_path):
    """funlib.persistence (daisy's array layer) opens the zarr outputs, v3
    and v2, with their voxel size, offset, axis names and units."""
    funlib = pytest.importorskip("funlib.persistence")
    rng = np.random.default_rng(9)
    gt = voronoi_labels(rng, (8, 32, 32), 6)
    np.save(tmp_path / "affs.npy", cnn_like(rng, gt))
    for fmt in ("3", "2"):
        out = tmp_path / f"out{fmt}.zarr"
        run_cli("segment", "--affinities", tmp_path / "affs.npy", "--thresholds", "0.3", "--out", out,
                "--zarr-format", fmt, "--resolution", "40,4,4", "--offset", "400,8,8", "--units", "nm",
                "--backend", "cpu")
        ds = funlib.open_ds(str(out / "segmentation_0"))
        assert tuple(ds.voxel_size) == (40, 4, 4), fmt
        assert tuple(ds.offset) == (400, 8, 8), fmt
        assert list(ds.axis_names) == ["z", "y", "x"] and list(ds.units) == ["nm"] * 3, fmt
        assert ds.dtype == np.uint32 and ds.shape == (8, 32, 32), fmt
        np.testing.assert_array_equal(ds.to_ndarray(ds.roi), zarr.open_array(out / "segmentation_0", mode="r")[:])


@pytest.mark.parametrize("label_type", ["auto", "uint64"])
def test_blockwise_chunks_are_read_by_zarr_python(tmp_path, label_type):
    """`gpu-waterz blockwise` writes its chunks as zstd frames made from the
    labels' runs (no general compressor): zarr-python (numcodecs) reads
    them, blocks at the volume's edge included, as the labels of `segment`
    on the same volume."""
    rng = np.random.default_rng(11)
    gt = voronoi_labels(rng, (13, 40, 37), 25)
    affs = cnn_like(rng, gt)
    np.save(tmp_path / "affs.npy", affs)
    expected = segment(tmp_path, "whole", tmp_path / "affs.npy")
    out = tmp_path / "blocks.zarr"
    run_cli("blockwise", "--affinities", tmp_path / "affs.npy", "--block", "5,16,11", "--thresholds", "0.3,0.5",
            "--backend", "cpu", "--label-type", label_type, "--write-fragments", "--out", out)
    group = zarr.open_group(out, mode="r")
    for i, want in enumerate(expected):
        got = group[f"segmentation_{i}"]
        assert got.dtype == (np.uint64 if label_type == "uint64" else np.uint32)
        assert got.chunks == (5, 16, 11)
        np.testing.assert_array_equal(got[:], want)
    assert group["fragments"][:].max() > 1
