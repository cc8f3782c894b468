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

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn a_buffer_freed_on_a_thread_that_never_used_the_device_leaves_it_working() {
    let gpu = gpu();
    let buffer = gpu.upload(&[7u32; 1000]).unwrap();
    // As the CLI frees its inputs: on a thread of its own, with no CUDA
    // context current there.
    std::thread::spawn(move || drop(buffer)).join().unwrap();
    let again = gpu.upload(&[1u32, 2, 3]).unwrap();
    assert_eq!(gpu.download(&again).unwrap(), [1, 2, 3]);
    gpu.synchronize().unwrap();
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn staged_copies_round_trip_at_every_size_and_on_any_thread() {
    use gpu_waterz_runtime::{STAGING_CHUNK_BYTES, STAGING_MIN_BYTES};
    let gpu = gpu();
    let chunk = STAGING_CHUNK_BYTES / 8;
    let sizes = [0, 1, 1000, STAGING_MIN_BYTES / 8 - 1, STAGING_MIN_BYTES / 8, chunk, chunk + 1, 3 * chunk + 12_345];
    // On a thread that never touched the device before (as a pipeline's
    // worker thread does): the context must be made current there.
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                for &n in &sizes {
                    let host: Vec<u64> = (0..n as u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
                    let buffer = gpu.upload(&host).unwrap();
                    assert_eq!(gpu.download(&buffer).unwrap(), host, "n = {n}");
                    // A prefix, and an upload at an offset.
                    let half = n / 2;
                    assert_eq!(gpu.download_prefix(&buffer, half).unwrap(), &host[..half], "prefix of {n}");
                    let mut target = gpu.zeros::<u64>(n + 7).unwrap();
                    gpu.upload_into(&mut target, 7, &host).unwrap();
                    let back = gpu.download(&target).unwrap();
                    assert_eq!(&back[7..], &host[..], "upload at an offset, n = {n}");
                    assert!(back[..7].iter().all(|&v| v == 0));
                }
                let buffer = gpu.upload(&[1u32, 2, 3]).unwrap();
                assert!(gpu.download_prefix(&buffer, 4).is_err(), "a prefix longer than the buffer is an error");
                let mut small = gpu.zeros::<u32>(3).unwrap();
                assert!(gpu.upload_into(&mut small, 1, &[1, 2, 3]).is_err(), "an upload past the end is an error");
            })
            .join()
            .unwrap();
    });
    // The same device handle, cached: a second `Gpu::new` shares it.
    let again = Gpu::new(gpu.ordinal()).unwrap();
    let buffer = again.upload(&[5u32; 100]).unwrap();
    assert_eq!(gpu.download(&buffer).unwrap(), vec![5u32; 100]);
}

