"""gpu_waterz.blockwise: the blockwise decode, in this process and on a
local Dask cluster of CPU workers with a small memory cap, against the
whole volume decoded at once."""

import os

import numpy as np
import pytest

import gpu_waterz
import gpu_waterz.blockwise as blockwise
from volumes import affinities_from_boundary, membrane_of, smooth, voronoi_labels

zarr = pytest.importorskip("zarr")

THRESHOLDS = [0.1, 0.5, 0.8]


def same_partition(a, b):
    """Whether label arrays a and b cut the volume into the same parts."""
    pairs = np.unique(np.stack([a.ravel(), b.ravel()]), axis=1)
    return pairs.shape[1] == len(np.unique(a)) == len(np.unique(b))


def cell_volume(seed, shape=(24, 40, 36), cells=14):
    rng = np.random.default_rng(seed)
    labels = voronoi_labels(rng, shape, cells)
    boundary = smooth(membrane_of(labels).astype(np.float32), 1)
    boundary = np.clip(boundary + 0.15 * rng.random(shape, dtype=np.float32), 0, 1)
    return np.ascontiguousarray(affinities_from_boundary(boundary))


def plateau_volume(seed, shape=(14, 18, 16), levels=2):
    rng = np.random.default_rng(seed)
    return (rng.integers(0, levels + 1, (3,) + shape) / levels).astype(np.float32)


def whole_volume(affs, thresholds):
    fragments = next(gpu_waterz.agglomerate(affs, [0.0], backend="cpu")).copy()
    segmentations = [s.copy() for s in gpu_waterz.agglomerate(affs, thresholds, backend="cpu")]
    return fragments, segmentations


def read(output):
    group = zarr.open_group(output, mode="r")
    return group["fragments"][...], group["segmentation"][...], dict(group.attrs)


def store(tmp_path, name, affs):
    path = os.fspath(tmp_path / name)
    array = zarr.open_array(path, mode="w", shape=affs.shape, chunks=(3, 8, 8, 8), dtype=affs.dtype)
    array[...] = affs
    return path


@pytest.mark.parametrize("block", [(8, 8, 8), (5, 13, 7), (24, 40, 36), (1, 40, 36)])
def test_blocks_of_any_shape_give_the_whole_volumes_fragments_and_segmentations(tmp_path, block):
    affs = cell_volume(1)
    fragments, segmentations = whole_volume(affs, THRESHOLDS)
    result = blockwise.agglomerate(store(tmp_path, "affs", affs), tmp_path / "out", THRESHOLDS, block)
    got_fragments, got, attrs = read(tmp_path / "out")
    assert np.array_equal(got_fragments, fragments), "waterz's labels"
    assert result.n_fragments == fragments.max()
    assert attrs["thresholds"] == THRESHOLDS
    for k in range(len(THRESHOLDS)):
        assert same_partition(got[k], segmentations[k]), f"threshold {THRESHOLDS[k]}"


