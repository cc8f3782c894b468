//! Step 5: the fragments numbered in index order of their smallest voxel
//! (waterz's scan order), and every voxel's label.

use crate::device::*;
use crate::primitives::{tile_compact, tile_sum};
use gpu_waterz_abi::watershed::{WsFragmentCountArgs, WsFragmentNumberArgs, WsLabelsArgs};

/// The root of `x` in a complete forest (no thread changes it any more),
/// without writes.
///
/// # Safety
/// `parent` indexes a forest over valid indices.
#[inline(always)]
pub(crate) unsafe fn find_root(parent: *const u32, mut x: u32) -> u32 {
    // SAFETY: the caller guarantees a forest over valid indices.
    unsafe {
        loop {
            let p = *parent.add(x as usize);
            if p == x {
                return x;
            }
            x = p;
        }
    }
}

kernel! {
    /// Labels, step 1: counts, per scan tile, the roots of
    /// non-background components (fragments), for [`ws_fragment_number`].
    ///
    /// # Safety
    /// `edges` and `parent` hold `n` entries, `parent` a complete forest
    /// (`uf_tile_faces` has run); `tile_sums` one u64 per scan tile;
    /// launched like `scan_tile_sums`.
    ///
    /// # Parameters
    /// - `edges`: remaining masks (0 = background); `parent`; `n`;
    ///   `tile_sums`: each tile's fragment count.
    ///
    /// # Thread mapping
    /// Block `b` owns scan tile `b`, thread `t` its voxels `t * SCAN_ITEMS ..`.
    pub unsafe extern "ptx-kernel" fn ws_fragment_count(
        edges: *const u8,
        parent: *const u32,
        n: u64,
        tile_sums: *mut u64,
    ) as WsFragmentCountArgs {
        // SAFETY: launched as documented; `i < n`.
        unsafe { tile_sum(n, |i| (*parent.add(i as usize) == i as u32 && *edges.add(i as usize) != 0) as u64, tile_sums) }
    }
}

kernel! {
    /// Labels, step 2: numbers the fragments: root `i` of the `k`-th non-background component
    /// in index order gets label `k + 1` (waterz's numbering by scan order),
    /// after an exclusive scan of [`ws_fragment_count`]'s counts.
    ///
    /// # Safety
    /// As [`ws_fragment_count`]; `tile_offsets` is the scan of its counts;
    /// `labels` holds `n` u32s.
    ///
    /// # Parameters
    /// - `edges`, `parent`, `n`; `tile_offsets`; `labels`: the roots' labels.
    ///
    /// # Thread mapping
    /// As [`ws_fragment_count`].
    pub unsafe extern "ptx-kernel" fn ws_fragment_number(
        edges: *const u8,
        parent: *const u32,
        n: u64,
        tile_offsets: *const u64,
        labels: *mut u32,
    ) as WsFragmentNumberArgs {
        // SAFETY: launched as documented; `i < n`.
        unsafe {
            tile_compact(
                n,
                |i| *parent.add(i as usize) == i as u32 && *edges.add(i as usize) != 0,
                tile_offsets,
                |i, pos| *labels.add(i as usize) = pos as u32 + 1,
            )
        }
    }
}

kernel! {
    /// Labels, step 3: background 0, else the label of the component's root
    /// (written by [`ws_fragment_number`]).
    ///
    /// # Safety
    /// `edges`, `parent`, `labels` hold `n` entries; `parent` is a complete
    /// forest; roots' labels are set.
    ///
    /// # Parameters
    /// - `edges`: remaining masks (0 = background); `parent`: the forest;
    ///   `labels`: completed in place.
    ///
    /// # Thread mapping
    /// Grid-stride loop.
    pub unsafe extern "ptx-kernel" fn ws_labels(
        edges: *const u8,
        parent: *const u32,
        n: u64,
        labels: *mut u32,
    ) as WsLabelsArgs {
        grid_stride(n, |i| {
            // SAFETY: indices in bounds; roots' labels were written by an
            // earlier launch, and nothing changes `parent` any more.
            unsafe {
                if *edges.add(i as usize) == 0 {
                    *labels.add(i as usize) = 0;
                } else {
                    let root = find_root(parent, i as u32);
                    if root != i as u32 {
                        *labels.add(i as usize) = *labels.add(root as usize);
                    }
                }
            }
        });
    }
}
