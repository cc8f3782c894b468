//! The current graph as edge slots, with the scratch of the rounds: the
//! hash table of the contractions, the round counters, and the edges
//! parked until a threshold's end.

use gpu_waterz_abi::parhac::{hash_table_len, RoundCounts, ROUND_COUNTS_LEN, SENTINEL_BYTE};
use gpu_waterz_graph::gpu::DeviceEdges;
use gpu_waterz_runtime::{DeviceBuffer, DeviceElement, Gpu, Result, RuntimeError};

/// The most rounds that may be queued before [`read_counts`] collects
/// their counts.
pub(super) const MAX_BATCH: usize = 64;

/// Edge slots `0..len` in three parallel buffers: `EdgeKey` bits (or
/// `EdgeKey::EMPTY` for a hole), contact counts and fixed-point sums.
///
/// Invariant, relied on by every kernel that indexes a per-node array with
/// an endpoint: each buffer holds at least `len` elements, and every slot
/// below `len` holds a hole or an edge `(u, v)` with `u < v < node_bound`.
/// Slots are filled only from a [`DeviceEdges`] (checked), by the gathers
/// of the `launch` module (which append whole copies), by kernels that
/// rewrite keys with ids below the bound they are given, and by the serial
/// finish (`host_finish`, which checks its keys against the bound).
#[derive(Debug)]
pub(super) struct EdgeArrays {
    pub(super) keys: DeviceBuffer<u64>,
    pub(super) counts: DeviceBuffer<u64>,
    pub(super) sums: DeviceBuffer<u64>,
    /// Slots in use.
    pub(super) len: u64,
    /// Every endpoint is below it: per-node arrays need this many entries.
    pub(super) node_bound: u64,
}

impl EdgeArrays {
    /// The edges of a checked edge list, over its nodes.
    pub(super) fn from_edges(edges: DeviceEdges) -> Self {
        let (len, node_bound) = (edges.n_edges(), edges.n_nodes());
        let (keys, counts, sums) = edges.into_buffers();
        Self { keys, counts, sums, len, node_bound }
    }

    /// No slots, with room for one.
    pub(super) fn empty(gpu: &Gpu, node_bound: u64) -> Result<Self> {
        Ok(Self { keys: gpu.zeros(1)?, counts: gpu.zeros(1)?, sums: gpu.zeros(1)?, len: 0, node_bound })
    }

    /// No slots, with room for `n` (filled by gathers).
    pub(super) fn with_capacity(gpu: &Gpu, n: u64, node_bound: u64) -> Result<Self> {
        let len = n.max(1) as usize;
        Ok(Self { keys: gpu.uninit(len)?, counts: gpu.uninit(len)?, sums: gpu.uninit(len)?, len: 0, node_bound })
    }

    /// The slots the buffers have room for.
    pub(super) fn capacity(&self) -> u64 {
        self.keys.len().min(self.counts.len()).min(self.sums.len()) as u64
    }
}

/// The hash table of the contractions: its first `mask + 1` entries are in
/// use, a power of two at least twice the slots deduplicated.
///
/// Invariant: with `pending` `None`, every entry is empty (`EdgeKey::EMPTY`,
/// `NO_SLOT`); with `Some(n)`, the last contraction ran over `n` slots, and
/// the entries it used are the ones named by the first `n` entries of
/// `slot_of` (each below `mask + 1`, or `NO_SLOT`), whose representatives
/// are slot indices below `n`. Only the `launch` module changes `pending`.
#[derive(Debug)]
pub(super) struct HashTable {
    pub(super) keys: DeviceBuffer<u64>,
    pub(super) rep: DeviceBuffer<u32>,
    pub(super) mask: u64,
    /// Per slot: the table entry of the last contraction, or `NO_SLOT`.
    pub(super) slot_of: DeviceBuffer<u32>,
    pub(super) pending: Option<u64>,
}

/// The entries of an empty table of `len` entries (a power of two): every
/// key `EdgeKey::EMPTY`, every representative `NO_SLOT` (all bytes
/// [`SENTINEL_BYTE`]).
fn empty_entries(gpu: &Gpu, len: u64) -> Result<(DeviceBuffer<u64>, DeviceBuffer<u32>)> {
    let mut keys = gpu.uninit::<u64>(len as usize)?;
    gpu.memset_bytes(&mut keys, SENTINEL_BYTE)?;
    let mut rep = gpu.uninit::<u32>(len as usize)?;
    gpu.memset_bytes(&mut rep, SENTINEL_BYTE)?;
    Ok((keys, rep))
}

/// The current graph as edge slots, with the scratch of the rounds: the
/// first `edges.len` slots hold edges or holes. The per-slot scratch is
/// allocated once for the initial graph, which no later graph outgrows.
#[derive(Debug)]
pub(super) struct EdgeSlots {
    pub(super) edges: EdgeArrays,
    /// Per slot: matched by the last round.
    pub(super) matched: DeviceBuffer<u32>,
    /// Per slot: an endpoint cannot merge at this threshold, as the last
    /// round at ε = 0 found.
    pub(super) park_flags: DeviceBuffer<u32>,
    /// Per slot, only for ε > 0: (1+ε)-heavy.
    pub(super) eligible: Option<DeviceBuffer<u32>>,
    pub(super) table: HashTable,
    /// [`MAX_BATCH`] consecutive [`RoundCounts`].
    pub(super) counters: DeviceBuffer<u64>,
}