@pytest.fixture(scope="module")
def dask_client():
    """Two worker processes of one thread, 400 MB each: the tasks read one
    block each."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="400MB",
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        yield client


@pytest.mark.parametrize("volume, block", [
    ("plateaus", (3, 4, 5)),   # two affinity levels: plateaus everywhere, across many blocks
    ("cells", (6, 7, 9)),      # cells spanning many blocks
    ("single plateau", (2, 3, 2)),  # one plateau over the whole volume
])
def test_volumes_on_a_dask_cluster_equal_the_whole_volume(tmp_path, dask_client, volume, block):
    affs = {"plateaus": lambda: plateau_volume(2),
            "cells": lambda: cell_volume(4, shape=(18, 30, 27), cells=8),
            "single plateau": lambda: np.full((3, 7, 9, 8), 0.5, dtype=np.float32)}[volume]()
    path = store(tmp_path, "affs", affs)
    fragments, segmentations = whole_volume(affs, THRESHOLDS)
    whole = blockwise.agglomerate(path, tmp_path / "whole", THRESHOLDS, affs.shape[1:])
    local = blockwise.agglomerate(path, tmp_path / "local", THRESHOLDS, block)
    remote = blockwise.agglomerate(path, tmp_path / "dask", THRESHOLDS, block, client=dask_client)
    with pytest.raises(ValueError, match="spill"):
        blockwise.agglomerate(path, tmp_path / "spill", THRESHOLDS, block, client=dask_client, spill=True)
    assert whole.open_voxels == 0 and local.open_voxels > 0 and remote.open_voxels == local.open_voxels
    assert remote.n_fragments == local.n_fragments == whole.n_fragments == fragments.max()
    # What travels: the same from this process either way; between workers
    # only on the cluster (a block's later task on another worker).
    assert remote.sent_bytes == local.sent_bytes > 0 and remote.gathered_bytes == local.gathered_bytes
    assert local.moved_bytes == 0 and remote.moved_bytes >= 0
    w_frag, w_seg, _ = read(tmp_path / "whole")
    l_frag, l_seg, _ = read(tmp_path / "local")
    d_frag, d_seg, _ = read(tmp_path / "dask")
    for got in (w_frag, l_frag, d_frag):
        assert np.array_equal(got, fragments)
    # The same integer statistics and merging: the same segment ids.
    assert np.array_equal(l_seg, w_seg) and np.array_equal(d_seg, w_seg)
    if volume == "cells":
        # Without ties, exact arithmetic and waterz's float32 statistics
        # merge alike. (On quantized affinities they order tied edges
        # differently; the Rust tests check those against the whole volume
        # in exact arithmetic.)
        for k in range(len(THRESHOLDS)):
            assert same_partition(w_seg[k], segmentations[k])


def test_uint8_numpy_and_callable_sources(tmp_path):
    affs = (cell_volume(3, shape=(12, 20, 18), cells=6) * 255).astype(np.uint8)
    fragments, segmentations = whole_volume(affs, THRESHOLDS)
    blockwise.agglomerate(affs, tmp_path / "numpy", THRESHOLDS, (6, 7, 8))
    blockwise.agglomerate(lambda lo, hi: affs[:, lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]], tmp_path / "callable",
                          THRESHOLDS, (4, 20, 5), shape=affs.shape, workers=2)
    # The per-block arrays in memory instead of spilled to files.
    blockwise.agglomerate(affs, tmp_path / "memory", THRESHOLDS, (6, 7, 8), spill=False)
    for name in ("numpy", "callable", "memory"):
        got_fragments, got, _ = read(tmp_path / name)
        assert np.array_equal(got_fragments, fragments)
        for k in range(len(THRESHOLDS)):
            assert same_partition(got[k], segmentations[k])
        assert not (tmp_path / name / "blocks").exists(), "the spilled blocks are removed"
    assert np.array_equal(read(tmp_path / "memory")[1], read(tmp_path / "numpy")[1])


def test_bad_inputs_raise_and_leave_no_output(tmp_path):
    affs = plateau_volume(4, shape=(6, 6, 6))
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="block_shape"):
        blockwise.agglomerate(affs, out, THRESHOLDS, (0, 2, 2))
    with pytest.raises(ValueError, match="3, z, y, x"):
        blockwise.agglomerate(affs[0], out, THRESHOLDS, (2, 2, 2))
    with pytest.raises(ValueError, match="ascending"):
        blockwise.agglomerate(affs, out, [0.5, 0.1], (2, 2, 2))
    with pytest.raises(ValueError, match="low < high"):
        blockwise.agglomerate(affs, out, THRESHOLDS, (2, 2, 2), aff_threshold_low=0.9, aff_threshold_high=0.1)
    bad = affs.copy()
    bad[1, 5, 5, 5] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        blockwise.agglomerate(bad, out, THRESHOLDS, (2, 2, 2))
    assert not out.exists() and not any(p.name.startswith("out.partial") for p in tmp_path.iterdir())
    with pytest.raises(ValueError, match="ascending"):
        blockwise.agglomerate(affs, out, [0.5, 0.5000000001], (2, 2, 2))
    assert not out.exists() and not any(p.name.startswith("out.partial") for p in tmp_path.iterdir())
    # A trailing separator names the same folder.
    blockwise.agglomerate(affs, f"{out}{os.sep}", THRESHOLDS, (2, 3, 4))
    assert read(out)[0].shape == affs.shape[1:]
    with pytest.raises(FileExistsError):
        blockwise.agglomerate(affs, out, THRESHOLDS, (2, 3, 4))
    blockwise.agglomerate(affs, out, THRESHOLDS, (6, 6, 6), overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_packed_components_round_trip_and_bad_bytes_are_errors():
    """Step 3's packed components give the labels of the unpacked ones
    back; bytes that are not a block's packed components, a block of
    another shape and affinities of another shape are ValueErrors."""
    from gpu_waterz import _native

    affs = cell_volume(11, shape=(10, 12, 14))
    dims, lo, hi = [10, 12, 14], [0, 0, 0], [10, 12, 14]
    bits, index, mask = _native.blockwise_local_plateaus(affs, dims, lo, hi, 0.0001, 0.9999)
    settled = _native.blockwise_settle(dims, [index], [mask])[0]
    packed, minima, sizes, background, faces, face_bits = _native.blockwise_basins_packed(
        dims, lo, hi, bits, index, mask, settled)
    assert isinstance(packed, bytes) and len(packed) < 4 * 10 * 12 * 14
    n = len(minima)
    identity = np.arange(n + 1, dtype=np.uint64)
    components = _native.blockwise_labels_packed(lo, hi, packed, identity[None])[0]
    assert components.shape == (10, 12, 14) and components.dtype == np.uint64
    assert int(components.max()) == n and int((components == 0).sum()) == background
    assert np.array_equal(np.bincount(components.ravel(), minlength=n + 1)[1:], sizes)
    # Each face's components, as the unpacked array gives them.
    assert np.array_equal(faces[0], components[0].ravel()) and np.array_equal(faces[5], components[:, :, -1].ravel())
    # Several tables from one unpacking, in uint32 too.
    tables = np.stack([identity, 2 * identity]).astype(np.uint32)
    narrow = _native.blockwise_labels_packed(lo, hi, packed, tables)
    assert narrow.shape == (2, 10, 12, 14) and narrow.dtype == np.uint32
    assert np.array_equal(narrow[0], components) and np.array_equal(narrow[1], 2 * components)
    with pytest.raises(ValueError, match="fragment id"):
        _native.blockwise_labels_packed(lo, hi, packed, identity[None, :n])
    with pytest.raises(ValueError):
        _native.blockwise_labels_packed(lo, hi, packed[: len(packed) // 2], identity[None])
    with pytest.raises(ValueError):
        _native.blockwise_labels_packed(lo, hi, b"not a packed block", identity[None])
    with pytest.raises(ValueError):
        _native.blockwise_labels_packed(lo, [10, 12, 13], packed, identity[None])
    with pytest.raises(ValueError, match="reversed"):
        _native.blockwise_labels_packed([0, 0, 15], hi, packed, identity[None])
    ids = np.arange(n + 1, dtype=np.uint64)
    with pytest.raises(ValueError, match="3 channels"):
        _native.blockwise_edges_packed(dims, lo, hi, packed, ids, [None, None, None], affs[:, :5])
    u, v, count, total = _native.blockwise_edges_packed(dims, lo, hi, packed, ids, [None, None, None], affs)
    assert len(u) == len(v) == len(count) == len(total) > 0 and np.all(u < v)


def test_spilled_arrays_read_back_and_load_safely_in_threads(tmp_path):
    """Spilled .npy files read back exactly (both orders, empty, every
    dtype the steps spill), a truncated file is a ValueError, and threads
    loading them while the collector runs finalisers never fail with
    CPython 3.11's "AST constructor recursion depth mismatch" (the .npy
    header parse, python/cpython#106905)."""
    import gc
    import sys
    import threading

    arrays = [np.arange(6 * 7 * 9, dtype=np.uint8).reshape(6, 7, 9), np.zeros((0, 3), np.uint64),
              np.asfortranarray(np.arange(24, dtype=np.int64).reshape(2, 3, 4)),
              np.linspace(0, 1, 10, dtype=np.float32), np.array(7, dtype=np.uint32)]
    paths = []
    for i, a in enumerate(arrays):
        paths.append(str(tmp_path / f"a{i}.npy"))
        np.save(paths[-1], a)
        back = blockwise._load(blockwise._Spilled(paths[-1]))
        assert back.dtype == a.dtype and back.shape == a.shape and np.array_equal(back, a)
    truncated = str(tmp_path / "truncated.npy")
    with open(paths[0], "rb") as f, open(truncated, "wb") as g:
        g.write(f.read()[:-5])
    with pytest.raises(ValueError, match="ends after"):
        blockwise._load(blockwise._Spilled(truncated))

    class Cyclic:
        def __init__(self):
            self.me = self

        def __del__(self):
            sum(range(200))

    errors = []

    def work():
        try:
            for _ in range(400):
                for path in paths:
                    Cyclic()
                    blockwise._load(blockwise._Spilled(path))
        except Exception as e:  # noqa: BLE001 - the test reports whatever a thread raised
            errors.append(e)

    threshold, interval = gc.get_threshold(), sys.getswitchinterval()
    gc.set_threshold(50, 2, 2)
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        gc.set_threshold(*threshold)
        sys.setswitchinterval(interval)
    assert errors == []


