//! The merge history on the device (the kernel of
//! `kernels-rs/src/parhac/history.rs`): every round's matched edges,
//! appended as merges.

use super::launch;
use super::node_state::NodeState;
use super::slots::{grow, EdgeSlots};
use crate::Merge;
use gpu_waterz_abi::graph::EdgeKey;
use gpu_waterz_runtime::{DeviceBuffer, Gpu, Result};

/// The merge history on the device: the keys of `(a, b)` (`b` merged into
/// `a`, original ids) and the scores.
#[derive(Debug)]
pub(super) struct DeviceHistory {
    keys: DeviceBuffer<u64>,
    scores: DeviceBuffer<f64>,
    len: u64,
    /// Where each round's merges start, to sort them by `(a, b)` as the
    /// CPU ParHAC lists them, and whether they are sorted so (a serial
    /// finish's merges keep the order they happened in).
    segments: Vec<(u64, bool)>,
}

impl DeviceHistory {
    /// No merges yet.
    pub(super) fn new(gpu: &Gpu) -> Result<Self> {
        Ok(Self { keys: gpu.zeros(1)?, scores: gpu.zeros(1)?, len: 0, segments: Vec::new() })
    }

    /// The number of merges recorded.
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// Appends the merges of the slots the last round matched: their keys
    /// in original ids and their scores. The buffers grow as needed.
    pub(super) fn record(&mut self, gpu: &Gpu, slots: &EdgeSlots, state: &NodeState) -> Result<()> {
        let offset = self.len;
        let indices = launch::flagged_slots(gpu, &slots.matched, slots.n_slots())?;
        let n = indices.len();
        let needed = (offset + n) as usize;
        if self.keys.len() < needed {
            let capacity = needed.max(2 * self.keys.len());
            self.keys = grow(gpu, &self.keys, offset, capacity)?;
            self.scores = grow(gpu, &self.scores, offset, capacity)?;
        }
        launch::history(gpu, &slots.edges, &indices, state.original_ids(), offset, &mut self.keys, &mut self.scores)?;
        self.len += n;
        if self.len > offset {
            self.segments.push((offset, true));
        }
        Ok(())
    }

    /// Appends merges made on the host (original ids), in their order.
    pub(super) fn append(&mut self, gpu: &Gpu, merges: &[Merge]) -> Result<()> {
        let offset = self.len;
        let n = merges.len() as u64;
        if n == 0 {
            return Ok(());
        }
        let needed = (offset + n) as usize;
        if self.keys.len() < needed {
            let capacity = needed.max(2 * self.keys.len());
            self.keys = grow(gpu, &self.keys, offset, capacity)?;
            self.scores = grow(gpu, &self.scores, offset, capacity)?;
        }
        let keys: Vec<u64> = merges.iter().map(|m| EdgeKey::new(m.a, m.b).bits()).collect();
        let scores: Vec<f64> = merges.iter().map(|m| m.score).collect();
        gpu.upload_into(&mut self.keys, offset as usize, &keys)?;
        gpu.upload_into(&mut self.scores, offset as usize, &scores)?;
        self.len += n;
        self.segments.push((offset, false));
        Ok(())
    }

    /// The merges recorded since merge `start`, as waterz lists them: `b`
    /// merged into `a`, which stays the region's id (`c = a`); within a
    /// round in `(a, b)` order, as the CPU ParHAC's.
    pub(super) fn since(&self, gpu: &Gpu, start: u64) -> Result<Vec<Merge>> {
        let keys = gpu.download(&self.keys)?;
        let scores = gpu.download(&self.scores)?;
        let mut merges: Vec<Merge> = (0..self.len as usize)
            .map(|i| {
                let key = EdgeKey::from_bits(keys[i]);
                Merge { a: key.u(), b: key.v(), c: key.u(), score: scores[i] }
            })
            .collect();
        let ends = self.segments.iter().skip(1).map(|&(start, _)| start).chain([self.len]);
        for (&(start, sorted), end) in self.segments.iter().zip(ends) {
            if sorted {
                merges[start as usize..end as usize].sort_by_key(|m| (m.a, m.b));
            }
        }
        Ok(merges.split_off(start.min(self.len) as usize))
    }
}
