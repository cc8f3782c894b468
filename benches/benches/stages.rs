//! Per-stage benchmarks of the CPU reference, throughput in voxels.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gpu_waterz_core::synthetic::{cell_affinities, cell_labels};
use gpu_waterz_core::{AffinityGraph, Arithmetic, ScoringFunction, WatershedParams};
use gpu_waterz_graph::{region_graph, DenseLabels};
use gpu_waterz_parhac::IterativeMerging;

fn cpu_reference(c: &mut Criterion) {
    let n = 64;
    let affs = cell_affinities(1, &cell_labels(1, (n, n, n), 64), 0.3);
    let graph_in = AffinityGraph::from_f32(affs.view()).unwrap();
    let params = WatershedParams { aff_threshold_low: 0.0001, aff_threshold_high: 0.9999 };
    let fragments = gpu_waterz_watershed::watershed(&graph_in, params);
    let labels = DenseLabels::new(fragments.labels.view()).unwrap();
    let rg = region_graph(&graph_in, fragments.labels.view(), labels.n_nodes());

    let mut group = c.benchmark_group("cpu-reference");
    group.sample_size(10);
    group.throughput(Throughput::Elements((n * n * n) as u64));
    group.bench_function("watershed/64^3", |b| b.iter(|| gpu_waterz_watershed::watershed(&graph_in, params)));
    group.bench_function("region-graph/64^3", |b| {
        b.iter(|| region_graph(&graph_in, fragments.labels.view(), labels.n_nodes()))
    });
    group.bench_function("merge-0.1-0.9/64^3", |b| {
        b.iter(|| {
            let mut m = IterativeMerging::new(&rg, ScoringFunction::MeanAffinity, Arithmetic::Waterz, 0).unwrap();
            for t in [0.1f32, 0.3, 0.5, 0.7, 0.9] {
                m.merge_until(t, None);
            }
        })
    });
    group.finish();

    // The serial finish of the GPU merging (`SerialMerger`) against the
    // serial reference in exact arithmetic, on graphs the size of the live
    // graph the GPU hands over on a contiguous 512³ volume (about 50,000
    // edges), merged to the end.
    let mut group = c.benchmark_group("serial-finish");
    group.sample_size(10);
    let random = gpu_waterz_parhac::cpu::random_graph(1, 20_000, 60_000, 50, 0);
    let (_, hub_nodes, hub) = gpu_waterz_parhac::cpu::adversarial_graphs(1, 40).swap_remove(2);
    for (name, n_nodes, edges) in [("random-60k", 20_000u64, random), ("hub", hub_nodes, hub)] {
        group.bench_function(format!("serial-merger-build/{name}"), |b| {
            b.iter(|| gpu_waterz_parhac::serial::SerialMerger::new(n_nodes, &edges).unwrap())
        });
        group.bench_function(format!("serial-merger-to-0.5/{name}"), |b| {
            b.iter(|| {
                let mut m = gpu_waterz_parhac::serial::SerialMerger::new(n_nodes, &edges).unwrap();
                m.merge_until(0.5, None)
            })
        });
        group.throughput(Throughput::Elements(edges.len() as u64));
        group.bench_function(format!("serial-merger/{name}"), |b| {
            b.iter(|| {
                let mut m = gpu_waterz_parhac::serial::SerialMerger::new(n_nodes, &edges).unwrap();
                m.merge_until(1.0, None)
            })
        });
        group.bench_function(format!("merge-components/{name}"), |b| {
            b.iter(|| gpu_waterz_parhac::serial::merge_components(n_nodes, &edges, 1.0).unwrap())
        });
        group.bench_function(format!("reference-exact/{name}"), |b| {
            b.iter(|| {
                let mut m = IterativeMerging::from_contact_stats(
                    n_nodes,
                    edges.iter().map(|e| [e.u, e.v]).collect(),
                    edges.iter().map(|e| e.stats).collect(),
                );
                m.merge_until(1.0, None)
            })
        });
    }
    group.finish();
}