def test_label_types(tmp_path):
    affs = cell_volume(6, shape=(12, 20, 18), cells=6)
    blockwise.agglomerate(affs, tmp_path / "auto", THRESHOLDS, (6, 7, 8))
    blockwise.agglomerate(affs, tmp_path / "wide", THRESHOLDS, (6, 7, 8), label_type="uint64")
    blockwise.agglomerate(affs, tmp_path / "narrow", THRESHOLDS, (6, 7, 8), label_type="uint32")
    auto, wide, narrow = (read(tmp_path / name) for name in ("auto", "wide", "narrow"))
    assert auto[0].dtype == auto[1].dtype == narrow[1].dtype == np.uint32
    assert wide[0].dtype == wide[1].dtype == np.uint64
    for k in (0, 1):
        assert np.array_equal(auto[k], wide[k]) and np.array_equal(narrow[k], wide[k])
    with pytest.raises(ValueError, match="label_type"):
        blockwise.agglomerate(affs, tmp_path / "bad", THRESHOLDS, (6, 7, 8), label_type="int32")
    assert not (tmp_path / "bad").exists()
    assert blockwise._label_dtype("auto", 2**32) == np.uint64
    with pytest.raises(ValueError, match="does not fit uint32"):
        blockwise._label_dtype("uint32", 2**32)


