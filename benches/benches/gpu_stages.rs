//! GPU stage benchmarks on a device-resident volume: the primitives (GB/s),
//! the watershed and the region graph (voxels/s). Skips visibly without a
//! GPU. Size: `GPU_WATERZ_BENCH_VOXELS` (default 2^30).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gpu_waterz_benches::tiled_cell_affinities;
use gpu_waterz_core::WatershedParams;
use gpu_waterz_parhac::gpu::GpuParhac;
use gpu_waterz_runtime::primitives::{digit_shifts, exclusive_scan, radix_sort_pairs};
use gpu_waterz_runtime::Gpu;
use gpu_waterz_watershed::gpu::DeviceAffinities;
use std::io::Write;

fn target_voxels() -> u64 {
    std::env::var("GPU_WATERZ_BENCH_VOXELS").ok().and_then(|v| v.parse().ok()).unwrap_or(1 << 30)
}

fn gpu_stages(c: &mut Criterion) {
    let gpu = match Gpu::new(0) {
        Ok(g) => g,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "SKIPPED GPU benchmarks: {e}");
            return;
        }
    };
    let device = gpu.name().unwrap_or_else(|_| "gpu".into()).replace(' ', "-");
    // GPU_WATERZ_PROFILE=1 prints each stage's time once (with a sync per stage).
    let profile = std::env::var_os("GPU_WATERZ_PROFILE").is_some();
    if profile {
        let _ = tracing_subscriber::fmt().with_max_level(tracing::Level::DEBUG).with_writer(std::io::stderr).try_init();
    }
    let (affs, dims) = tiled_cell_affinities(target_voxels());
    // The tile the volume repeats, for stock waterz on the same data
    // (benches/waterz_side_by_side.py).
    if let Some(path) = std::env::var_os("GPU_WATERZ_BENCH_DUMP") {
        let (tile, tile_dims) = tiled_cell_affinities(0);
        let shape = [3, tile_dims.z as usize, tile_dims.y as usize, tile_dims.x as usize];
        let mut bytes = gpu_waterz_cli::io::npy_header("<f4", &shape);
        bytes.extend(tile.iter().flat_map(|v| v.to_le_bytes()));
        gpu_waterz_cli::io::write_atomically(std::path::Path::new(&path), &bytes).unwrap();
    }
    let (free_before, _) = gpu.memory_info().unwrap();
    let n = dims.z * dims.y * dims.x;
    let device_affs = DeviceAffinities::upload_f32(&gpu, &affs, dims).unwrap();
    drop(affs);
    let _ = writeln!(std::io::stderr(), "device memory in use before the upload: {} bytes free", free_before);
    let params = WatershedParams { aff_threshold_low: 0.0001, aff_threshold_high: 0.9999 };

    let mut group = c.benchmark_group(format!("{device}/primitives"));
    group.sample_size(10);
    let ones = gpu.upload(&vec![1u32; n as usize]).unwrap();
    group.throughput(Throughput::Bytes(n * 12));
    group.bench_function(format!("exclusive-scan-u32-to-u64/{n}"), |b| {
        b.iter(|| exclusive_scan(&gpu, &ones, n).unwrap())
    });
    drop(ones);
    let m = (n / 4).min(1 << 28);
    let keys: Vec<u64> = (0..m).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 8).collect();
    let keys_d = gpu.upload(&keys).unwrap();
    let values_d = gpu.upload(&keys).unwrap();
    drop(keys);
    group.throughput(Throughput::Elements(m));
    group.bench_function(format!("radix-sort-pairs-u64-56bit/{m}"), |b| {
        b.iter(|| {
            // The copies are part of the timed work (2 x 16 bytes per pair).
            let k = gpu.duplicate(&keys_d).unwrap();
            let v = gpu.duplicate(&values_d).unwrap();
            radix_sort_pairs(&gpu, k, v, m, &digit_shifts(32, 24)).unwrap()
        })
    });
    drop((keys_d, values_d));
    group.finish();

    let mut group = c.benchmark_group(format!("{device}/stages"));
    group.sample_size(10);
    group.throughput(Throughput::Elements(n));
    let fragments = gpu_waterz_watershed::gpu::watershed(&gpu, &device_affs, params).unwrap();
    let _ = writeln!(
        std::io::stderr(),
        "volume {dims:?} = {n} voxels: {} fragments, {} plateau levels",
        fragments.n_fragments(),
        fragments.plateau_levels()
    );
    if profile {
        let _ = gpu_waterz_watershed::gpu::watershed(&gpu, &device_affs, params).unwrap();
        let _ = gpu_waterz_graph::gpu::region_graph(&gpu, &device_affs, &fragments).unwrap();
        return;
    }
    group.bench_function(format!("watershed/{n}"), |b| {
        b.iter(|| gpu_waterz_watershed::gpu::watershed(&gpu, &device_affs, params).unwrap())
    });
    let rg = gpu_waterz_graph::gpu::region_graph(&gpu, &device_affs, &fragments).unwrap();
    let _ = writeln!(
        std::io::stderr(),
        "region graph: {} face entries after warp aggregation, {} edges",
        rg.n_entries(),
        rg.n_edges()
    );
    group.bench_function(format!("region-graph/{n}"), |b| {
        b.iter(|| gpu_waterz_graph::gpu::region_graph(&gpu, &device_affs, &fragments).unwrap())
    });
    // ParHAC at ε = 0 over thresholds 0.1 to 0.9 on this region graph; the
    // three device copies of the graph are part of the timed work.
    let thresholds = [0.1f32, 0.3, 0.5, 0.7, 0.9];
    let run_parhac = |rg: &gpu_waterz_graph::gpu::DeviceEdges, epsilon: f64| {
        let mut p = GpuParhac::new(&gpu, rg.duplicate(&gpu).unwrap(), epsilon, false).unwrap();
        let merges: Vec<u64> = thresholds.iter().map(|&t| p.merge_until(t).unwrap()).collect();
        (merges, p.rounds().to_vec())
    };
    for epsilon in [0.0, 0.05] {
        let (merges, rounds) = run_parhac(&rg, epsilon);
        let total: f64 = rounds.iter().map(|r| r.seconds).sum();
        let _ = writeln!(
            std::io::stderr(),
            "ParHAC ε {epsilon} on {} edges: merges per threshold {merges:?}, {} rounds, {:.1} ms (mean {:.1} µs per round)",
            rg.n_edges(),
            rounds.len(),
            total * 1e3,
            total * 1e6 / rounds.len().max(1) as f64
        );
    }
    group.throughput(Throughput::Elements(rg.n_edges()));
    group.bench_function(format!("parhac-eps0-5-thresholds/{}-edges", rg.n_edges()), |b| {
        b.iter(|| run_parhac(&rg, 0.0))
    });
    drop(rg);
    group.finish();
}

criterion_group!(benches, gpu_stages);
criterion_main!(benches);
