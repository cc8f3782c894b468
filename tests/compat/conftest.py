"""Shared helpers of the equivalence suite: stock waterz against gpu-waterz's CPU reference."""

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("GPU_WATERZ_BIN", ROOT / "target" / "release" / "gpu-waterz"))
DATA = Path(os.environ.get("GPU_WATERZ_DATA", ROOT.parent / "shared" / "data"))


def run_cli(*args, check=True):
    proc = subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"gpu-waterz {' '.join(map(str, args))} failed:\n{proc.stderr}")
    return proc


def run_reference(tmp_path, affs, thresholds, gt=None, fragments=None, scoring="mean",
                  history=True, region_graph=False, extra=()):
    """Runs `gpu-waterz segment --backend cpu` and loads what it wrote."""
    affs_path = tmp_path / "affs.npy"
    np.save(affs_path, affs)
    out = tmp_path / "out"
    args = ["segment", "--affinities", affs_path, "--thresholds", ",".join(repr(float(t)) for t in thresholds),
            "--out-dir", out, "--overwrite", "--backend", "cpu", "--scoring", scoring, *extra]
    if history:
        args.append("--merge-history")
    if region_graph:
        args.append("--region-graph")
    if gt is not None:
        np.save(tmp_path / "gt.npy", gt.astype(np.uint32))
        args += ["--ground-truth", tmp_path / "gt.npy"]
    if fragments is not None:
        np.save(tmp_path / "frag.npy", fragments.astype(np.uint64))
        args += ["--fragments", tmp_path / "frag.npy"]
    run_cli(*args)
    summary = json.loads((out / "summary.json").read_text())
    results = []
    for entry in summary["thresholds"]:
        r = {"seg": np.load(out / entry["file"]), "metrics": entry.get("metrics")}
        if "merge_history_file" in entry:
            r["history"] = json.loads((out / entry["merge_history_file"]).read_text())
        if "region_graph_file" in entry:
            r["region_graph"] = json.loads((out / entry["region_graph_file"]).read_text())
        results.append(r)
    return results


def run_waterz(affs, thresholds, gt=None, fragments=None, scoring=None, history=True, region_graph=False,
               module=None, **extra):
    """Runs `module.agglomerate` (stock waterz unless another module, such as
    gpu_waterz, is given) and collects its results per threshold."""
    if module is None:
        import waterz as module

    kwargs = dict(extra)
    if scoring is not None:
        kwargs["scoring_function"] = scoring
    if affs.dtype != np.uint8:
        affs = np.ascontiguousarray(affs, dtype=np.float32)
    results = []
    for out in module.agglomerate(affs, list(thresholds), gt=None if gt is None else gt.astype(np.uint32),
                                  fragments=None if fragments is None else fragments.astype(np.uint64).copy(),
                                  return_merge_history=history, return_region_graph=region_graph, **kwargs):
        out = out if isinstance(out, tuple) else (out,)
        # waterz yields one array, changed in place for each threshold.
        r = {"seg": out[0].copy()}
        i = 1
        if gt is not None:
            r["metrics"] = out[i]
            i += 1
        if history:
            r["history"] = out[i]
            i += 1
        if region_graph:
            r["region_graph"] = out[i]
        results.append(r)
    return results


def assert_same(ours, theirs, label=""):
    assert len(ours) == len(theirs)
    for i, (o, t) in enumerate(zip(ours, theirs)):
        where = f"{label} threshold #{i}"
        # Labels, not only partitions: the reference reproduces waterz's ids.
        np.testing.assert_array_equal(o["seg"], t["seg"], err_msg=where)
        if "metrics" in t:
            m = o["metrics"]
            for ours_key, theirs_key in [("voi_split", "V_Info_split"), ("voi_merge", "V_Info_merge"),
                                         ("rand_split", "V_Rand_split"), ("rand_merge", "V_Rand_merge")]:
                assert abs(m[ours_key] - t["metrics"][theirs_key]) <= 1e-9, (where, ours_key, m, t["metrics"])
        if "history" in t:
            got = [(h["a"], h["b"], h["c"], h["score"]) for h in o["history"]]
            want = [(h["a"], h["b"], h["c"], h["score"]) for h in t["history"]]
            assert got == want, f"{where}: merge histories differ ({len(got)} vs {len(want)} merges)"
        if "region_graph" in t:
            got = [(e["u"], e["v"], e["score"]) for e in o["region_graph"]]
            want = [(e["u"], e["v"], e["score"]) for e in t["region_graph"]]
            assert got == want, f"{where}: region graphs differ"


def require_data(name):
    path = DATA / name
    if not path.exists():
        pytest.fail(f"{path} is absent: the real-data tests need ../shared/data (or GPU_WATERZ_DATA)")
    return path


def gpu_backend_error():
    """Why gpu_waterz's GPU backend cannot run here (a message), or None
    when it can."""
    import gpu_waterz

    try:
        list(gpu_waterz.agglomerate(np.zeros((3, 1, 1, 2), np.float32), [0.5], backend="gpu"))
        return None
    except RuntimeError as e:
        return str(e)