/// Step 2 of the blockwise decode (`settle_open_plateaus`) over the open
/// voxels of a generated volume (`ImplicitCells`, 128 × 1024 × 1024,
/// blocks of 64 × 256 × 256: about 9 M open voxels), throughput in open
/// voxels. Making the input (each block's step 1 on the CPU) takes some
/// seconds before the measurement.
fn blockwise_settle(c: &mut Criterion) {
    use gpu_waterz_blockwise::{local_plateaus, settle_open_plateaus, AffinitySource, BlockGrid, ImplicitSource};
    use gpu_waterz_core::generate::{GeneratorParams, ImplicitCells};
    use rayon::prelude::*;
    let dims = [128u64, 1024, 1024];
    let generator = GeneratorParams { weak_spots: 0, false_walls: 0, ..Default::default() };
    let source = ImplicitSource::new(ImplicitCells { seed: 1, cell: (48, 24, 24) }, generator, dims).unwrap();
    let grid = BlockGrid::new(dims, [64, 256, 256]).unwrap();
    let params = WatershedParams { aff_threshold_low: 0.0001, aff_threshold_high: 0.9999 };
    let open: Vec<_> = (0..grid.len())
        .into_par_iter()
        .map(|b| {
            let block = grid.block(b);
            let affinities = source.read(block.halo(dims)).unwrap();
            local_plateaus(dims, block, affinities.view(), params).unwrap().open
        })
        .collect();
    let refs: Vec<_> = open.iter().collect();
    let total: usize = open.iter().map(|o| o.index.len()).sum();
    let mut group = c.benchmark_group("blockwise");
    group.sample_size(10);
    group.throughput(Throughput::Elements(total as u64));
    group.bench_function("settle-open-plateaus/128x1024x1024", |b| {
        b.iter(|| settle_open_plateaus(dims, &refs).unwrap())
    });
    group.finish();
}

/// A xorshift generator of the benches' synthetic inputs from `state`
/// (not zero).
fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// Step 6's host part (`region_graph`): 64 blocks' pair lists of 200,000
/// pairs each (random pairs of 2 M fragments, each list sorted, as step 5
/// gives them), summed into the whole graph; throughput in listed pairs.
/// Then lists as blocks give them (each block's fragments apart, a few
/// pairs across a face).
fn blockwise_region_graph(c: &mut Criterion) {
    use gpu_waterz_blockwise::{region_graph, EdgeList};
    // A block's list: its pairs sorted, each once, each with three faces
    // whose fixed-point affinities sum to 2^20.
    let edge_list = |mut pairs: Vec<[u64; 2]>| {
        pairs.sort_unstable();
        pairs.dedup();
        EdgeList {
            u: pairs.iter().map(|p| p[0]).collect(),
            v: pairs.iter().map(|p| p[1]).collect(),
            count: vec![3; pairs.len()],
            sum: vec![1 << 20; pairs.len()],
        }
    };
    let n_fragments = 2_000_000u64;
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
    let lists: Vec<EdgeList> = (0..64)
        .map(|_| {
            let pairs: Vec<[u64; 2]> = (0..200_000)
                .map(|_| {
                    let u = 1 + next() % (n_fragments - 1);
                    [u, u + 1 + next() % (n_fragments - u)]
                })
                .collect();
            edge_list(pairs)
        })
        .collect();
    let refs: Vec<&EdgeList> = lists.iter().collect();
    let total: usize = lists.iter().map(|l| l.u.len()).sum();
    let mut group = c.benchmark_group("blockwise");
    group.sample_size(10);
    group.throughput(Throughput::Elements(total as u64));
    group.bench_function("region-graph/64x200000", |b| b.iter(|| region_graph(n_fragments, &refs).unwrap()));
    // As the blocks give them: each block's pairs among its own fragments
    // (ids numbered block by block), and a few (3 %) across its lower
    // face, with the block before's fragments; sorted per block.
    let per_block = n_fragments / 64;
    let blocks: Vec<EdgeList> = (0..64u64)
        .map(|b| {
            let first = 1 + b * per_block;
            let pairs: Vec<[u64; 2]> = (0..200_000)
                .map(|k| {
                    let below = b > 0 && k % 33 == 0;
                    let u = if below { first - 1 - next() % per_block } else { first + next() % (per_block - 1) };
                    let v = u.max(first) + 1 + next() % 64;
                    [u, v.min(first + per_block - 1).max(u + 1)]
                })
                .collect();
            edge_list(pairs)
        })
        .collect();
    let refs: Vec<&EdgeList> = blocks.iter().collect();
    let total: usize = blocks.iter().map(|l| l.u.len()).sum();
    group.throughput(Throughput::Elements(total as u64));
    group.bench_function("region-graph/blocks-64x200000", |b| b.iter(|| region_graph(n_fragments, &refs).unwrap()));
    group.finish();
}