impl EdgeSlots {
    /// Takes `edges` (without holes) as the slots; the hash table holds
    /// twice as many entries as edges. `with_epsilon` allocates the
    /// eligibility flags of (1+ε)-heavy matchings.
    pub(super) fn new(gpu: &Gpu, edges: DeviceEdges, with_epsilon: bool) -> Result<Self> {
        if edges.n_edges() >= u32::MAX as u64 {
            return Err(RuntimeError::InvalidLaunch {
                kernel: "ParHAC",
                reason: format!("{} edges: slot indices are u32", edges.n_edges()),
            });
        }
        let edges = EdgeArrays::from_edges(edges);
        let capacity = edges.len.max(1) as usize;
        let table_len = hash_table_len(edges.len);
        let (table_keys, table_rep) = empty_entries(gpu, table_len)?;
        let slot_of = gpu.uninit(capacity)?;
        let table = HashTable { keys: table_keys, rep: table_rep, mask: table_len - 1, slot_of, pending: None };
        Ok(Self {
            edges,
            matched: gpu.uninit(capacity)?,
            park_flags: gpu.uninit(capacity)?,
            eligible: if with_epsilon { Some(gpu.uninit(capacity)?) } else { None },
            table,
            counters: gpu.zeros(ROUND_COUNTS_LEN * MAX_BATCH)?,
        })
    }

    /// The number of slots in use (edges and holes).
    pub(super) fn n_slots(&self) -> u64 {
        self.edges.len
    }

    /// The most slots the per-slot scratch holds.
    pub(super) fn capacity(&self) -> u64 {
        self.table.slot_of.len() as u64
    }

    /// Fits the hash table to deduplicating `n` edges: the table is
    /// allocated once for the initial graph (edges only ever become fewer),
    /// and only its first entries are used, a power of two at least twice
    /// `n`, so that as the graph contracts the table's random accesses stay
    /// in the GPU's cache. The table must be clean (every entry empty, as
    /// it is whenever no contraction's entries are pending).
    pub(super) fn fit_table(&mut self, n: u64) -> Result<()> {
        if self.table.pending.is_some() {
            return Err(RuntimeError::InvalidLaunch {
                kernel: "ph_relabel_insert",
                reason: "the hash table is resized while entries are pending".into(),
            });
        }
        let len = hash_table_len(n);
        if len > self.table.keys.len() as u64 || len > self.table.rep.len() as u64 {
            return Err(RuntimeError::InvalidLaunch {
                kernel: "ph_relabel_insert",
                reason: format!("{n} edges exceed the capacity the slots were made for"),
            });
        }
        self.table.mask = len - 1;
        Ok(())
    }
}

/// The counts of the first `k` rounds queued since the last call
/// (downloaded, so this synchronizes), then resets them.
pub(super) fn read_counts(gpu: &Gpu, slots: &mut EdgeSlots, k: usize) -> Result<Vec<RoundCounts>> {
    let c = gpu.download(&slots.counters)?;
    gpu.memset_zero(&mut slots.counters)?;
    let rounds = c.chunks(ROUND_COUNTS_LEN).take(k.min(MAX_BATCH));
    Ok(rounds.map(|c| RoundCounts { n_merged: c[0], n_parkable: c[1], n_removed: c[2] }).collect())
}

/// Edges set aside during a threshold: an endpoint can no longer merge,
/// so they wait, with their keys in original ids, for the threshold's end.
/// The buffers grow to the graph's size once and are reused.
#[derive(Debug)]
pub(super) struct ParkedEdges {
    pub(super) edges: EdgeArrays,
}

impl ParkedEdges {
    /// No edges, over nodes `0..n_nodes`.
    pub(super) fn new(gpu: &Gpu, n_nodes: u64) -> Result<Self> {
        Ok(Self { edges: EdgeArrays::empty(gpu, n_nodes)? })
    }

    /// The number of parked edges.
    pub(super) fn len(&self) -> u64 {
        self.edges.len
    }

    /// Room for `needed` edges, keeping the parked ones; grows to at least
    /// `hint` (the graph's size, which parked edges never exceed).
    pub(super) fn reserve(&mut self, gpu: &Gpu, needed: u64, hint: u64) -> Result<()> {
        if needed <= self.edges.capacity() {
            return Ok(());
        }
        let capacity = needed.max(hint) as usize;
        let len = self.edges.len;
        self.edges.keys = grow(gpu, &self.edges.keys, len, capacity)?;
        self.edges.counts = grow(gpu, &self.edges.counts, len, capacity)?;
        self.edges.sums = grow(gpu, &self.edges.sums, len, capacity)?;
        Ok(())
    }
}

/// A zeroed buffer of `capacity` elements starting with the first `len`
/// of `old`. The runtime copies whole buffers only, so the kept elements
/// go through the host (parked edges never need it: they grow once, while
/// empty, to the graph's size; the merge history does, as it doubles).
pub(super) fn grow<T: DeviceElement>(
    gpu: &Gpu,
    old: &DeviceBuffer<T>,
    len: u64,
    capacity: usize,
) -> Result<DeviceBuffer<T>> {
    let mut new = gpu.zeros::<T>(capacity.max(1))?;
    gpu.copy_prefix(old, &mut new, len as usize)?;
    Ok(new)
}