def test_a_generated_volume_decodes_blockwise_as_whole(tmp_path):
    source = blockwise.ImplicitCells((20, 40, 36), seed=5, cell=(12, 10, 10))
    whole = source((0, 0, 0), source.dims)
    corner = source((4, 9, 11), (17, 30, 36))
    assert np.array_equal(corner, whole[:, 4:17, 9:30, 11:36]), "a block equals the whole volume's voxels"
    fragments, segmentations = whole_volume(whole, THRESHOLDS)
    result = blockwise.agglomerate(source, tmp_path / "out", THRESHOLDS, (7, 16, 9), workers=2)
    got_fragments, got, _ = read(tmp_path / "out")
    assert result.n_fragments == fragments.max() > 1
    assert np.array_equal(got_fragments, fragments)
    for k in range(len(THRESHOLDS)):
        assert same_partition(got[k], segmentations[k])


def test_npy_hdf5_and_zarr_group_paths(tmp_path):
    h5py = pytest.importorskip("h5py")
    affs = cell_volume(6, shape=(10, 22, 19), cells=5)
    fragments, _ = whole_volume(affs, THRESHOLDS)
    np.save(tmp_path / "affs.npy", affs)
    with h5py.File(tmp_path / "affs.h5", "w") as f:
        f.create_dataset("volumes/affs", data=affs, chunks=(3, 5, 11, 10))
    group = zarr.open_group(os.fspath(tmp_path / "group.zarr"), mode="w")
    group.create_array("affs", shape=affs.shape, chunks=(3, 4, 8, 8), dtype=affs.dtype)[...] = affs
    sources = {"npy": os.fspath(tmp_path / "affs.npy"), "h5": f"{tmp_path / 'affs.h5'}:volumes/affs",
               "zarr": f"{tmp_path / 'group.zarr'}:affs"}
    for name, source in sources.items():
        result = blockwise.agglomerate(source, tmp_path / name, THRESHOLDS, (4, 9, 7), workers=2)
        got_fragments, _, _ = read(tmp_path / name)
        assert result.n_fragments == fragments.max()
        assert np.array_equal(got_fragments, fragments), name
    with pytest.raises(ValueError, match="dataset"):
        blockwise.agglomerate(os.fspath(tmp_path / "affs.h5"), tmp_path / "bad", THRESHOLDS, (4, 9, 7))


