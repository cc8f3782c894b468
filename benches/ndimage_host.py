"""gpu_waterz.ndimage as users run it on host data, with anchors in the same
run: the Python call from a numpy array to a numpy array, and
`gpu-waterz ndimage` from file to file with the CLI's own breakdown (read,
GPU open, compute, write; the rest of the process's wall time is its start
and exit).

Usage (on the GPU machine, with the wheel importable, cupy and scipy):

    python3 benches/ndimage_host.py --tool PATH/gpu-waterz [--baseline-tool OLD/gpu-waterz]
        [--size 512] [--repeats 5] [--work /tmp/ndimage-host] [--cases A,B] [--only python|cli]
        [--json OUT.json]

Data: float32 white noise, its uint8 quantisation and a mask (noise above
0.05) of --size³, written once as .npy under --work; the batch case takes
the mask as (--size³ / 64³) volumes of 64³. Anchors:
cupyx.scipy.ndimage with the copies to and from the device (`cp.asarray`,
`cp.asnumpy`) for the Python call (scipy for the chamfer transform, which
CuPy lacks); a Python process that imports cupyx,
loads, computes and saves for the file-to-file run (its first process
compiles cupyx's kernels; later ones read them from cupy's cache, so the
median is the warm figure). With --baseline-tool, an older CLI runs
interleaved with --tool on the same files. Every result is compared with
cupyx's (distances within 1e-6 relative). Medians of --repeats after one
warm-up; prints one JSON object.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

# name: (CLI operator, input file, keyword arguments); the anchor is
# cupyx.scipy.ndimage unless ANCHORS names another.
CASES = {
    "grey_erosion f32": ("grey-erosion", "noise", {"size": 3}),
    "grey_opening f32": ("grey-opening", "noise", {"size": 3}),
    "white_tophat f32": ("white-tophat", "noise", {"size": 3}),
    "grey_erosion u8": ("grey-erosion", "bytes", {"size": 3}),
    "grey_erosion f32 size 7": ("grey-erosion", "noise", {"size": 7}),
    "grey_erosion u8 size 7": ("grey-erosion", "bytes", {"size": 7}),
    "white_tophat u8": ("white-tophat", "bytes", {"size": 3}),
    "distance_transform_edt": ("distance-transform-edt", "mask", {}),
    "binary_erosion": ("binary-erosion", "mask", {}),
    "binary_fill_holes": ("binary-fill-holes", "mask", {}),
    "distance_transform_cdt": ("distance-transform-cdt", "mask", {"metric": "chessboard"}),
    "distance_transform_edt 64^3 batch": ("distance-transform-edt", "mask_items", {"batch_dims": 1}),
}

# CuPy has no chamfer transform: its anchor is scipy on the host. The batch
# has no file form (the CLI takes one volume): its anchor is cupyx volume by
# volume, copies included, and it runs as a Python call only.
ANCHORS = {"distance_transform_cdt": "scipy", "distance_transform_edt 64^3 batch": "cupyx_items"}
PYTHON_ONLY = {"distance_transform_edt 64^3 batch"}

ANCHOR = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
op, src, dst, kwargs = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
t1 = time.perf_counter()
a = np.load(src)
t2 = time.perf_counter()
if kwargs.pop("anchor", "cupyx") == "scipy":
    import scipy.ndimage as nd
    r = getattr(nd, op.replace("-", "_"))(a, **kwargs)
else:
    import cupy as cp, cupyx.scipy.ndimage as nd
    r = cp.asnumpy(getattr(nd, op.replace("-", "_"))(cp.asarray(a), **kwargs))
t3 = time.perf_counter()
np.save(dst, r)
t4 = time.perf_counter()
print(f"{t1 - t0} {t2 - t1} {t3 - t2} {t4 - t3}")
"""


def timed(fn, repeats):
    fn()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def cli_breakdown(summary):
    """The CLI's own timings: `timings_s` (this version) or the older
    `read_s` and `compute_and_write_s`."""
    if "timings_s" in summary:
        return dict(summary["timings_s"])
    return {"read": summary["read_s"], "compute_and_write": summary["compute_and_write_s"]}


def cli_flags(kwargs):
    """The CLI's flags for a case's keyword arguments (size, metric)."""
    flags = []
    for key, value in kwargs.items():
        if key not in ("size", "metric"):
            raise SystemExit(f"the CLI rows take size and metric, not {key}")
        flags += [f"--{key}", str(value)]
    return flags


def run_cli(tool, op, src, dst, kwargs):
    start = time.perf_counter()
    p = subprocess.run([tool, "ndimage", "--op", op, "--input", src, "--out", dst, "--overwrite", "--backend", "gpu"]
                       + cli_flags(kwargs), capture_output=True, text=True)
    outer = time.perf_counter() - start
    if p.returncode != 0:
        raise SystemExit(f"{tool} ndimage --op {op} failed: {p.stderr.strip()}")
    summary = json.loads(p.stdout)
    parts = cli_breakdown(summary)
    parts["wall"] = summary["wall_s"]
    parts["process"] = outer
    return parts


