"""gpu_waterz.ndimage on the GPU against cupyx.scipy.ndimage (and scipy on
the host), in one run on the same arrays.

Usage (on the GPU machine, with the wheel, torch and cupy):

    python3 benches/ndimage_bench.py [--size 512] [--small 256] [--repeats 7] [--json OUT.json]

Arrays: white noise (float32, and scaled to uint8) and masks (smoothed noise above its median,
blobs of a few voxels, made on the GPU with torch), resident on the GPU:
torch CUDA tensors in and out for gpu_waterz, cupy arrays for cupyx (the same
values). Each row: the median wall time of the call after a warm-up
(synchronised), cupyx's, their ratio, and whether the results are equal.
Also: the device's copy bandwidth (torch clone of the 512³ float32 array,
read + write), the size-3 erosion's bytes read + written per second under
each strategy, the batched case (64 volumes of 64³ in one call against one
256³ volume, per voxel; back to back, and with the L2 cache overwritten
before each call), the batched distance transform (64 masks of 64³ against
one --small³ mask and against cupyx item by item, with and without
indices), the chamfer transform (taxicab, chessboard; scipy on the host at
--small is its anchor, cupyx has none), the Euclidean transform's two ways
along the lines (envelopes, search) on masks of short and long distances
(the blobs, real neurons with --pinky, 1e-5 zeros, one zero) against
cupyx, and scipy on the host at --small for two rows.
"""

import argparse
import json
import statistics
import sys
import time


# The ways of the integer passes along the lines (`LinePasses`).
WAYS = ("auto", "envelope", "search", "split:1", "split:2", "split:4", "split:8", "split:16")


def timed(fn, repeats, sync, before=None):
    """Median wall time of `fn` after a warm-up; `before` (untimed) runs
    ahead of each timed call."""
    fn()
    sync()
    runs = []
    result = None
    for _ in range(repeats):
        if before is not None:
            before()
            sync()
        t = time.perf_counter()
        result = fn()
        sync()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs), runs, result