@pytest.mark.parametrize("volume", ["cells", "plateaus", "uint8"])
def test_agglomerate_under_a_memory_cap_decodes_in_blocks_as_whole(tmp_path, volume):
    # 30 bytes per voxel of device memory in float32 (21 in uint8): a cap
    # of 30 kB gives blocks of 6 voxels per axis (7 in uint8), and the volumes need more.
    affs = {"cells": lambda: cell_volume(2), "plateaus": lambda: plateau_volume(3, shape=(20, 22, 18)),
            "uint8": lambda: np.round(cell_volume(4) * 255).astype(np.uint8)}[volume]()
    thresholds = [0.5, 0.1, 0.8, 0.5]
    got = []
    for s in gpu_waterz.agglomerate(affs, thresholds, backend="cpu", max_gpu_bytes=30_000):
        # waterz's way: one array, relabelled per threshold.
        assert s.dtype == np.uint64 and s.shape == affs.shape[1:]
        got.append(s.copy())
    distinct = sorted(set(thresholds))
    # The whole volume as one block: its watershed and the exact serial
    # merging of its region graph (what the Rust tests hold the blockwise
    # decode to).
    blockwise.agglomerate(affs, tmp_path / "whole", distinct, affs.shape[1:], backend="cpu")
    _, whole, _ = read(tmp_path / "whole")
    want = [s.copy() for s in gpu_waterz.agglomerate(affs, thresholds, backend="cpu")]
    for k, t in enumerate(sorted(thresholds)):
        assert np.array_equal(got[k], whole[distinct.index(t)]), f"{volume} at {t}"
        if volume == "cells":
            # Without ties, waterz's float32 statistics merge alike.
            assert same_partition(got[k], want[k]), f"{volume} at {t}"
    # A cap the volume fits decodes it whole, as without a cap.
    uncapped = [s.copy() for s in gpu_waterz.agglomerate(affs, thresholds, backend="cpu", max_gpu_bytes=1 << 30)]
    assert all(np.array_equal(a, b) for a, b in zip(uncapped, want))


def test_a_memory_cap_rejects_what_blocks_cannot_do():
    affs = cell_volume(5, shape=(10, 12, 14))
    gt = np.ones(affs.shape[1:], dtype=np.uint64)
    for kwargs, message in [
        (dict(max_gpu_bytes=100), "not even a block"),
        (dict(max_gpu_bytes=-1), "max_gpu_bytes must be"),
        (dict(max_gpu_bytes=True), "max_gpu_bytes must be"),
        (dict(max_gpu_bytes=20_000, gt=gt), "gt"),
        (dict(max_gpu_bytes=20_000, return_merge_history=True), "return_merge_history"),
        (dict(max_gpu_bytes=20_000, epsilon=0.1, backend="gpu"), "epsilon"),
        (dict(max_gpu_bytes=20_000, scoring_function="OneMinus<MaxAffinity<RegionGraphType, ScoreValue>>"),
         "mean affinity"),
    ]:
        with pytest.raises(ValueError, match=message):
            gpu_waterz.agglomerate(affs, [0.5], backend=kwargs.pop("backend", "cpu"), **kwargs)


def test_blockwise_blocks_from_a_memory_cap(tmp_path):
    affs = cell_volume(6, shape=(16, 20, 18))
    # 30 bytes per voxel: a cap of 30 kB gives blocks of 6 per axis (10
    # with the halo, two voxels on each side).
    capped = blockwise.agglomerate(affs, tmp_path / "capped", THRESHOLDS, max_gpu_bytes=30_000)
    given = blockwise.agglomerate(affs, tmp_path / "given", THRESHOLDS, (6, 6, 6))
    assert capped.open_voxels == given.open_voxels > 0
    for a, b in zip(read(tmp_path / "capped")[:2], read(tmp_path / "given")[:2]):
        assert np.array_equal(a, b)
    for kwargs, message in [(dict(), "one of them"), (dict(block_shape=(4, 4, 4), max_gpu_bytes=30_000), "one of them"),
                            (dict(max_gpu_bytes=10), "not even a block"), (dict(max_gpu_bytes=-5), "max_gpu_bytes must")]:
        with pytest.raises(ValueError, match=message):
            blockwise.agglomerate(affs, tmp_path / "bad", THRESHOLDS, **kwargs)
        assert not (tmp_path / "bad").exists()