/// Copies from and to page-locked buffers (which go directly) round trip
/// at every size, whole and in parts, and on a thread new to the device.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn pinned_buffers_round_trip_at_every_size() {
    use gpu_waterz_runtime::{PinnedBuffer, STAGING_CHUNK_BYTES, STAGING_MIN_BYTES};
    let gpu = gpu();
    let chunk = STAGING_CHUNK_BYTES / 4;
    let sizes = [0, 1, 1000, STAGING_MIN_BYTES / 4 + 1, 3 * chunk + 12_345];
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                for &n in &sizes {
                    let mut pinned = PinnedBuffer::<u32>::zeroed(&gpu, n + 5).unwrap();
                    assert_eq!(pinned.len(), n + 5);
                    assert!(pinned.iter().all(|&v| v == 0), "zeroed");
                    for (i, v) in pinned.iter_mut().enumerate() {
                        *v = (i as u32).wrapping_mul(0x9E37_79B9);
                    }
                    // The same bytes seen as other types.
                    assert_eq!(pinned.view::<u32>(), &pinned[..]);
                    assert_eq!(pinned.view::<u64>().len(), (n + 5) / 2);
                    let bytes: Vec<u8> = pinned.iter().flat_map(|v| v.to_ne_bytes()).collect();
                    assert_eq!(pinned.view::<u8>(), &bytes[..]);
                    let first = pinned[0];
                    pinned.view_mut::<u8>()[0] ^= 1;
                    assert_eq!(pinned[0], first ^ u32::from_ne_bytes([1, 0, 0, 0]), "written through a view");
                    pinned.view_mut::<u8>()[0] ^= 1;
                    let buffer = gpu.upload(&pinned[..n]).unwrap();
                    assert_eq!(gpu.download(&buffer).unwrap(), &pinned[..n], "up from pinned, n = {n}");
                    let mut back = PinnedBuffer::<u32>::zeroed(&gpu, n + 3).unwrap();
                    gpu.download_to_slice(&buffer, &mut back[2..n + 2]).unwrap();
                    assert_eq!(&back[2..n + 2], &pinned[..n], "down into pinned, n = {n}");
                    assert!(back[..2].iter().chain(&back[n + 2..]).all(|&v| v == 0), "nothing outside the slice");
                    let mut target = gpu.zeros::<u32>(n + 7).unwrap();
                    gpu.upload_into(&mut target, 7, &pinned[3..n + 3]).unwrap();
                    assert_eq!(&gpu.download(&target).unwrap()[7..], &pinned[3..n + 3], "an offset, n = {n}");
                }
            })
            .join()
            .unwrap();
    });
}

/// Parts uploaded one after the other equal their concatenation: empty
/// parts anywhere, parts smaller than a staging chunk and parts that span
/// several, small totals (direct copies) and large ones (staged).
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn concatenated_uploads_equal_the_concatenation() {
    use gpu_waterz_runtime::STAGING_CHUNK_BYTES;
    let gpu = gpu();
    let chunk = STAGING_CHUNK_BYTES / 8;
    let value = |i: usize| (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 3;
    for lengths in [
        vec![],
        vec![0, 0],
        vec![5, 0, 7],
        vec![1 << 20, 0, 3, 2 << 20],
        vec![chunk - 1, 1, 0, 2 * chunk + 17, 5, 0],
        vec![3 * chunk + 12_345],
        (0..300).map(|k| (k * 7_919) % 40_000).collect(),
    ] {
        let mut next = 0;
        let parts: Vec<Vec<u64>> = lengths
            .iter()
            .map(|&n| {
                let part = (next..next + n).map(value).collect();
                next += n;
                part
            })
            .collect();
        let views: Vec<&[u64]> = parts.iter().map(Vec::as_slice).collect();
        let buffer = gpu.upload_concatenated(&views).unwrap();
        let want: Vec<u64> = if next == 0 { vec![0] } else { (0..next).map(value).collect() };
        assert_eq!(gpu.download(&buffer).unwrap(), want, "parts of {lengths:?}");
    }
}

/// Uploads beside other work equal plain uploads, from page-locked memory
/// (on the copy stream) and from ordinary memory (plainly), with `work`'s
/// result given back and work queued after them reading them.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn uploads_beside_other_work_equal_plain_uploads() {
    use gpu_waterz_runtime::PinnedBuffer;
    let gpu = gpu();
    for &n in &[1usize, 1000, 5 << 20] {
        let values: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(0x9E37_79B9) ^ 5).collect();
        let mut first = PinnedBuffer::<u32>::zeroed(&gpu, n).unwrap();
        first.copy_from_slice(&values);
        let mut second = PinnedBuffer::<u32>::zeroed(&gpu, n / 2 + 1).unwrap();
        second.copy_from_slice(&values[..n / 2 + 1]);
        let (buffers, (made, sum)) = gpu
            .upload_beside(&[&first[..], &second[..]], |gpu| {
                // Work on the device's stream meanwhile.
                let mut other = gpu.zeros::<u32>(n).unwrap();
                gpu.memset_bytes(&mut other, 1).unwrap();
                (other, 7)
            })
            .unwrap();
        assert_eq!(sum, 7);
        // Work queued after the uploads reads them.
        let copied = gpu.duplicate(&buffers[0]).unwrap();
        assert_eq!(gpu.download(&copied).unwrap(), values, "n = {n}");
        assert_eq!(gpu.download(&buffers[1]).unwrap(), &values[..n / 2 + 1]);
        assert!(gpu.download(&made).unwrap().iter().all(|&v| v == 0x0101_0101));
        // Ordinary memory goes up plainly.
        let (plain, ()) = gpu.upload_beside(&[&values[..]], |_| ()).unwrap();
        assert_eq!(gpu.download(&plain[0]).unwrap(), values);
    }
}