/// Step 4 (`fragment_ids`) over 64 blocks of 64 × 128 × 128 voxels with
/// 340,000 components each (21.8 M in all, about what 16 Gvoxel of
/// generated cells give in blocks of 256 × 512 × 512): each component's
/// smallest voxel spaced three voxels apart, three voxels each, and faces
/// whose voxels cross to the next block half of the time, between random
/// components; throughput in components.
fn blockwise_fragment_ids(c: &mut Criterion) {
    use gpu_waterz_blockwise::{fragment_ids, BasinFaces, BasinSummary, BlockGrid};
    let (dims, shape) = ([256u64, 512, 512], [64u64, 128, 128]);
    let grid = BlockGrid::new(dims, shape).unwrap();
    let n = 340_000u64;
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
    let blocks: Vec<(Vec<u64>, Vec<u64>, u64, BasinFaces)> = (0..grid.len())
        .map(|b| {
            let block = grid.block(b);
            let minima = (0..n)
                .map(|k| {
                    let v = 3 * k;
                    let (z, y, x) = (v / (shape[1] * shape[2]), (v / shape[2]) % shape[1], v % shape[2]);
                    ((block.lo[0] + z) * dims[1] + block.lo[1] + y) * dims[2] + block.lo[2] + x
                })
                .collect();
            let background = shape.iter().product::<u64>() - 3 * n;
            let faces = BasinFaces {
                components: std::array::from_fn(|d| {
                    let area = (shape[(d % 3 + 1) % 3] * shape[(d % 3 + 2) % 3]) as usize;
                    (0..area).map(|_| 1 + (next() % n) as u32).collect()
                }),
                bits: std::array::from_fn(|d| {
                    let area = (shape[(d % 3 + 1) % 3] * shape[(d % 3 + 2) % 3]) as usize;
                    (0..area).map(|_| if next().is_multiple_of(2) { 0x3f } else { 0 }).collect()
                }),
            };
            (minima, vec![3; n as usize], background, faces)
        })
        .collect();
    let summaries: Vec<BasinSummary<'_>> = blocks
        .iter()
        .map(|(m, s, b, f)| BasinSummary { component_min: m, component_sizes: s, background: *b, faces: f })
        .collect();
    let mut group = c.benchmark_group("blockwise");
    group.sample_size(10);
    group.throughput(Throughput::Elements(n * grid.len() as u64));
    group.bench_function("fragment-ids/64x340000", |b| b.iter(|| fragment_ids(&grid, &summaries).unwrap()));
    group.finish();
}

/// One label chunk of `shape` (C order, uint32 `values`) in group
/// `label-chunks`: encoded from its runs straight into a zstd frame
/// (`encode_runs`, with the row and the plane above as repeats), against
/// the labels filled from the runs into a buffer and compressed by zstd at
/// level 3, as zarrs did. Checks the frame and prints both sizes first.
fn label_chunk(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    shape: [usize; 3],
    values: &[u32],
) {
    use gpu_waterz_cli::io::{encode_runs, ValueRuns};
    let mut runs = ValueRuns::with_capacity(1 << 16);
    for run in values.chunk_by(|a, b| a == b) {
        runs.push(u64::from(run[0]), run.len() as u64);
    }
    let pairs: Vec<(u32, usize)> = runs.runs().map(|(v, n)| (v as u32, n as usize)).collect();
    let repeats = [shape[2] as u64, (shape[1] * shape[2]) as u64];
    let ours = encode_runs(4, &repeats, &runs).unwrap();
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let zstd3 = zstd::bulk::compress(&bytes, 3).unwrap();
    assert_eq!(zstd::stream::decode_all(&ours[..]).unwrap(), bytes);
    // The frame that step 5 makes on the GPU, made here block by block by
    // the same encoder (on the host's threads).
    let shape64 = shape.map(|n| n as u64);
    let by_blocks = gpu_waterz_blockwise::label_frame(values, shape64).unwrap();
    assert_eq!(zstd::stream::decode_all(&by_blocks[..]).unwrap(), bytes);
    eprintln!(
        "label-chunks {name}: {} runs, encode_runs {} bytes, label_frame {} bytes, zstd level 3 {} bytes",
        pairs.len(),
        ours.len(),
        by_blocks.len(),
        zstd3.len()
    );
    group.throughput(Throughput::Elements(values.len() as u64));
    group.bench_function(format!("encode-runs/{name}"), |b| b.iter(|| encode_runs(4, &repeats, &runs).unwrap()));
    group.bench_function(format!("label-frame/{name}"), |b| {
        b.iter(|| gpu_waterz_blockwise::label_frame(values, shape64).unwrap())
    });
    let mut buffer = vec![0u32; values.len()];
    group.bench_function(format!("fill-and-zstd-3/{name}"), |b| {
        b.iter(|| {
            let mut at = 0;
            for &(v, n) in &pairs {
                buffer[at..at + n].fill(v);
                at += n;
            }
            let bytes: Vec<u8> = buffer.iter().flat_map(|v| v.to_le_bytes()).collect();
            zstd::bulk::compress(&bytes, 3).unwrap()
        })
    });
}

