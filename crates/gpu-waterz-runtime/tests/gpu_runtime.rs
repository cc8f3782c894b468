//! The runtime against a real GPU, and its clean failure without one.

use gpu_waterz_runtime::{primitives, testing::gpu, Gpu, RuntimeError};
use rand::{Rng, SeedableRng};

#[test]
fn gpu_new_returns_a_clear_error_without_a_gpu() {
    match Gpu::new(0) {
        Ok(gpu) => {
            // On a GPU machine there is no error to check; say so visibly.
            eprintln!("GPU present ({}): the no-GPU error path is checked on CPU-only machines", gpu.name().unwrap());
            let e = Gpu::new(1 << 20).unwrap_err();
            assert!(matches!(e, RuntimeError::NoDevice { .. }), "{e}");
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(
                matches!(e, RuntimeError::NoDriver { .. } | RuntimeError::NoDevice { .. }),
                "unexpected error kind: {msg}"
            );
            assert!(msg.contains("CUDA"), "the error should name CUDA: {msg}");
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn sum_u32_matches_the_cpu_on_random_input() {
    let gpu = gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    for &n in &[0usize, 1, 255, 256, 257, 1000, 65_537, 1 << 20, 16_777_259] {
        let host: Vec<u32> = (0..n).map(|_| rng.gen()).collect();
        let expected: u64 = host.iter().map(|&v| v as u64).sum();
        let buffer = gpu.upload(&host).unwrap();
        let got = primitives::sum_u32(&gpu, &buffer).unwrap();
        assert_eq!(got, expected, "n = {n}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn too_little_memory_is_a_clear_error_not_a_panic() {
    let gpu = gpu();
    let (free, total) = gpu.memory_info().unwrap();
    let e = gpu.check_free_memory(total + 1, "a test volume").unwrap_err();
    assert!(matches!(e, RuntimeError::OutOfMemory { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("bytes needed") && msg.contains("free"), "{msg}");
    assert!(gpu.check_free_memory(free / 2, "half").is_ok());
    // An allocation past the device's memory fails the same way.
    let e = gpu.zeros::<u8>((total as usize).saturating_mul(2)).unwrap_err();
    assert!(matches!(e, RuntimeError::OutOfMemory { .. }), "{e}");
    // The device still works afterwards.
    let ones = gpu.upload(&[1u32; 1000]).unwrap();
    assert_eq!(primitives::sum_u32(&gpu, &ones).unwrap(), 1000);
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn borrowed_device_memory_is_checked_by_the_driver() {
    let gpu = gpu();
    let owned = gpu.upload(&vec![0.5f32; 72]).unwrap();
    let address = owned.device_address();
    // SAFETY: `owned` outlives the borrowed view, and nothing writes it.
    let borrowed = unsafe { gpu.borrow_device_memory::<f32>(address, 72) }.unwrap();
    assert_eq!(gpu.download(&borrowed).unwrap(), vec![0.5f32; 72]);
    drop(borrowed);
    // Dropping the view did not free the memory: the owner still reads it.
    assert_eq!(gpu.download(&owned).unwrap(), vec![0.5f32; 72]);
    // Past the allocation's end, misaligned, or not device memory: errors.
    // SAFETY: as above; these borrows are refused before any use.
    assert!(unsafe { gpu.borrow_device_memory::<f32>(address, 144) }.is_err());
    // SAFETY: as above.
    assert!(unsafe { gpu.borrow_device_memory::<f32>(address + 2, 72) }.is_err());
    // SAFETY: as above.
    assert!(unsafe { gpu.borrow_device_memory::<f32>(0x1000, 72) }.is_err());
}
