//! Dense node ids at ε = 0: the nodes with edges are renumbered `0..m` in
//! increasing order, and their merges are copied back into the state of
//! all nodes.

use crate::device::*;
use gpu_waterz_abi::graph::EdgeKey;
use gpu_waterz_abi::parhac::{PhCommitArgs, PhMarkEndpointsArgs, PhScatterIdsArgs, PhTranslateKeysArgs};

kernel! {
    /// Sets `flags[x] = 1` for both endpoints `x` of every edge (holes
    /// skipped): the nodes a renumbering keeps.
    ///
    /// # Safety
    /// `keys` holds `n_slots` key bits whose endpoints index `flags`.
    ///
    /// # Parameters
    /// - `keys`, `n_slots`: the edge slots; `flags`: zeroed, one per node.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one slot per iteration.
    pub unsafe extern "ptx-kernel" fn ph_mark_endpoints(
        keys: *const u64,
        n_slots: u64,
        flags: *mut u32,
    ) as PhMarkEndpointsArgs {
        grid_stride(n_slots, |e| {
            // SAFETY: `e < n_slots`; endpoints index `flags`.
            unsafe {
                let key = EdgeKey::from_bits(*keys.add(e as usize));
                if !key.is_empty() {
                    *flags.add(key.u() as usize) = 1;
                    *flags.add(key.v() as usize) = 1;
                }
            }
        });
    }
}

kernel! {
    /// The inverse of a renumbering: `new_of_old[old_of_new[k]] = k`.
    ///
    /// # Safety
    /// `old_of_new` holds `m` distinct ids below the length of `new_of_old`.
    ///
    /// # Parameters
    /// - `old_of_new`, `m`: the kept nodes in order; `new_of_old`: output
    ///   (entries of nodes not kept are left as they were).
    ///
    /// # Thread mapping
    /// Grid-stride loop, one kept node per iteration.
    pub unsafe extern "ptx-kernel" fn ph_scatter_ids(
        old_of_new: *const u32,
        m: u64,
        new_of_old: *mut u32,
    ) as PhScatterIdsArgs {
        // SAFETY: `k < m`; the ids index `new_of_old`.
        grid_stride(m, |k| unsafe { *new_of_old.add(*old_of_new.add(k as usize) as usize) = k as u32 });
    }
}

kernel! {
    /// Renumbers the edges' endpoints in place: key `(u, v)` becomes
    /// `(new_of_old[u], new_of_old[v])` (holes stay holes). The renumbering is
    /// increasing, so `u < v` still holds and every comparison of ids or keys
    /// is unchanged.
    ///
    /// # Safety
    /// `keys` holds `n_slots` key bits whose endpoints index `new_of_old`,
    /// where they have been set.
    ///
    /// # Parameters
    /// - `keys`, `n_slots`: the edge slots; `new_of_old`: the renumbering.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one slot per iteration.
    pub unsafe extern "ptx-kernel" fn ph_translate_keys(
        keys: *mut u64,
        n_slots: u64,
        new_of_old: *const u32,
    ) as PhTranslateKeysArgs {
        grid_stride(n_slots, |e| {
            // SAFETY: `e < n_slots`; endpoints index `new_of_old`.
            unsafe {
                let key = EdgeKey::from_bits(*keys.add(e as usize));
                if !key.is_empty() {
                    let u = *new_of_old.add(key.u() as usize) as u64;
                    let v = *new_of_old.add(key.v() as usize) as u64;
                    *keys.add(e as usize) = EdgeKey::new(u, v).bits();
                }
            }
        });
    }
}

kernel! {
    /// Copies the merges of renumbered nodes `0..n` into the merge forest and
    /// merge tags of all nodes: for a node `x` that merged into `parent[x]`,
    /// `all_parent[original[x]] = original[parent[x]]`; a node's non-zero tag
    /// goes to `all_touched[original[x]]`.
    ///
    /// # Safety
    /// `parent`, `touched` and `original` hold `n` entries; the parents are
    /// below `n`; `original` holds distinct ids below the length of
    /// `all_parent` and `all_touched`.
    ///
    /// # Parameters
    /// - `parent`, `touched`, `original`, `n`: the renumbered nodes;
    ///   `all_parent`, `all_touched`: the state of all nodes.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one renumbered node per iteration.
    pub unsafe extern "ptx-kernel" fn ph_commit(
        parent: *const u32,
        touched: *const u32,
        original: *const u32,
        n: u64,
        all_parent: *mut u32,
        all_touched: *mut u32,
    ) as PhCommitArgs {
        grid_stride(n, |x| {
            // SAFETY: `x < n`; parents are renumbered ids below `n`; original
            // ids index the full arrays.
            unsafe {
                let id = *original.add(x as usize) as usize;
                let p = *parent.add(x as usize);
                if p != x as u32 {
                    *all_parent.add(id) = *original.add(p as usize);
                }
                let tag = *touched.add(x as usize);
                if tag != 0 {
                    *all_touched.add(id) = tag;
                }
            }
        });
    }
}