def same(a, b):
    if a.dtype.kind == "f" and b.dtype.kind == "f" and a.dtype != np.float32:
        return bool(np.allclose(a, b, rtol=1e-6, atol=0))
    return bool(a.dtype == b.dtype and np.array_equal(a, b))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tool", help="the gpu-waterz CLI (needed unless --only python)")
    p.add_argument("--baseline-tool")
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--work", default="/tmp/ndimage-host")
    p.add_argument("--cases", help="comma-separated names of the cases to run (default: all): "
                   + ", ".join(CASES))
    p.add_argument("--only", choices=("python", "cli"), help="run only the Python calls or only the CLI")
    p.add_argument("--json")
    args = p.parse_args()
    if args.only != "python" and not args.tool:
        p.error("--tool is needed unless --only python")
    cases = CASES
    if args.cases:
        names = [c.strip() for c in args.cases.split(",")]
        unknown = [c for c in names if c not in CASES]
        if unknown:
            p.error(f"unknown cases {unknown}; known: {list(CASES)}")
        cases = {c: CASES[c] for c in names}

    import cupy as cp
    import cupyx.scipy.ndimage as cndi

    import gpu_waterz.ndimage as gndi

    os.makedirs(args.work, exist_ok=True)
    rng = np.random.default_rng(0)
    n = args.size
    noise = rng.random((n, n, n), dtype=np.float32)
    arrays = {"noise": noise, "bytes": (noise * 255).astype(np.uint8), "mask": (noise > 0.05).astype(np.uint8)}
    if n % 64 == 0:
        arrays["mask_items"] = arrays["mask"].reshape(-1, 64, 64, 64)
    files = {}
    for name, a in arrays.items():
        files[name] = os.path.join(args.work, f"{name}-{n}.npy")
        np.save(files[name], a)
    report = {"size": n, "repeats": args.repeats, "python": {}, "cli": {}}

    # The Python call, numpy array to numpy array.
    for case, (op, source, kwargs) in (cases if args.only != "cli" else {}).items():
        fn = op.replace("-", "_")
        if source not in arrays:
            print("python", case, "skipped: --size is not a multiple of 64", flush=True)
            continue
        a = arrays[source]
        if source.startswith("mask"):
            a = a.astype(bool)
        anchor_kind = ANCHORS.get(case, "cupyx")
        ours = lambda: getattr(gndi, fn)(a, **kwargs)
        if anchor_kind == "scipy":
            import scipy.ndimage as sndi
            theirs = lambda: getattr(sndi, fn)(a, **kwargs)
        elif anchor_kind == "cupyx_items":
            plain = {k: v for k, v in kwargs.items() if k != "batch_dims"}
            theirs = lambda: np.stack([cp.asnumpy(getattr(cndi, fn)(cp.asarray(x), **plain)) for x in a])
        else:
            theirs = lambda: cp.asnumpy(getattr(cndi, fn)(cp.asarray(a), **kwargs))
        t_ours = timed(ours, args.repeats)
        t_theirs = timed(theirs, min(args.repeats, 3) if anchor_kind == "scipy" else args.repeats)
        row = {"gpu_waterz_s": t_ours, f"{anchor_kind}_s": t_theirs, "speedup": t_theirs / t_ours,
               "equal": same(ours(), theirs())}
        report["python"][case] = row
        print("python", case, json.dumps(row), flush=True)
        cp.get_default_memory_pool().free_all_blocks()

    # The CLI, file to file (interleaved with the baseline tool), and the
    # cupyx process anchor.
    anchor = os.path.join(args.work, "anchor.py")
    with open(anchor, "w") as f:
        f.write(ANCHOR)
    tools = {"tool": args.tool}
    if args.baseline_tool:
        tools["baseline"] = args.baseline_tool
    for case, (op, source, kwargs) in (cases if args.only != "python" else {}).items():
        if case in PYTHON_ONLY:
            continue
        runs = {k: [] for k in tools}
        runs["cupyx_process"] = []
        outs = {k: os.path.join(args.work, f"out-{k}.npy") for k in tools}
        for k, tool in tools.items():
            run_cli(tool, op, files[source], outs[k], kwargs)  # warm-up (page cache)
        for _ in range(args.repeats):
            for k, tool in tools.items():
                runs[k].append(run_cli(tool, op, files[source], outs[k], kwargs))
        anchor_out = os.path.join(args.work, "out-cupyx.npy")
        for _ in range(min(args.repeats, 3)):
            start = time.perf_counter()
            anchor_kwargs = dict(kwargs, anchor=ANCHORS.get(case, "cupyx"))
            q = subprocess.run([sys.executable, anchor, op, files[source], anchor_out, json.dumps(anchor_kwargs)],
                               capture_output=True, text=True)
            outer = time.perf_counter() - start
            if q.returncode != 0:
                raise SystemExit(f"the cupyx anchor failed on {op}: {q.stderr.strip()[-400:]}")
            imp, load, compute, save = map(float, q.stdout.split())
            runs["cupyx_process"].append({"import": imp, "read": load, "compute": compute, "write": save,
                                          "process": outer})
        row = {k: {part: statistics.median([r[part] for r in v]) for part in v[0]} for k, v in runs.items()}
        want = np.load(anchor_out)
        for k in tools:
            got = np.load(outs[k])
            if want.dtype == bool:
                got = got.astype(bool)
            row[k]["equal_cupyx"] = same(got, want)
        row["speedup_process"] = row["cupyx_process"]["process"] / row["tool"]["process"]
        report["cli"][case] = row
        print("cli", case, json.dumps(row), flush=True)

    print(json.dumps(report))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
