//! The launches of the frames' kernels (`kernels-rs/src/frames.rs`). Each
//! function is safe: it checks what its kernel's `# Safety` section asks
//! for before the launch, and the sizes the gathering kernel trusts come
//! only from the encoding kernel ([`EncodedBlocks`] is made nowhere else).

use gpu_waterz_abi::frames::{FrameGeometry, GatherFrameBlocksArgs, LabelFrameBlocksArgs, BLOCK_VOXELS, SLOT_BYTES};
use gpu_waterz_runtime::{check_len, DeviceBuffer, Gpu, LaunchConfig, Result, RuntimeError};

/// Every zstd block of a frame encoded into its slot by
/// `label_frame_blocks`, with the bytes it wrote there (at most a slot's).
pub(super) struct EncodedBlocks {
    slots: DeviceBuffer<u8>,
    sizes: DeviceBuffer<u32>,
    blocks: u64,
}

/// Encodes each zstd block of the frame of `labels` (a C-order chunk of
/// `geometry.voxels`, 1 to 2^32 - 1 of them) into a slot of its own: one
/// warp per block, two warps per thread block.
pub(super) fn encode_blocks(gpu: &Gpu, labels: &DeviceBuffer<u32>, geometry: FrameGeometry) -> Result<EncodedBlocks> {
    const KERNEL: &str = "label_frame_blocks";
    if geometry.voxels == 0 || geometry.voxels >= u32::MAX as u64 {
        return Err(RuntimeError::InvalidLaunch {
            kernel: KERNEL,
            reason: format!("a chunk of {} voxels: 1 to 2^32 - 1 are taken", geometry.voxels),
        });
    }
    gpu.check_device(labels, "the labels")?;
    check_len(KERNEL, "labels", labels, geometry.voxels)?;
    let blocks = geometry.blocks();
    let mut slots = gpu.uninit::<u8>((blocks * SLOT_BYTES) as usize)?;
    let mut sequences = gpu.uninit::<u32>((blocks * BLOCK_VOXELS) as usize)?;
    let mut sizes = gpu.uninit::<u32>(blocks as usize)?;
    let args = LabelFrameBlocksArgs {
        labels: labels.as_ptr(),
        geometry,
        slots: slots.as_mut_ptr(),
        sequences: sequences.as_mut_ptr(),
        sizes: sizes.as_mut_ptr(),
    };
    let warps = 2u64;
    let config = LaunchConfig { blocks: blocks.div_ceil(warps) as u32, threads: 32 * warps as u32, shared_bytes: 0 };
    // SAFETY: `labels` holds the chunk's voxels (fewer than 2^32, checked
    // above); the slots, the room for sequences and the sizes hold one set
    // per zstd block; the thread blocks are whole warps.
    unsafe { gpu.launch(config, args) }?;
    drop(sequences);
    Ok(EncodedBlocks { slots, sizes, blocks })
}

/// The encoded blocks' used bytes one after the other in a new buffer
/// (their offsets an exclusive sum of their sizes; this synchronizes, to
/// learn the total).
pub(super) fn gather_blocks(gpu: &Gpu, encoded: EncodedBlocks) -> Result<DeviceBuffer<u8>> {
    const KERNEL: &str = "gather_frame_blocks";
    let EncodedBlocks { slots, sizes, blocks } = encoded;
    let (offsets, total) = gpu_waterz_runtime::primitives::exclusive_scan(gpu, &sizes, blocks)?;
    // Each size is at most a slot's (the encoder writes within its slot).
    if total == 0 || total > blocks * SLOT_BYTES {
        return Err(RuntimeError::InvalidLaunch {
            kernel: KERNEL,
            reason: format!("{blocks} encoded blocks of {total} bytes"),
        });
    }
    let mut frame = gpu.uninit::<u8>(total as usize)?;
    let args = GatherFrameBlocksArgs {
        slots: slots.as_ptr(),
        sizes: sizes.as_ptr(),
        offsets: offsets.as_ptr(),
        blocks,
        frame: frame.as_mut_ptr(),
    };
    let config = LaunchConfig { blocks: blocks.min(1 << 16) as u32, threads: 128, shared_bytes: 0 };
    // SAFETY: the sizes are the encoding kernel's (each within its slot),
    // the offsets their exclusive sum and the frame holds their total.
    unsafe { gpu.launch(config, args) }?;
    Ok(frame)
}
