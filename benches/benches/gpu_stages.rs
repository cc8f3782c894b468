//! GPU stage benchmarks on a device-resident volume: the primitives (GB/s),
//! the watershed and the region graph (voxels/s). Skips visibly without a
//! GPU. Size: `GPU_WATERZ_BENCH_VOXELS` (default 2^30).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gpu_waterz_benches::tiled_cell_affinities;
use gpu_waterz_core::WatershedParams;
use gpu_waterz_runtime::ops::primitives::{digit_shifts, exclusive_scan, radix_sort_pairs};
use gpu_waterz_runtime::{DeviceAffinities, Gpu};
use std::io::Write;

fn target_voxels() -> u64 {
    std::env::var("GPU_WATERZ_BENCH_VOXELS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1 << 30)
}

fn gpu_stages(c: &mut Criterion) {
    let gpu = match Gpu::new(0) {
        Ok(g) => g,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "SKIPPED GPU benchmarks: {e}");
            return;
        }
    };
    let device = gpu
        .name()
        .unwrap_or_else(|_| "gpu".into())
        .replace(' ', "-");
    let (affs, dims) = tiled_cell_affinities(target_voxels());
    let n = dims.z * dims.y * dims.x;
    let device_affs = DeviceAffinities::upload_f32(&gpu, &affs, dims).unwrap();
    drop(affs);
    let params = WatershedParams {
        aff_threshold_low: 0.0001,
        aff_threshold_high: 0.9999,
    };

    let mut group = c.benchmark_group(format!("{device}/primitives"));
    group.sample_size(10);
    let ones = gpu.upload(&vec![1u32; n as usize]).unwrap();
    group.throughput(Throughput::Bytes(n * 12));
    group.bench_function(format!("exclusive-scan-u32-to-u64/{n}"), |b| {
        b.iter(|| exclusive_scan(&gpu, &ones, n).unwrap())
    });
    drop(ones);
    let m = (n / 4).min(1 << 28);
    let keys: Vec<u64> = (0..m)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 8)
        .collect();
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
        fragments.n_fragments,
        fragments.plateau_levels
    );
    group.bench_function(format!("watershed/{n}"), |b| {
        b.iter(|| gpu_waterz_watershed::gpu::watershed(&gpu, &device_affs, params).unwrap())
    });
    let rg = gpu_waterz_graph::gpu::region_graph(
        &gpu,
        &device_affs,
        &fragments.labels,
        fragments.n_fragments,
    )
    .unwrap();
    let _ = writeln!(
        std::io::stderr(),
        "region graph: {} faces, {} edges",
        rg.n_faces,
        rg.n_edges
    );
    drop(rg);
    group.bench_function(format!("region-graph/{n}"), |b| {
        b.iter(|| {
            gpu_waterz_graph::gpu::region_graph(
                &gpu,
                &device_affs,
                &fragments.labels,
                fragments.n_fragments,
            )
            .unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, gpu_stages);
criterion_main!(benches);
