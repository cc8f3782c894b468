//! zstd frames of uint32 label chunks, one zstd block per thread, with the
//! encoder of `gpu_waterz_abi::frames` that host tests run as it is.

use crate::device::*;
use gpu_waterz_abi::frames::{
    encode_block, FrameGeometry, GatherFrameBlocksArgs, LabelFrameBlocksArgs, BLOCK_VOXELS, SLOT_BYTES,
};

kernel! {
    /// Encodes each zstd block of the frame of a chunk's labels into its
    /// slot (`gpu_waterz_abi::frames::encode_block`) and writes its size.
    ///
    /// # Safety
    /// `labels` holds `geometry.voxels` u32s (at least one); `slots` holds
    /// `SLOT_BYTES`, `sequences` `BLOCK_VOXELS` u32s and `sizes` one u32
    /// per zstd block (`geometry.blocks()`).
    ///
    /// # Parameters
    /// - `labels`, `geometry`: the chunk (C order) and its repeats.
    /// - `slots`, `sequences`: each block's output and room for its sequences.
    /// - `sizes`: the bytes each block wrote into its slot.
    ///
    /// # Thread mapping
    /// One thread per zstd block, grid-stride.
    pub unsafe extern "ptx-kernel" fn label_frame_blocks(
        labels: *const u32,
        geometry: FrameGeometry,
        slots: *mut u8,
        sequences: *mut u32,
        sizes: *mut u32,
    ) as LabelFrameBlocksArgs {
        let blocks = geometry.blocks();
        // SAFETY: the caller gives one label per voxel.
        let labels = unsafe { core::slice::from_raw_parts(labels, geometry.voxels as usize) };
        grid_stride(blocks, |b| {
            // SAFETY: each block's slot and room for sequences are its own
            // and inside the buffers (the caller sizes them per block).
            unsafe {
                let slot = core::slice::from_raw_parts_mut(
                    slots.add((b * SLOT_BYTES) as usize),
                    SLOT_BYTES as usize,
                );
                let room = core::slice::from_raw_parts_mut(
                    sequences.add((b * BLOCK_VOXELS) as usize),
                    BLOCK_VOXELS as usize,
                );
                *sizes.add(b as usize) = encode_block(labels, &geometry, b, b + 1 == blocks, slot, room) as u32;
            }
        });
    }
}

kernel! {
    /// Copies each zstd block's bytes from its slot to its place in the
    /// frame.
    ///
    /// # Safety
    /// `slots` holds `SLOT_BYTES` and `sizes`, `offsets` one value per
    /// block; each size is at most `SLOT_BYTES`, `offsets` their exclusive
    /// sum and `frame` holds their total.
    ///
    /// # Parameters
    /// - `slots`, `sizes`: the blocks as `label_frame_blocks` wrote them.
    /// - `offsets`, `blocks`: where each goes, and how many there are.
    /// - `frame`: the output.
    ///
    /// # Thread mapping
    /// One thread block per zstd block (grid-stride over blocks), its
    /// threads striding over the block's bytes.
    pub unsafe extern "ptx-kernel" fn gather_frame_blocks(
        slots: *const u8,
        sizes: *const u32,
        offsets: *const u64,
        blocks: u64,
        frame: *mut u8,
    ) as GatherFrameBlocksArgs {
        let mut b = block_idx_x() as u64;
        while b < blocks {
            // SAFETY: the caller's sizes and offsets keep every byte inside
            // its slot and the frame.
            unsafe {
                let size = *sizes.add(b as usize) as u64;
                let from = slots.add((b * SLOT_BYTES) as usize);
                let to = frame.add(*offsets.add(b as usize) as usize);
                let mut k = thread_idx_x() as u64;
                while k < size {
                    *to.add(k as usize) = *from.add(k as usize);
                    k += block_dim_x() as u64;
                }
            }
            b += grid_dim_x() as u64;
        }
    }
}