def blob_mask(torch, generator, shape):
    """Blobs of a few voxels on the GPU: white noise (float32, from
    `generator`) smoothed twice by a box of 5, above its median (2-D or 3-D
    `shape`)."""
    x = torch.rand(shape, generator=generator, device="cuda", dtype=torch.float32)[None, None]
    pool = torch.nn.functional.avg_pool3d if len(shape) == 3 else torch.nn.functional.avg_pool2d
    for _ in range(2):
        x = pool(x, 5, stride=1, padding=2)
    x = x[0, 0]
    return x > x.median()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--small", type=int, default=256)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--json")
    p.add_argument("--only", choices=["all", "distance"], default="all",
                   help="'distance': the distance transforms' rows alone")
    p.add_argument("--ways", help="comma-separated ways of the integer passes (default: WAYS)")
    p.add_argument("--pinky", help="pinky40's inside mask, bits (np.packbits, 512x256x256) compressed with xz")
    args = p.parse_args()
    ways = tuple(args.ways.split(",")) if args.ways else WAYS
    if "auto" not in ways or "search" not in ways:
        p.error("--ways must hold 'auto' and 'search' (the rows compare against them)")

    import cupy as cp
    import cupyx.scipy.ndimage as cndi
    import numpy as np
    import scipy.ndimage as ndi
    import torch

    import gpu_waterz
    import gpu_waterz.ndimage as gndi
    from gpu_waterz import _native

    sync = torch.cuda.synchronize
    report = {"gpu": torch.cuda.get_device_name(0), "rows": []}
    g = torch.Generator(device="cuda").manual_seed(7)

    def noise(shape):
        return torch.rand(shape, generator=g, device="cuda", dtype=torch.float32)

    def blobs(shape):
        return blob_mask(torch, g, shape)

    def as_cupy(t):
        try:
            return cp.from_dlpack(t)
        except Exception:  # noqa: BLE001 - older DLPack without bool: through the host
            return cp.asarray(t.cpu().numpy())

    big = (args.size,) * 3
    small = (args.small,) * 3
    volume = noise(big)
    mask = blobs(big)
    mask_small = blobs(small)
    volume_cp, mask_cp, mask_small_cp = as_cupy(volume), as_cupy(mask), as_cupy(mask_small)
    full = np.ones((3, 3, 3), bool)
    full_cp = cp.asarray(full)
    cross_cp = cp.asarray(ndi.generate_binary_structure(3, 1))

    # The device's copy bandwidth: a clone reads and writes the array.
    med, _, _ = timed(lambda: volume.clone(), args.repeats, sync)
    copy_gbs = 2 * volume.numel() * 4 / med / 1e9
    report["copy"] = {"median_s": med, "read_plus_write_gb_per_s": copy_gbs}
    print(f"copy {args.size}^3 float32: {med * 1e3:.3f} ms, {copy_gbs:.0f} GB/s", flush=True)

    rows = [
        ("grey_erosion size=3", lambda: gndi.grey_erosion(volume, size=3), lambda: cndi.grey_erosion(volume_cp, size=3)),
        ("grey_dilation size=3", lambda: gndi.grey_dilation(volume, size=3),
         lambda: cndi.grey_dilation(volume_cp, size=3)),
        ("grey_opening size=3", lambda: gndi.grey_opening(volume, size=3), lambda: cndi.grey_opening(volume_cp, size=3)),
        ("grey_closing size=3", lambda: gndi.grey_closing(volume, size=3), lambda: cndi.grey_closing(volume_cp, size=3)),
        ("grey_erosion size=7", lambda: gndi.grey_erosion(volume, size=7), lambda: cndi.grey_erosion(volume_cp, size=7)),
        ("grey_dilation size=5", lambda: gndi.grey_dilation(volume, size=5), lambda: cndi.grey_dilation(volume_cp, size=5)),
        ("grey_erosion size=(1,7,7)", lambda: gndi.grey_erosion(volume, size=(1, 7, 7)),
         lambda: cndi.grey_erosion(volume_cp, size=(1, 7, 7))),
        ("grey_opening size=7", lambda: gndi.grey_opening(volume, size=7), lambda: cndi.grey_opening(volume_cp, size=7)),
        ("grey_erosion footprint=cross", lambda: gndi.grey_erosion(volume, footprint=ndi.generate_binary_structure(3, 1)),
         lambda: cndi.grey_erosion(volume_cp, footprint=cross_cp)),
        ("morphological_gradient size=3", lambda: gndi.morphological_gradient(volume, size=3),
         lambda: cndi.morphological_gradient(volume_cp, size=3)),
        ("morphological_laplace size=3", lambda: gndi.morphological_laplace(volume, size=3),
         lambda: cndi.morphological_laplace(volume_cp, size=3)),
        ("white_tophat size=3", lambda: gndi.white_tophat(volume, size=3), lambda: cndi.white_tophat(volume_cp, size=3)),
        ("black_tophat size=3", lambda: gndi.black_tophat(volume, size=3), lambda: cndi.black_tophat(volume_cp, size=3)),
        ("binary_erosion 3x3x3", lambda: gndi.binary_erosion(mask, structure=full),
         lambda: cndi.binary_erosion(mask_cp, structure=full_cp)),
        ("binary_erosion cross", lambda: gndi.binary_erosion(mask), lambda: cndi.binary_erosion(mask_cp)),
        ("binary_dilation 3x3x3", lambda: gndi.binary_dilation(mask, structure=full),
         lambda: cndi.binary_dilation(mask_cp, structure=full_cp)),
        ("binary_opening cross", lambda: gndi.binary_opening(mask), lambda: cndi.binary_opening(mask_cp)),
        ("binary_closing cross", lambda: gndi.binary_closing(mask), lambda: cndi.binary_closing(mask_cp)),
        (f"binary_fill_holes {args.small}^3", lambda: gndi.binary_fill_holes(mask_small),
         lambda: cndi.binary_fill_holes(mask_small_cp)),
        (f"binary_propagation {args.small}^3", lambda: gndi.binary_propagation(mask_small & (volume[:args.small, :args.small, :args.small] > 0.999), mask=mask_small),
         lambda: cndi.binary_propagation(mask_small_cp & (volume_cp[:args.small, :args.small, :args.small] > 0.999), mask=mask_small_cp)),
    ]
    # uint8 (the noise scaled to bytes): the byte kernels.
    volume8 = (volume * 256).to(torch.uint8)
    volume8_cp = as_cupy(volume8)
    rows += [
        ("grey_erosion size=3 uint8", lambda: gndi.grey_erosion(volume8, size=3),
         lambda: cndi.grey_erosion(volume8_cp, size=3)),
        ("grey_dilation size=3 uint8", lambda: gndi.grey_dilation(volume8, size=3),
         lambda: cndi.grey_dilation(volume8_cp, size=3)),
        ("grey_erosion size=7 uint8", lambda: gndi.grey_erosion(volume8, size=7),
         lambda: cndi.grey_erosion(volume8_cp, size=7)),
        ("grey_erosion footprint=cross uint8",
         lambda: gndi.grey_erosion(volume8, footprint=ndi.generate_binary_structure(3, 1)),
         lambda: cndi.grey_erosion(volume8_cp, footprint=cross_cp)),
        ("white_tophat size=3 uint8", lambda: gndi.white_tophat(volume8, size=3),
         lambda: cndi.white_tophat(volume8_cp, size=3)),
    ]
    # 2-D boxes (a 4096² plane of the same noise): one staged pass per axis.
    grey_plane = noise((4096, 4096))
    grey_plane_cp = as_cupy(grey_plane)
    rows += [
        ("grey_erosion size=7 4096^2", lambda: gndi.grey_erosion(grey_plane, size=7),
         lambda: cndi.grey_erosion(grey_plane_cp, size=7)),
        ("grey_erosion size=(1,15) 4096^2", lambda: gndi.grey_erosion(grey_plane, size=(1, 15)),
         lambda: cndi.grey_erosion(grey_plane_cp, size=(1, 15))),
    ]
    # (Not named `full`: that is the 3×3×3 structure the rows above read
    # when they run.)
    whole_table = args.only == "all"
    if not whole_table:
        rows = []
    # The distance transform: 512³ blobs, a 4096² mask, with indices.
    plane = blobs((4096, 4096))
    plane_cp = as_cupy(plane)
    rows += [
        ("distance_transform_edt", lambda: gndi.distance_transform_edt(mask),
         lambda: cndi.distance_transform_edt(mask_cp)),
        ("distance_transform_edt 4096^2", lambda: gndi.distance_transform_edt(plane),
         lambda: cndi.distance_transform_edt(plane_cp)),
        ("distance_transform_edt return_indices", lambda: gndi.distance_transform_edt(mask, return_indices=True),
         lambda: cndi.distance_transform_edt(mask_cp, return_indices=True)),
    ]

    def equal(ours, theirs):
        if isinstance(ours, tuple):
            # Distances equal; indices name an element at that distance (ties: any nearest).
            (d, i), (cd, _) = ours, theirs
            grid = torch.stack(torch.meshgrid(*[torch.arange(s, device="cuda") for s in d.shape], indexing="ij"))
            to_index = ((i.to(torch.float64) - grid) ** 2).sum(0).sqrt()
            return bool(np.array_equal(d.cpu().numpy(), cp.asnumpy(cd))) and bool(torch.equal(to_index, d))
        return bool(np.array_equal(ours.cpu().numpy(), cp.asnumpy(theirs)))

    for name, ours, theirs in rows:
        try:
            med, runs, out = timed(ours, args.repeats, sync)
            cmed, cruns, cout = timed(theirs, args.repeats, cp.cuda.runtime.deviceSynchronize)
            row = {"op": name, "median_s": med, "runs": runs, "cupyx_s": cmed, "cupyx_runs": cruns,
                   "speedup": cmed / med, "equal": equal(out, cout)}
        except Exception as e:  # noqa: BLE001 - a failing row is reported, the others still run
            row = {"op": name, "error": repr(e)}
        report["rows"].append(row)
        print(json.dumps(row if "error" in row else {k: (round(v, 6) if isinstance(v, float) else v)
                                                     for k, v in row.items() if k not in ("runs", "cupyx_runs")}),
              flush=True)

    if whole_table:
        # The size-3 erosion under each strategy, as bytes read + written per second.
        out = torch.empty_like(volume)
        strategies = {}
        for strategy in ("gather", "separable", "tile", "box", "warp"):
            def run(strategy=strategy):
                _native.grey_filter_cuda("erosion", [volume.data_ptr(), out.data_ptr()], "f4", list(volume.shape), 0,
                                         [3, 3, 3], None, None, "reflect", 0.0, [0, 0, 0], strategy, 0)
            med, _, _ = timed(run, args.repeats, sync)
            strategies[strategy] = {"median_s": med, "gb_per_s": 2 * volume.numel() * 4 / med / 1e9,
                                    "fraction_of_copy": 2 * volume.numel() * 4 / med / 1e9 / copy_gbs}
            print(f"erosion size=3 {strategy}: {med * 1e3:.3f} ms, {strategies[strategy]['gb_per_s']:.0f} GB/s "
                  f"({strategies[strategy]['fraction_of_copy']:.0%} of copy)", flush=True)
        report["strategies"] = strategies
        # The size-7 erosion under the box and warp (wide) kernels, float32
        # and uint8 (native calls, results compared).
        wide = {}
        for dtype, source in (("f4", volume), ("u1", (volume * 255).to(torch.uint8))):
            outs = {}
            for strategy in ("box", "warp"):
                out_w = torch.empty_like(source)
                outs[strategy] = out_w

                def run(strategy=strategy, out_w=out_w, source=source, dtype=dtype):
                    _native.grey_filter_cuda("erosion", [source.data_ptr(), out_w.data_ptr()], dtype,
                                             list(source.shape), 0, [7, 7, 7], None, None, "reflect", 0.0, [0, 0, 0],
                                             strategy, 0)
                med, _, _ = timed(run, args.repeats, sync)
                wide[f"{dtype} {strategy}_s"] = med
            wide[f"{dtype} equal"] = bool(torch.equal(outs["box"], outs["warp"]))
        report["size7_strategies"] = wide
        print("erosion size=7 by strategy", json.dumps(wide), flush=True)
        # The uint8 size-3 erosion (the byte kernels), against a clone of the
        # uint8 volume.
        out8 = torch.empty_like(volume8)
        cmed, _, _ = timed(lambda: volume8.clone(), args.repeats, sync)

        def run8():
            _native.grey_filter_cuda("erosion", [volume8.data_ptr(), out8.data_ptr()], "u1", list(volume8.shape), 0,
                                     [3, 3, 3], None, None, "reflect", 0.0, [0, 0, 0], "auto", 0)
        med, _, _ = timed(run8, args.repeats, sync)
        report["uint8_erosion"] = {"median_s": med, "copy_s": cmed, "gb_per_s": 2 * volume8.numel() / med / 1e9,
                                   "fraction_of_copy": cmed / med}
        print(f"erosion size=3 uint8: {med * 1e3:.3f} ms, {2 * volume8.numel() / med / 1e9:.0f} GB/s "
              f"(uint8 copy {cmed * 1e3:.3f} ms: {cmed / med:.0%})", flush=True)

        # The cross footprint in the plus kernels (Strategy::Box; Auto takes the
        # tiles until they are measured) against the tiles, and their equality.
        cross = ndi.generate_binary_structure(3, 1)
        plus_rows = {}
        outs = {}
        for strategy in ("tile", "box"):
            out_s = torch.empty_like(volume)
            outs[strategy] = out_s

            def run(strategy=strategy, out_s=out_s):
                _native.grey_filter_cuda("erosion", [volume.data_ptr(), out_s.data_ptr()], "f4", list(volume.shape), 0,
                                         None, cross, None, "reflect", 0.0, [0, 0, 0], strategy, 0)
            med, _, _ = timed(run, args.repeats, sync)
            plus_rows[strategy] = med
        plus_rows["equal"] = bool(torch.equal(outs["tile"], outs["box"]))
        report["cross_strategies"] = plus_rows
        print("erosion cross by strategy", json.dumps(plus_rows), flush=True)

        # Batched: 64 volumes of 64³ in one call against one 256³ volume.
        batch = noise((64, 1, 64, 64, 64))
        one = noise((256, 256, 256))
        bmed, _, bout = timed(lambda: gndi.grey_erosion(batch, size=3, batch_dims=2), args.repeats, sync)
        omed, _, _ = timed(lambda: gndi.grey_erosion(one, size=3), args.repeats, sync)
        # The same with the L2 cache overwritten before each timed call: called
        # back to back, the 256³ volume's chunks start on planes that the
        # chunks before them read last (still cached), the batch's first chunks
        # on planes read long before.
        scratch = torch.empty(64 << 20, device="cuda")
        flush = lambda: scratch.fill_(1.0)  # noqa: E731
        bcold, _, _ = timed(lambda: gndi.grey_erosion(batch, size=3, batch_dims=2), args.repeats, sync, flush)
        ocold, _, _ = timed(lambda: gndi.grey_erosion(one, size=3), args.repeats, sync, flush)
        del scratch
        want = torch.stack([torch.from_dlpack(cndi.grey_erosion(as_cupy(batch[i, 0]), size=3)) for i in range(4)])
        report["batched"] = {"batch_64x64^3_s": bmed, "one_256^3_s": omed, "per_voxel_ratio": bmed / omed,
                             "cold_batch_s": bcold, "cold_one_s": ocold, "cold_per_voxel_ratio": bcold / ocold,
                             "first_items_equal_cupyx": bool(torch.equal(bout[:4, 0], want))}
        print("batched", json.dumps(report["batched"]), flush=True)

    # Batched distance transforms: 64 volumes of 64³ in one call against
    # one 256³ volume (per voxel), and against cupyx item by item (it takes
    # no batch); with indices too.
    mask_batch = torch.stack([blobs((64, 64, 64)) for _ in range(64)])
    mask_batch_cp = as_cupy(mask_batch)
    edt_batched = {}
    for indices in (False, True):
        bmed, _, bout = timed(lambda: gndi.distance_transform_edt(mask_batch, return_indices=indices, batch_dims=1),
                              args.repeats, sync)
        omed, _, _ = timed(lambda: gndi.distance_transform_edt(mask_small, return_indices=indices), args.repeats, sync)
        cmed, _, cout = timed(lambda: [cndi.distance_transform_edt(mask_batch_cp[i], return_indices=indices)
                                       for i in range(64)], args.repeats, cp.cuda.runtime.deviceSynchronize)
        d = bout[0] if indices else bout
        cd = [c[0] for c in cout] if indices else cout
        # The same voxels as the one volume: its 64³ blocks as the batch
        # (independent blobs of 64³ differ from the big volume's near
        # their faces: their distances run about 7 % longer).
        blocks_ratio = None
        if args.small % 64 == 0 and (args.small // 64) ** 3 == 64:
            c = args.small // 64
            blocks = mask_small.reshape(c, 64, c, 64, c, 64).permute(0, 2, 4, 1, 3, 5).reshape(64, 64, 64, 64)
            blocks = blocks.contiguous()
            kmed, _, _ = timed(lambda: gndi.distance_transform_edt(blocks, return_indices=indices, batch_dims=1),
                               args.repeats, sync)
            blocks_ratio = kmed / omed
        edt_batched["indices" if indices else "distances"] = {
            "batch_64x64^3_s": bmed, f"one_{args.small}^3_s": omed, "per_voxel_ratio": bmed / omed,
            "its_blocks_per_voxel_ratio": blocks_ratio,
            "cupyx_item_by_item_s": cmed, "speedup_vs_cupyx": cmed / bmed,
            "equal_cupyx": all(np.array_equal(d[i].cpu().numpy(), cp.asnumpy(cd[i])) for i in range(64))}
        print("edt batched", "indices" if indices else "distances",
              json.dumps(edt_batched["indices" if indices else "distances"]), flush=True)
    report["edt_batched"] = edt_batched

    # The chamfer transform (cupyx has none: scipy on the host at --small
    # is the anchor) and sparse masks for the Euclidean one (few zeros:
    # long searches along the lines).
    chamfer = {}
    host_small = mask_small.cpu().numpy()
    for metric in ("taxicab", "chessboard"):
        med, _, out = timed(lambda: gndi.distance_transform_cdt(mask, metric=metric), args.repeats, sync)
        imed, _, _ = timed(lambda: gndi.distance_transform_cdt(mask, metric=metric, return_indices=True),
                           args.repeats, sync)
        smed, _, sout = timed(lambda: gndi.distance_transform_cdt(mask_small, metric=metric), args.repeats, sync)
        t = time.perf_counter()
        want = ndi.distance_transform_cdt(host_small, metric=metric)
        scipy_s = time.perf_counter() - t
        chamfer[metric] = {f"{args.size}^3_s": med, f"{args.size}^3_indices_s": imed, f"{args.small}^3_s": smed,
                           f"scipy_{args.small}^3_s": scipy_s, "speedup_vs_scipy": scipy_s / smed,
                           "equal_scipy": bool(np.array_equal(sout.cpu().numpy(), want))}
        print("cdt", metric, json.dumps(chamfer[metric]), flush=True)
    report["chamfer"] = chamfer
    # The Euclidean transform's integer passes along y and z, each way
    # (the lines' lower envelopes, the outward search in shared memory, or
    # lines split between them at a mean radius; auto is a split),
    # against cupyx, on masks whose distances differ: the blobs (short),
    # real neurons (the inside of pinky40's labels, mirrored to --size³:
    # tens of voxels), few zeros and one zero (hundreds).
    masks = {"blobs": mask}
    if args.pinky:
        import lzma
        with open(args.pinky, "rb") as f:
            bits = np.unpackbits(np.frombuffer(lzma.decompress(f.read()), np.uint8))
        inside = torch.from_numpy(bits[:512 * 256 * 256].reshape(512, 256, 256).astype(bool)).cuda()
        inside = torch.cat([inside, inside.flip(1)], 1)
        inside = torch.cat([inside, inside.flip(2)], 2)
        masks["pinky40 inside"] = inside[:args.size, :args.size, :args.size].contiguous()
    for name, density in (("1e-5 zeros", 1e-5), ("one zero", 0.0)):
        m = noise(big) >= density
        m[args.size // 3, args.size // 2, args.size // 5] = False
        masks[name] = m
    passes = {}
    for name, m in masks.items():
        m_cp = as_cupy(m)
        row = {}
        outs = {}
        for way in ways:
            for indices in (False, True):
                out = torch.empty(m.shape, dtype=torch.float64, device="cuda")
                ind = torch.empty((3,) + tuple(m.shape), dtype=torch.int32, device="cuda") if indices else None

                def run(way=way, out=out, ind=ind):
                    _native.distance_transform_edt_cuda(
                        [m.data_ptr(), out.data_ptr(), 0 if ind is None else ind.data_ptr()], list(m.shape), 0, None,
                        0, way)
                med, _, _ = timed(run, args.repeats, sync)
                row[way + (" indices" if indices else "") + "_s"] = med
                outs[way + (" indices" if indices else "")] = out
        cmed, _, cout = timed(lambda: cndi.distance_transform_edt(m_cp), args.repeats, cp.cuda.runtime.deviceSynchronize)
        cimed, _, _ = timed(lambda: cndi.distance_transform_edt(m_cp, return_indices=True), args.repeats,
                            cp.cuda.runtime.deviceSynchronize)
        row.update({"cupyx_s": cmed, "cupyx_indices_s": cimed, "speedup_auto": cmed / row["auto_s"],
                    "speedup_auto_indices": cimed / row["auto indices_s"], "zero_fraction": float((~m).float().mean()),
                    "max_distance": float(cout.max()), "equal": all(bool(torch.equal(o, torch.from_dlpack(cout))) for o in outs.values())})
        # The chamfer transform each way on the same mask (no cupyx anchor:
        # the ways against each other, and equal).
        for metric in ("taxicab", "chessboard"):
            couts = {}
            try:
                for way in ways:
                    cout_t = torch.empty(m.shape, dtype=torch.int32, device="cuda")
                    couts[way] = cout_t

                    def crun(way=way, cout_t=cout_t, metric=metric):
                        _native.distance_transform_cdt_cuda([m.data_ptr(), cout_t.data_ptr(), 0], list(m.shape), 0,
                                                            metric, 0, way)
                    med, _, _ = timed(crun, args.repeats, sync)
                    row[f"cdt {metric} {way}_s"] = med
                row[f"cdt {metric} ways equal"] = all(bool(torch.equal(c, couts["search"])) for c in couts.values())
            except Exception as e:  # noqa: BLE001 - a failing row is reported, the others still run
                row[f"cdt {metric} error"] = repr(e)
            del couts
        passes[name] = row
        print("edt passes", name, json.dumps({k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()}),
              flush=True)
        del m_cp, cout, outs
    report["edt_passes"] = passes
    del masks

    if whole_table:
        # scipy on the host at --small.
        host = volume[:args.small, :args.small, :args.small].cpu().numpy()
        t = time.perf_counter()
        ndi.grey_erosion(host, size=3)
        report["scipy_grey_erosion_small_s"] = time.perf_counter() - t
        print(f"scipy grey_erosion {args.small}^3: {report['scipy_grey_erosion_small_s']:.3f} s", flush=True)
    report["versions"] = {"gpu_waterz": getattr(gpu_waterz, "__version__", "?"), "cupy": cp.__version__,
                          "torch": torch.__version__}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