REQUIRE_GPU = os.environ.get("GPU_WATERZ_REQUIRE_GPU") == "1"


def gpu_usable():
    try:
        next(gpu_waterz.agglomerate(np.zeros((3, 2, 2, 2), np.float32), [0.5], backend="gpu"))
        return True
    except RuntimeError:
        if REQUIRE_GPU:
            raise
        return False


def test_backends_are_named_and_the_cpu_merges_serially(tmp_path):
    affs = plateau_volume(4)
    result = blockwise.agglomerate(affs, tmp_path / "cpu", THRESHOLDS, (5, 6, 7), backend="cpu")
    assert result.merged_on == "cpu"
    with pytest.raises(ValueError, match="backend must be"):
        blockwise.agglomerate(affs, tmp_path / "bad", THRESHOLDS, (5, 6, 7), backend="cuda")
    assert not (tmp_path / "bad").exists()
    if not gpu_usable():
        # Without a GPU, "auto" runs on the CPU, and "gpu" says there is none.
        auto = blockwise.agglomerate(affs, tmp_path / "auto", THRESHOLDS, (5, 6, 7))
        assert auto.merged_on == "cpu"
        for a, b in zip(read(tmp_path / "cpu")[:2], read(tmp_path / "auto")[:2]):
            assert np.array_equal(a, b)
        with pytest.raises(RuntimeError):
            blockwise.agglomerate(affs, tmp_path / "gpu", THRESHOLDS, (5, 6, 7), backend="gpu")
        assert not (tmp_path / "gpu").exists()


@pytest.mark.skipif(not REQUIRE_GPU and not gpu_usable(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("volume", ["cells", "plateaus", "uint8"])
def test_gpu_blocks_equal_the_whole_volume_on_the_gpu(tmp_path, volume):
    # uint8 blocks go to the GPU as codes (k / 255), the whole volume too.
    affs = {"cells": lambda: cell_volume(7), "plateaus": lambda: plateau_volume(5, shape=(20, 22, 18)),
            "uint8": lambda: np.round(cell_volume(8) * 255).astype(np.uint8)}[volume]()
    result = blockwise.agglomerate(affs, tmp_path / "gpu", THRESHOLDS, (6, 7, 5), backend="gpu")
    assert result.merged_on == "gpu" and result.open_voxels > 0
    fragments, segmentations, _ = read(tmp_path / "gpu")
    want_fragments = next(gpu_waterz.agglomerate(affs, [0.0], backend="gpu")).copy()
    assert same_partition(fragments, want_fragments)
    want = [s.copy() for s in gpu_waterz.agglomerate(affs, THRESHOLDS, backend="gpu")]
    for k, t in enumerate(THRESHOLDS):
        assert np.array_equal(segmentations[k], want[k]), f"{volume} at {t}"


@pytest.mark.skipif(not REQUIRE_GPU and not gpu_usable(), reason="needs an NVIDIA GPU")
def test_a_generated_volume_made_on_the_gpu_decodes_as_on_the_host(tmp_path):
    # With the GPU backend the tasks make each block of the generated field
    # on the device (steps 1 and 5); the result must equal the host-made run.
    source = blockwise.ImplicitCells((20, 40, 36), seed=5, cell=(12, 10, 10))
    gpu = blockwise.agglomerate(source, tmp_path / "gpu", THRESHOLDS, (7, 16, 9), backend="gpu")
    cpu = blockwise.agglomerate(source, tmp_path / "cpu", THRESHOLDS, (7, 16, 9), backend="cpu")
    assert gpu.merged_on == "gpu" and gpu.n_fragments == cpu.n_fragments > 1
    got_fragments, got, _ = read(tmp_path / "gpu")
    want_fragments, want, _ = read(tmp_path / "cpu")
    assert np.array_equal(got_fragments, want_fragments)
    for k in range(len(THRESHOLDS)):
        assert same_partition(got[k], want[k])
