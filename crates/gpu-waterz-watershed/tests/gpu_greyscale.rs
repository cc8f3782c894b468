//! The greyscale watershed on the GPU against the CPU: the artifact-free
//! and synchronous schedules equal the synchronous reference; every
//! schedule equals the CPU's tiles label for label and step for step
//! (artifacts included); reruns are identical.

use gpu_waterz_abi::greyscale::MASKED;
use gpu_waterz_abi::Dims3;
use gpu_waterz_runtime::testing::gpu;
use gpu_waterz_watershed::greyscale::{cpu, gpu as grey_gpu, reference, Config, GreyscaleErrorKind, Image, Schedule};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A smooth random image quantized to `levels` (plateaus of many sizes).
fn smooth_image(rng: &mut Rng, (z, y, x): (u64, u64, u64), levels: u32) -> Vec<u32> {
    let n = (z * y * x) as usize;
    let mut v: Vec<f32> = (0..n).map(|_| rng.below(1000) as f32).collect();
    let dims = Dims3::new(z, y, x);
    for _ in 0..3 {
        let src = v.clone();
        for zz in 0..z {
            for yy in 0..y {
                for xx in 0..x {
                    let mut sum = 0.0;
                    let mut count = 0.0;
                    for (dz, dy, dx) in
                        [(0i64, 0i64, 0i64), (1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1)]
                    {
                        let (a, b, c) = (zz as i64 + dz, yy as i64 + dy, xx as i64 + dx);
                        if a >= 0 && b >= 0 && c >= 0 && a < z as i64 && b < y as i64 && c < x as i64 {
                            sum += src[dims.index(a as u64, b as u64, c as u64) as usize];
                            count += 1.0;
                        }
                    }
                    v[dims.index(zz, yy, xx) as usize] = sum / count;
                }
            }
        }
    }
    let (lo, hi) = v.iter().fold((f32::MAX, f32::MIN), |(a, b), &w| (a.min(w), b.max(w)));
    v.iter().map(|&w| (((w - lo) / (hi - lo + 1e-6)) * levels as f32) as u32).collect()
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_schedules_equal_the_cpu_and_the_reference() {
    let gpu = gpu();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let shapes = [(1, 1, 1), (1, 37, 71), (1, 64, 64), (1, 130, 97), (5, 9, 11), (8, 8, 8), (13, 21, 34), (20, 33, 17)];
    let mut artifacts = 0;
    for (case, &shape) in shapes.iter().cycle().take(48).enumerate() {
        let n = (shape.0 * shape.1 * shape.2) as usize;
        let levels = [3, 8, 40, 1000][case % 4];
        let keys = smooth_image(&mut rng, shape, levels);
        let markers: Option<Vec<u32>> = (case % 3 == 1)
            .then(|| (0..n).map(|_| if rng.below(40) == 0 { 1 + rng.below(5) as u32 } else { 0 }).collect());
        let mask: Option<Vec<u8>> = (case % 5 == 2).then(|| (0..n).map(|_| (rng.below(8) != 0) as u8).collect());
        let image = Image {
            keys: &keys,
            dims: Dims3::new(shape.0, shape.1, shape.2),
            markers: markers.as_deref(),
            mask: mask.as_deref(),
        };
        let config = Config::new().connectivity(1 + (case as u32 % 3)).watershed_line(case % 4 == 3);
        let what = format!("case {case}: shape {shape:?}, levels {levels}, {config:?}");
        let want = reference::watershed(&image, &config).unwrap();
        for schedule in [Schedule::Synchronous, Schedule::BlockAsynchronous, Schedule::ArtifactFree] {
            let config = config.schedule(schedule);
            let on_cpu = cpu::watershed(&image, &config).unwrap();
            let on_gpu = grey_gpu::watershed(&gpu, &image, &config).unwrap();
            assert_eq!(on_gpu.labels, on_cpu.labels, "{what}, {schedule:?}: GPU vs CPU tiles");
            assert_eq!(on_gpu.steps, on_cpu.steps, "{what}, {schedule:?}: steps");
            assert_eq!(on_gpu.n_minima, on_cpu.n_minima, "{what}, {schedule:?}: minima");
            if schedule == Schedule::BlockAsynchronous {
                artifacts += on_gpu.labels.iter().zip(&want.labels).filter(|(a, b)| a != b).count();
            } else {
                assert_eq!(on_gpu.labels, want.labels, "{what}, {schedule:?}: GPU vs the synchronous reference");
            }
            let again = grey_gpu::watershed(&gpu, &image, &config).unwrap();
            assert_eq!(again.labels, on_gpu.labels, "{what}, {schedule:?}: rerun");
        }
    }
    eprintln!("block-asynchronous cells differing from the reference over all cases: {artifacts}");
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_reserved_keys_and_bad_shapes_are_errors() {
    let gpu = gpu();
    let keys = [1, 2, MASKED, 4];
    let image = Image { keys: &keys, dims: Dims3::new(1, 2, 2), markers: None, mask: None };
    let e = grey_gpu::watershed(&gpu, &image, &Config::new()).unwrap_err();
    assert_eq!(e.kind(), GreyscaleErrorKind::Input);
    let device = gpu.upload(&keys).unwrap();
    let image = grey_gpu::DeviceImage { keys: &device, dims: Dims3::new(1, 2, 2), markers: None, mask: None };
    let e = grey_gpu::watershed_device(&gpu, &image, &Config::new(), false).unwrap_err();
    assert_eq!(e.kind(), GreyscaleErrorKind::Input, "{e}");
    let image = grey_gpu::DeviceImage { dims: Dims3::new(1, 3, 2), ..image };
    assert!(grey_gpu::watershed_device(&gpu, &image, &Config::new(), false).is_err());
}
