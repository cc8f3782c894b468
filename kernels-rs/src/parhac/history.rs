//! The merge history: the round's matched edges, appended as merges.

use super::load_edge;
use crate::device::*;
use gpu_waterz_abi::graph::EdgeKey;
use gpu_waterz_abi::parhac::{EndpointMap, PhHistoryArgs};

kernel! {
    /// Writes the merges of the matched slots `indices[0..n]` to the history
    /// at `offset`: the key of `(a, b) = (u, v)` (`v` merged into `u`) and the
    /// score; with [`EndpointMap::Lookup`], the endpoints are node ids of a
    /// renumbering and are written as `original[u]`, `original[v]`.
    ///
    /// # Safety
    /// `indices` holds `n` slot indices of edges; `out_keys` and `out_scores`
    /// hold at least `offset + n` elements; with [`EndpointMap::Lookup`], the
    /// endpoints index `original`.
    ///
    /// # Parameters
    /// - `keys`, `counts`, `sums`: the edge slots; `indices`, `n`: the matched
    ///   slots; `endpoints`, `original`: the renumbering; `offset`;
    ///   `out_keys`, `out_scores`: the history.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one merge per iteration.
    pub unsafe extern "ptx-kernel" fn ph_history(
        keys: *const u64,
        counts: *const u64,
        sums: *const u64,
        indices: *const u32,
        n: u64,
        endpoints: gpu_waterz_abi::parhac::EndpointMap,
        original: *const u32,
        offset: u64,
        out_keys: *mut u64,
        out_scores: *mut f64,
    ) as PhHistoryArgs {
        grid_stride(n, |i| {
            // SAFETY: `i < n`; the indices are slots of edges; the outputs hold
            // `offset + n` elements; endpoints index `original` when mapped.
            unsafe {
                let e = *indices.add(i as usize) as u64;
                if let Some((key, score)) = load_edge(keys, counts, sums, e) {
                    let key = match endpoints {
                        EndpointMap::Lookup => {
                            EdgeKey::new(*original.add(key.u() as usize) as u64, *original.add(key.v() as usize) as u64)
                        }
                        EndpointMap::Identity => key,
                    };
                    *out_keys.add((offset + i) as usize) = key.bits();
                    *out_scores.add((offset + i) as usize) = score;
                }
            }
        });
    }
}