/// Step 7's zarr chunks ([`label_chunk`]) on real labels (pinky40, a dense
/// automated segmentation, chunks of 64 x 256 x 256 and 128 x 512 x 512).
/// Skipped, with a message, without `../shared/data`.
fn label_chunks(c: &mut Criterion) {
    use gpu_waterz_cli::io::read_hdf5;
    let data = std::env::var_os("GPU_WATERZ_DATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"));
    let path = data.join("pinky40-labels-512.h5");
    if !path.is_file() {
        eprintln!("label-chunks skipped: no {}", path.display());
        return;
    }
    let labels = read_hdf5(&path, "labels").unwrap().into_labels("labels").unwrap();
    let mut group = c.benchmark_group("label-chunks");
    group.sample_size(10);
    for (z, y, x) in [(64usize, 256usize, 256usize), (128, 512, 512)] {
        let values: Vec<u32> = labels.slice(ndarray::s![..z, ..y, ..x]).iter().map(|&v| v as u32).collect();
        label_chunk(&mut group, &format!("{z}x{y}x{x}"), [z, y, x], &values);
    }
    group.finish();
}

/// Step 7's zarr chunks ([`label_chunk`]) as the blockwise decode of
/// generated cells gives them: one block of 256 x 512 x 512
/// (`ImplicitCells`, the CLI's `--implicit` source with its defaults)
/// decoded whole on the CPU and merged at 0.3 and 0.5. Making the input
/// takes a minute or so before the measurement.
fn label_chunks_generated(c: &mut Criterion) {
    use gpu_waterz::{Agglomeration, Backend, Config};
    use gpu_waterz_core::generate::{GeneratorParams, ImplicitCells};
    let shape = (256usize, 512usize, 512usize);
    let params = GeneratorParams { weak_spots: 0, false_walls: 0, ..Default::default() };
    let (affinities, _) = ImplicitCells::new(1).block(&params, shape, (0, 0, 0), shape).unwrap();
    let graph = AffinityGraph::from_f32(affinities.view()).unwrap();
    let mut run = Agglomeration::new(&graph, Config::new(&[0.3, 0.5]).backend(Backend::Cpu)).unwrap();
    drop(affinities);
    let mut group = c.benchmark_group("label-chunks");
    group.sample_size(10);
    let fragments: Vec<u32> = run.fragments().unwrap().iter().map(|&v| v as u32).collect();
    label_chunk(&mut group, "generated-fragments", [shape.0, shape.1, shape.2], &fragments);
    // What the blockwise driver holds between steps 3 and 5 (and 7): the
    // block's runs packed by zstd at level 1, and unpacked again.
    {
        use gpu_waterz_blockwise::{ComponentRuns, PackedRuns};
        let runs = ComponentRuns::of(ndarray::ArrayView3::from_shape(shape, &fragments).unwrap());
        let packed = PackedRuns::pack(&runs).unwrap();
        eprintln!("packed runs: {} runs, {} bytes", runs.runs().len(), packed.bytes().len());
        group.bench_function("pack-runs/generated-fragments", |b| b.iter(|| PackedRuns::pack(&runs).unwrap()));
        group.bench_function("unpack-runs/generated-fragments", |b| b.iter(|| packed.runs().unwrap()));
        // Step 3's host work after a block's GPU turn, on these runs as
        // components (numbered as they first appear): the runs made from the
        // starts and values the GPU gives, then the block's summary (each
        // component's smallest voxel and size, the faces).
        let mut number: std::collections::HashMap<u32, u32> = std::collections::HashMap::from([(0, 0)]);
        let (mut starts, mut values, mut next) = (Vec::new(), Vec::new(), 0u32);
        for &[label, length] in runs.runs() {
            let fresh = number.len() as u32;
            values.push(*number.entry(label).or_insert(fresh));
            starts.push(next);
            next += length;
        }
        let dims = [shape.0 as u64, shape.1 as u64, shape.2 as u64];
        let block = gpu_waterz_blockwise::Block { lo: [0; 3], hi: dims };
        let bits = ndarray::Array3::<u8>::from_shape_fn(shape, |(z, y, x)| ((z + 3 * y + 7 * x) % 64) as u8);
        group.bench_function("step3-host/generated-fragments", |b| {
            b.iter_batched(
                || bits.clone(),
                |bits| {
                    let runs = ComponentRuns::from_starts([shape.0, shape.1, shape.2], &values, &starts).unwrap();
                    gpu_waterz_blockwise::basins_from_runs(dims, block, runs, bits).unwrap()
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
    drop(fragments);
    while let Some(result) = run.next_threshold().unwrap() {
        let values: Vec<u32> = result.segmentation.iter().map(|&v| v as u32).collect();
        label_chunk(&mut group, &format!("generated-{}", result.threshold), [shape.0, shape.1, shape.2], &values);
    }
    group.finish();
}

criterion_group!(
    benches,
    cpu_reference,
    blockwise_settle,
    blockwise_region_graph,
    blockwise_fragment_ids,
    label_chunks,
    label_chunks_generated
);
criterion_main!(benches);
