"""Stock waterz against gpu_waterz's CPU backend, call for call.

Usage: python3 cpu_side_by_side.py AFFS.npy GT.npy [REPEATS]

Each row is one waterz call run in a fresh process (so that peak memory is
the call's own), alternating stock waterz and `gpu_waterz` with
`backend="cpu"`, REPEATS times (default 3); it prints the median seconds and
the peak resident memory of each, and checks that both return the same
segmentations and metrics. One JSON line per row, then a Markdown table.
"""

import json
import subprocess
import sys

CALLS = {
    "five thresholds, ground truth": "dict(thresholds=[0.1, 0.3, 0.5, 0.7, 0.9], gt=gt)",
    "one threshold": "dict(thresholds=[0.5])",
    "fragments, merge history": "dict(thresholds=[0.3, 0.6], fragments=fragments, return_merge_history=True)",
    "histogram quantile, ground truth": (
        "dict(thresholds=[0.3, 0.6], gt=gt, scoring_function="
        "'OneMinus<HistogramQuantileAffinity<RegionGraphType, 50, ScoreValue, 256, false>>')"
    ),
}

CHILD = r"""
import hashlib, json, resource, sys, time
import numpy as np
affs = np.load(sys.argv[1]); gt = np.load(sys.argv[2]).astype(np.uint32)
fragments = (gt.astype(np.uint64) * 7 + 1) * (gt > 0)
module = sys.argv[3]
kwargs = eval(sys.argv[4])
if module == "waterz":
    import waterz as lib
else:
    import gpu_waterz as lib
    kwargs["backend"] = "cpu"
thresholds = kwargs.pop("thresholds")
digest = hashlib.sha256()
start = time.perf_counter()
for out in lib.agglomerate(affs, thresholds, **kwargs):
    out = out if isinstance(out, tuple) else (out,)
    digest.update(np.ascontiguousarray(out[0], dtype=np.uint64).tobytes())
    if "gt" in kwargs:
        digest.update(json.dumps(out[1], sort_keys=True).encode())
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "digest": digest.hexdigest()}))
"""


def run(module, call, affs, gt):
    out = subprocess.run([sys.executable, "-c", CHILD, affs, gt, module, call], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{module} failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def main():
    affs, gt = sys.argv[1], sys.argv[2]
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    rows = []
    for name, call in CALLS.items():
        results = {"waterz": [], "gpu_waterz": []}
        for _ in range(repeats):
            for module in results:
                results[module].append(run(module, call, affs, gt))
        digests = {r["digest"] for rs in results.values() for r in rs}
        row = {
            "call": name,
            "waterz_s": median([r["seconds"] for r in results["waterz"]]),
            "gpu_waterz_cpu_s": median([r["seconds"] for r in results["gpu_waterz"]]),
            "waterz_peak_mb": max(r["peak_mb"] for r in results["waterz"]),
            "gpu_waterz_peak_mb": max(r["peak_mb"] for r in results["gpu_waterz"]),
            "same_results": len(digests) == 1,
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    print("| call | stock waterz (median s, peak MB) | gpu_waterz CPU (median s, peak MB) | same results |")
    print("| --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['call']} | {r['waterz_s']:.2f} s, {r['waterz_peak_mb']:.0f} MB | "
              f"{r['gpu_waterz_cpu_s']:.2f} s, {r['gpu_waterz_peak_mb']:.0f} MB | {r['same_results']} |")


if __name__ == "__main__":
    main()