/// A download behind other work lands the values the buffer held when it
/// was queued: the work queued after it (here, writes into other buffers
/// and a large copy) runs meanwhile and does not disturb it, on any
/// thread; waiting gives the page-locked buffer back, and a download that
/// asks for more values than either buffer holds is refused.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn downloads_behind_other_work_land_the_values_queued() {
    use gpu_waterz_runtime::PinnedBuffer;
    let gpu = gpu();
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                for &n in &[1usize, 1000, 3 << 20, 40 << 20] {
                    let values: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(0x9E37_79B9) ^ 7).collect();
                    let source = gpu.upload(&values).unwrap();
                    let room = PinnedBuffer::<u32>::zeroed(&gpu, n + 4).unwrap();
                    let pending = gpu.download_behind(source, n, room).unwrap();
                    // Work queued behind it, on the device's own stream.
                    let mut other = gpu.zeros::<u32>(n).unwrap();
                    gpu.memset_bytes(&mut other, 0xAB).unwrap();
                    let copy = gpu.duplicate(&other).unwrap();
                    let back = pending.wait().unwrap();
                    assert_eq!(&back[..n], &values[..], "n = {n}");
                    assert!(back[n..].iter().all(|&v| v == 0), "nothing past the values asked for");
                    assert!(gpu.download(&copy).unwrap().iter().all(|&v| v == 0xABAB_ABAB), "later work ran");
                    // Dropped without waiting: it waits, and frees both.
                    let source = gpu.upload(&values).unwrap();
                    drop(gpu.download_behind(source, n, back).unwrap());
                }
                let source = gpu.zeros::<u32>(10).unwrap();
                let small = PinnedBuffer::<u32>::zeroed(&gpu, 5).unwrap();
                assert!(gpu.download_behind(source, 6, small).is_err(), "more than the room holds");
                let source = gpu.zeros::<u32>(4).unwrap();
                let room = PinnedBuffer::<u32>::zeroed(&gpu, 8).unwrap();
                assert!(gpu.download_behind(source, 6, room).is_err(), "more than the buffer holds");
            })
            .join()
            .unwrap();
    });
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn the_pool_keeps_freed_memory_until_trimmed() {
    const BYTES: u64 = 1 << 30;
    let gpu = gpu();
    let free = || gpu.memory_info().unwrap().0;
    gpu.trim_pool().unwrap();
    let before = free();
    let buffer = gpu.zeros::<u8>(BYTES as usize).unwrap();
    drop(buffer);
    gpu.synchronize().unwrap();
    let kept = before.saturating_sub(free());
    assert!(kept >= BYTES / 2, "the pool kept {kept} bytes of a freed GiB");
    gpu.trim_pool().unwrap();
    let released = free().saturating_sub(before - kept);
    assert!(released >= BYTES / 2, "trimming gave back {released} bytes");
    // With no threshold the pool gives freed memory back at a synchronisation.
    assert_eq!(gpu.set_pool_release_threshold(0).unwrap(), Some(()));
    let before = free();
    drop(gpu.zeros::<u8>(BYTES as usize).unwrap());
    gpu.synchronize().unwrap();
    assert!(before.saturating_sub(free()) < BYTES / 2, "without a threshold the memory went back");
    let total = gpu.memory_info().unwrap().1;
    gpu.set_pool_release_threshold(total / gpu_waterz_runtime::POOL_KEEP_DIVISOR).unwrap();
}
