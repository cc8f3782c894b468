//! zstd frames of uint32 label chunks, one zstd block per thread, with the
//! encoder of `gpu_waterz_abi::frames` that host tests run as it is.

use crate::device::*;
use gpu_waterz_abi::frames::{
    encode_block_with, FrameGeometry, GatherFrameBlocksArgs, LabelFrameBlocksArgs, BLOCK_VOXELS, SLOT_BYTES,
};

kernel! {
    /// Encodes each zstd block of the frame of a chunk's labels into its
    /// slot (`gpu_waterz_abi::frames::encode_block`) and writes its size.
    ///
    /// # Safety
    /// `labels` holds `geometry.voxels` u32s (at least one); `slots` holds
    /// `SLOT_BYTES`, `sequences` `BLOCK_VOXELS` u32s and `sizes` one u32
    /// per zstd block (`geometry.blocks()`); the thread blocks are whole
    /// warps.
    ///
    /// # Parameters
    /// - `labels`, `geometry`: the chunk (C order) and its repeats.
    /// - `slots`, `sequences`: each block's output and room for its sequences.
    /// - `sizes`: the bytes each block wrote into its slot.
    ///
    /// # Thread mapping
    /// One warp per zstd block, grid-stride over blocks. Every lane runs
    /// the encoder alike (the same values, written to the same places);
    /// the matches' lengths are counted 32 voxels at a time, one per lane,
    /// the first unequal one found by a ballot.
    pub unsafe extern "ptx-kernel" fn label_frame_blocks(
        labels: *const u32,
        geometry: FrameGeometry,
        slots: *mut u8,
        sequences: *mut u32,
        sizes: *mut u32,
    ) as LabelFrameBlocksArgs {
        let blocks = geometry.blocks();
        let lane = (thread_idx_x() % 32) as usize;
        let warps_per_block = (block_dim_x() / 32) as u64;
        let mut b = block_idx_x() as u64 * warps_per_block + (thread_idx_x() / 32) as u64;
        let stride = grid_dim_x() as u64 * warps_per_block;
        // SAFETY: the caller gives one label per voxel.
        let values = unsafe { core::slice::from_raw_parts(labels, geometry.voxels as usize) };
        let length = |p: usize, d: usize, end: usize| -> usize {
            let mut k = 0;
            loop {
                let i = p + k + lane;
                // SAFETY: `d <= p <= i` and `i < end <= voxels` where read.
                let equal = i < end && unsafe { *labels.add(i) == *labels.add(i - d) };
                // SAFETY: every lane of the warp counts the same match.
                let differs = unsafe { ballot(!equal) };
                if differs != 0 {
                    return k + differs.trailing_zeros() as usize;
                }
                k += 32;
            }
        };
        while b < blocks {
            // SAFETY: each block's slot and room for sequences are its own
            // and inside the buffers (the caller sizes them per block).
            unsafe {
                let slot = core::slice::from_raw_parts_mut(slots.add((b * SLOT_BYTES) as usize), SLOT_BYTES as usize);
                let room =
                    core::slice::from_raw_parts_mut(sequences.add((b * BLOCK_VOXELS) as usize), BLOCK_VOXELS as usize);
                let size = encode_block_with(values, &geometry, b, b + 1 == blocks, slot, room, length);
                *sizes.add(b as usize) = size as u32;
            }
            b += stride;
        }
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
