//! The one device edge list: the region graph's edges, as the GPU builds
//! them and as ParHAC takes them, with the checks that let kernels index
//! per-node arrays with every endpoint.

use crate::GraphError;
use gpu_waterz_abi::graph::EdgeKey;
use gpu_waterz_core::ContactStats;
use gpu_waterz_runtime::primitives::{digit_shifts, radix_sort_pairs, reduce_by_key, ReducedRuns};
use gpu_waterz_runtime::{DeviceBuffer, Gpu};
use rayon::prelude::*;

/// The most nodes an edge list may have: every endpoint fits the 32 bits
/// of its half of an [`EdgeKey`].
pub const MAX_NODES: u64 = 1 << 32;

/// A region graph's edges in device memory: [`EdgeKey`] bits, contact
/// counts and fixed-point affinity sums, over nodes `0..n_nodes`.
///
/// Every value of this type holds, for its first `n_edges` elements (the
/// buffers hold at least that many): edges `(u, v)` with
/// `u < v < n_nodes <= MAX_NODES`, strictly ascending by `(u, v)`
/// (waterz's order), so that no two edges share a key and none is
/// [`EdgeKey::EMPTY`]. GPU stages index per-node arrays of `n_nodes`
/// entries with every endpoint and rely on this; the fields are private,
/// and the constructors check it ([`DeviceEdges::upload`],
/// [`DeviceEdges::from_device`]) or build it ([`super::region_graph`]).
#[derive(Debug)]
pub struct DeviceEdges {
    keys: DeviceBuffer<u64>,
    counts: DeviceBuffer<u64>,
    sums: DeviceBuffer<u64>,
    n_edges: u64,
    n_nodes: u64,
    n_entries: u64,
}

/// A region graph downloaded to the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostRegionGraph {
    /// Edges `[u, v]`, `u < v`, sorted.
    pub edges: Vec<[u64; 2]>,
    /// Their statistics.
    pub stats: Vec<ContactStats>,
}

/// Checks that `edges` can be a [`DeviceEdges`] over `n_nodes` nodes:
/// `n_nodes <= MAX_NODES`, and every edge `[u, v]` has `u < v < n_nodes`,
/// in strictly ascending order (so no edge repeats). Runs on the host
/// only: nothing is launched for a graph that fails it.
pub fn validate_edges(edges: &[[u64; 2]], n_nodes: u64) -> Result<(), GraphError> {
    check_edges(edges.len(), |i| edges[i], n_nodes)
}

fn invalid(reason: String) -> GraphError {
    GraphError::InvalidGraph(reason)
}

/// The check of [`validate_edges`] over `len` edges given by `edge`, on
/// every thread; the error names the first edge that fails, as a walk in
/// order would.
fn check_edges(len: usize, edge: impl Fn(usize) -> [u64; 2] + Sync, n_nodes: u64) -> Result<(), GraphError> {
    if n_nodes > MAX_NODES {
        return Err(invalid(format!("{n_nodes} nodes: node ids must fit 32 bits (at most {MAX_NODES} nodes)")));
    }
    let bad = |i: usize| {
        let [u, v] = edge(i);
        u >= v || v >= n_nodes || (i > 0 && edge(i - 1) >= [u, v])
    };
    let Some(i) = gpu_waterz_core::parallel::first_index(len, bad) else {
        return Ok(());
    };
    let [u, v] = edge(i);
    if u >= v {
        return Err(invalid(format!("edge {i} is ({u}, {v}): edges are (u, v) with u < v")));
    }
    if v >= n_nodes {
        return Err(invalid(format!("edge {i} is ({u}, {v}): node {v} is not below the {n_nodes} nodes")));
    }
    let [pu, pv] = edge(i - 1);
    Err(invalid(format!("edge {i} ({u}, {v}) follows ({pu}, {pv}): edges must be sorted by (u, v), each once")))
}

/// Fails unless `buffer` holds at least `n` elements.
fn check_buffer(what: &str, buffer: &DeviceBuffer<u64>, n: u64) -> Result<(), GraphError> {
    if (buffer.len() as u64) < n {
        return Err(invalid(format!("{what} holds {} elements, {n} edges need as many", buffer.len())));
    }
    Ok(())
}

/// A host vector with at least one element (device buffers are never empty).
fn non_empty(mut values: Vec<u64>) -> Vec<u64> {
    if values.is_empty() {
        values.push(0);
    }
    values
}

/// One part of a region graph's entries ([`DeviceEdges::sum_parts`]): edge
/// keys ([`EdgeKey`] bits) strictly ascending, each with its contact count
/// and fixed-point affinity sum (one block's pairs in the blockwise decode).
#[derive(Clone, Copy, Debug)]
pub struct EdgeEntries<'a> {
    /// Edge keys, strictly ascending.
    pub keys: &'a [u64],
    /// Contact counts, one per key.
    pub counts: &'a [u64],
    /// Fixed-point affinity sums, one per key.
    pub sums: &'a [u64],
}

/// [`DeviceEdges::sum_parts`]'s checks on the host: an error for malformed
/// parts, else whether the device's 64-bit sums are exact (the parts'
/// largest counts add up to fewer than 2^32 faces and their largest sums to
/// less than 2^64).
fn parts_sum_exactly(parts: &[EdgeEntries<'_>], n_nodes: u64) -> Result<bool, GraphError> {
    if n_nodes > MAX_NODES {
        return Err(invalid(format!("{n_nodes} nodes: node ids must fit 32 bits (at most {MAX_NODES} nodes)")));
    }
    let checked: Vec<Result<(u64, u64), GraphError>> = parts
        .par_iter()
        .enumerate()
        .map(|(p, part)| {
            let n = part.keys.len();
            if part.counts.len() != n || part.sums.len() != n {
                return Err(invalid(format!(
                    "part {p}: {n} keys with {} counts and {} sums",
                    part.counts.len(),
                    part.sums.len()
                )));
            }
            let bad = |i: usize| {
                let [u, v] = EdgeKey::from_bits(part.keys[i]).endpoints();
                u >= v || v >= n_nodes || (i > 0 && part.keys[i - 1] >= part.keys[i])
            };
            if let Some(i) = gpu_waterz_core::parallel::first_index(n, bad) {
                let [u, v] = EdgeKey::from_bits(part.keys[i]).endpoints();
                return Err(invalid(format!(
                    "part {p}, entry {i}: edge ({u}, {v}) is not a pair u < v < {n_nodes} after the part's last"
                )));
            }
            let largest = |column: &[u64]| column.par_iter().copied().max().unwrap_or(0);
            Ok((largest(part.counts), largest(part.sums)))
        })
        .collect();
    let (mut counts_bound, mut sums_bound) = (0u128, 0u128);
    for largest in checked {
        let (count, sum) = largest?;
        counts_bound += u128::from(count);
        sums_bound += u128::from(sum);
    }
    Ok(counts_bound < 1 << 32 && sums_bound < 1 << 64)
}

impl DeviceEdges {
    /// The region graph over nodes `0..n_nodes` whose statistics are the
    /// sums of every part's, summed on the device: the keys sorted (radix
    /// sort over the digits the node ids use, once with the counts beside
    /// them and once with the sums) and each run of equal keys reduced,
    /// which gives every edge once, ascending by `(u, v)`, with exactly the
    /// host's integer sums. Checked on the host before anything is copied:
    /// the parts' columns are of equal length, each part's keys strictly
    /// ascending, and every key a pair `u < v < n_nodes <= MAX_NODES`. An
    /// edge is in each part at most once, so its summed count (sum) is at
    /// most the parts' largest counts (sums) added up: where those bounds
    /// reach 2^32 faces or 2^64, the device's 64-bit sums might wrap, and
    /// the answer is `None`, nothing copied, for the caller to sum on the
    /// host with checked arithmetic.
    pub fn sum_parts(gpu: &Gpu, parts: &[EdgeEntries<'_>], n_nodes: u64) -> Result<Option<Self>, GraphError> {
        if !parts_sum_exactly(parts, n_nodes)? {
            return Ok(None);
        }
        let total: usize = parts.iter().map(|p| p.keys.len()).sum();
        if total == 0 {
            return Ok(Some(Self {
                keys: gpu.zeros(1)?,
                counts: gpu.zeros(1)?,
                sums: gpu.zeros(1)?,
                n_edges: 0,
                n_nodes,
                n_entries: 0,
            }));
        }
        // Column 0, 1 or 2 (keys, counts, sums) of every part, one after the
        // other, on the device.
        let gather = |column: usize| -> Result<DeviceBuffer<u64>, GraphError> {
            let columns: Vec<&[u64]> = parts.iter().map(|part| [part.keys, part.counts, part.sums][column]).collect();
            Ok(gpu.upload_concatenated(&columns)?)
        };
        let keys = gather(0)?;
        let keys_again = gpu.duplicate(&keys)?;
        let node_bits = 64 - (n_nodes - 1).leading_zeros();
        let shifts = digit_shifts(node_bits, node_bits);
        let n = total as u64;
        let (sorted, counts) = radix_sort_pairs(gpu, keys, gather(1)?, n, &shifts)?;
        let by_count = reduce_by_key(gpu, &sorted, &counts, n)?;
        drop((sorted, counts));
        let (sorted, sums) = radix_sort_pairs(gpu, keys_again, gather(2)?, n, &shifts)?;
        let by_sum = reduce_by_key(gpu, &sorted, &sums, n)?;
        if by_count.n_runs != by_sum.n_runs {
            return Err(invalid(format!("the keys sorted twice gave {} and {} edges", by_count.n_runs, by_sum.n_runs)));
        }
        // Each reduction's `sums` are the summed values beside the keys:
        // the counts', then the sums'.
        Ok(Some(Self {
            keys: by_count.keys,
            counts: by_count.sums,
            sums: by_sum.sums,
            n_edges: by_count.n_runs,
            n_nodes,
            n_entries: n,
        }))
    }
}

impl DeviceEdges {
    /// The region graph's edges, from its reduce-by-key (crate-internal and
    /// trusted, not checked): every key is a pair of distinct non-zero
    /// labels of fragments whose labels are at most `n_nodes - 1`, ordered
    /// `(min, max)` by `rg_tile_entries`; the radix sort over every digit
    /// of the labels' bits sorts them and the reduce-by-key keeps one per
    /// run, so they are strictly ascending with `u < v < n_nodes`.
    pub(crate) fn from_region_graph(runs: ReducedRuns, n_nodes: u64, n_entries: u64) -> Self {
        let ReducedRuns { keys, counts, sums, n_runs } = runs;
        Self { keys, counts, sums, n_edges: n_runs, n_nodes, n_entries }
    }

    /// Uploads edges `[u, v]` with their statistics, over nodes
    /// `0..n_nodes`, after checking them ([`validate_edges`], and one
    /// statistic per edge) on the host: a malformed graph is an error, and
    /// nothing is copied or launched.
    pub fn upload(gpu: &Gpu, edges: &[[u64; 2]], stats: &[ContactStats], n_nodes: u64) -> Result<Self, GraphError> {
        if stats.len() != edges.len() {
            return Err(invalid(format!("{} edges with {} statistics", edges.len(), stats.len())));
        }
        validate_edges(edges, n_nodes)?;
        let keys = edges.par_iter().map(|&[u, v]| EdgeKey::new(u, v).bits()).collect();
        let counts = stats.par_iter().map(|s| s.contact_count).collect();
        let sums = stats.par_iter().map(|s| s.affinity_sum).collect();
        Ok(Self {
            keys: gpu.upload(&non_empty(keys))?,
            counts: gpu.upload(&non_empty(counts))?,
            sums: gpu.upload(&non_empty(sums))?,
            n_edges: edges.len() as u64,
            n_nodes,
            n_entries: edges.len() as u64,
        })
    }

    /// Takes edges already on the device (the first `n_edges` of each
    /// buffer: [`EdgeKey`] bits, contact counts, fixed-point sums) over
    /// nodes `0..n_nodes`, after downloading the keys and checking them as
    /// [`validate_edges`] does (this synchronizes; nothing is launched).
    pub fn from_device(
        gpu: &Gpu,
        keys: DeviceBuffer<u64>,
        counts: DeviceBuffer<u64>,
        sums: DeviceBuffer<u64>,
        n_edges: u64,
        n_nodes: u64,
    ) -> Result<Self, GraphError> {
        for (what, buffer) in [("the key buffer", &keys), ("the count buffer", &counts), ("the sum buffer", &sums)] {
            gpu.check_device(buffer, what)?;
        }
        check_buffer("the key buffer", &keys, n_edges)?;
        check_buffer("the count buffer", &counts, n_edges)?;
        check_buffer("the sum buffer", &sums, n_edges)?;
        if n_nodes > MAX_NODES {
            return Err(invalid(format!("{n_nodes} nodes: node ids must fit 32 bits (at most {MAX_NODES} nodes)")));
        }
        let host_keys = gpu.download(&keys)?;
        check_edges(n_edges as usize, |i| EdgeKey::from_bits(host_keys[i]).endpoints(), n_nodes)?;
        Ok(Self { keys, counts, sums, n_edges, n_nodes, n_entries: n_edges })
    }

    /// A copy on the device (the same edges, checked already).
    pub fn duplicate(&self, gpu: &Gpu) -> Result<Self, GraphError> {
        Ok(Self {
            keys: gpu.duplicate(&self.keys)?,
            counts: gpu.duplicate(&self.counts)?,
            sums: gpu.duplicate(&self.sums)?,
            ..*self
        })
    }

    /// Fails unless the edges live on `gpu`'s device.
    pub fn check_device(&self, gpu: &Gpu) -> Result<(), GraphError> {
        gpu.check_device(&self.keys, "the edges")?;
        Ok(())
    }

    /// The number of edges.
    pub fn n_edges(&self) -> u64 {
        self.n_edges
    }

    /// The number of nodes: every endpoint is below it.
    pub fn n_nodes(&self) -> u64 {
        self.n_nodes
    }

    /// The tile-aggregated face entries the GPU region graph sorted (for
    /// edges given otherwise, the number of edges).
    pub fn n_entries(&self) -> u64 {
        self.n_entries
    }

    /// The buffers (keys, counts, sums), giving up the edge list: a stage
    /// that takes the edges over, such as ParHAC, keeps their invariants
    /// itself.
    pub fn into_buffers(self) -> (DeviceBuffer<u64>, DeviceBuffer<u64>, DeviceBuffer<u64>) {
        let Self { keys, counts, sums, .. } = self;
        (keys, counts, sums)
    }

    /// Copies the graph to the host.
    pub fn download(&self, gpu: &Gpu) -> Result<HostRegionGraph, GraphError> {
        let n = self.n_edges as usize;
        let keys = gpu.download_prefix(&self.keys, n)?;
        let counts = gpu.download_prefix(&self.counts, n)?;
        let sums = gpu.download_prefix(&self.sums, n)?;
        HostRegionGraph::from_parts(&keys, &counts, &sums)
    }

    /// Copies the graph's three arrays ([`EdgeKey`] bits, contact counts,
    /// fixed-point sums) into `keys`, `counts` and `sums`, which must hold
    /// [`DeviceEdges::n_edges`] values each: for a caller that downloads
    /// into page-locked memory inside its turn on the GPU and makes the
    /// [`HostRegionGraph`] after it ([`HostRegionGraph::from_parts`]).
    pub fn download_parts_into(
        &self,
        gpu: &Gpu,
        keys: &mut [u64],
        counts: &mut [u64],
        sums: &mut [u64],
    ) -> Result<(), GraphError> {
        let n = self.n_edges as usize;
        if keys.len() != n || counts.len() != n || sums.len() != n {
            return Err(invalid(format!(
                "room for {}, {} and {} values of a graph of {n} edges",
                keys.len(),
                counts.len(),
                sums.len()
            )));
        }
        gpu.download_to_slice(&self.keys, keys)?;
        gpu.download_to_slice(&self.counts, counts)?;
        gpu.download_to_slice(&self.sums, sums)?;
        Ok(())
    }
}

impl HostRegionGraph {
    /// The graph from the arrays [`DeviceEdges::download_parts_into`]
    /// wrote (keys as [`EdgeKey`] bits, contact counts, fixed-point sums;
    /// equal lengths), made on the calling thread's rayon pool.
    pub fn from_parts(keys: &[u64], counts: &[u64], sums: &[u64]) -> Result<Self, GraphError> {
        if counts.len() != keys.len() || sums.len() != keys.len() {
            return Err(invalid(format!("{} keys with {} counts and {} sums", keys.len(), counts.len(), sums.len())));
        }
        Ok(Self {
            edges: keys.par_iter().map(|&k| EdgeKey::from_bits(k).endpoints()).collect(),
            stats: counts
                .par_iter()
                .zip(sums)
                .map(|(&contact_count, &affinity_sum)| ContactStats { contact_count, affinity_sum })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host graph made from downloaded arrays: each key's endpoints
    /// with its count and sum, in order; arrays of different lengths are
    /// refused.
    #[test]
    fn graphs_are_made_from_their_parts() {
        let keys = [EdgeKey::new(1, 2).bits(), EdgeKey::new(1, 7).bits(), EdgeKey::new(3, 4_000_000_000).bits()];
        let graph = HostRegionGraph::from_parts(&keys, &[5, 6, 7], &[50, 60, 70]).unwrap();
        assert_eq!(graph.edges, vec![[1, 2], [1, 7], [3, 4_000_000_000]]);
        let stats: Vec<(u64, u64)> = graph.stats.iter().map(|s| (s.contact_count, s.affinity_sum)).collect();
        assert_eq!(stats, vec![(5, 50), (6, 60), (7, 70)]);
        assert_eq!(HostRegionGraph::from_parts(&[], &[], &[]).unwrap().edges.len(), 0);
        let e = HostRegionGraph::from_parts(&keys, &[5, 6], &[50, 60, 70]).unwrap_err().to_string();
        assert!(e.contains("3 keys with 2 counts and 3 sums"), "{e}");
    }

    /// Parts sum exactly on the device while the parts' largest counts add
    /// up to fewer than 2^32 and their largest sums to less than 2^64;
    /// malformed parts are errors (columns of other lengths, keys not
    /// ascending or repeated, self-loops, nodes out of range, too many
    /// nodes).
    #[test]
    fn parts_sum_exactly_within_the_bounds_and_malformed_ones_are_errors() {
        let key = |u, v| EdgeKey::new(u, v).bits();
        let keys = [key(1, 2), key(1, 3), key(2, 3)];
        let part = |counts: &'static [u64], sums: &'static [u64]| EdgeEntries { keys: &[], counts, sums };
        let with = |counts, sums| EdgeEntries { keys: &keys, ..part(counts, sums) };
        assert!(parts_sum_exactly(&[], 4).unwrap());
        assert!(parts_sum_exactly(&[part(&[], &[])], 0).unwrap());
        assert!(parts_sum_exactly(&[with(&[1, 2, 3], &[4, 5, 6]); 3], 4).unwrap());
        let half_counts = with(&[1 << 31, 1, 1], &[0, 0, 0]);
        assert!(parts_sum_exactly(&[half_counts], 4).unwrap());
        assert!(!parts_sum_exactly(&[half_counts, half_counts], 4).unwrap(), "2^32 faces");
        let half_sums = with(&[1, 1, 1], &[1 << 63, 0, 0]);
        assert!(parts_sum_exactly(&[half_sums], 4).unwrap());
        assert!(!parts_sum_exactly(&[half_sums, half_sums], 4).unwrap(), "a sum of 2^64");
        let invalid =
            |parts: &[EdgeEntries<'_>], n| matches!(parts_sum_exactly(parts, n), Err(GraphError::InvalidGraph(_)));
        let ones: &[u64] = &[1, 1];
        assert!(invalid(&[EdgeEntries { keys: &keys, counts: ones, sums: &[1, 1, 1] }], 4), "a count short");
        assert!(invalid(&[EdgeEntries { keys: &[key(1, 3), key(1, 2)], counts: ones, sums: ones }], 4));
        assert!(invalid(&[EdgeEntries { keys: &[key(1, 2), key(1, 2)], counts: ones, sums: ones }], 4));
        assert!(invalid(&[EdgeEntries { keys: &[key(2, 2)], counts: &[1], sums: &[1] }], 4), "a self-loop");
        assert!(invalid(&[EdgeEntries { keys: &[key(1, 4)], counts: &[1], sums: &[1] }], 4), "node 4 of 4");
        assert!(invalid(&[], MAX_NODES + 1), "too many nodes");
    }

    #[test]
    fn valid_graphs_pass() {
        validate_edges(&[], 0).unwrap();
        validate_edges(&[[0, 1], [0, 2], [1, 2]], 3).unwrap();
        validate_edges(&[[1, 5], [2, 3]], 6).unwrap();
        validate_edges(&[[0, MAX_NODES - 1]], MAX_NODES).unwrap();
    }

    #[test]
    fn malformed_graphs_are_rejected() {
        let bad = |edges: &[[u64; 2]], n_nodes: u64| match validate_edges(edges, n_nodes) {
            Err(GraphError::InvalidGraph(reason)) => reason,
            other => panic!("{edges:?} over {n_nodes} nodes: {other:?}"),
        };
        // An endpoint outside the nodes: a kernel would index past a
        // per-node array.
        assert!(bad(&[[1, 2], [2, 3]], 3).contains("node 3 is not below the 3 nodes"));
        assert!(bad(&[[1, 4_000_000_000]], 10).contains("not below"));
        // Self-loops and reversed endpoints.
        assert!(bad(&[[2, 2]], 3).contains("u < v"));
        assert!(bad(&[[2, 1]], 3).contains("u < v"));
        // Repeated and unsorted edges.
        assert!(bad(&[[0, 1], [0, 1]], 3).contains("sorted"));
        assert!(bad(&[[0, 2], [0, 1]], 3).contains("sorted"));
        // Ids that do not fit a key.
        assert!(bad(&[], MAX_NODES + 1).contains("32 bits"));
        // A long list (checked on every thread) with faults in several
        // places: the first is named.
        let mut long: Vec<[u64; 2]> = (0..200_000).map(|i| [i, i + 1]).collect();
        long[150_000] = [150_000, 150_000];
        assert!(bad(&long, 200_001).contains("edge 150000 is (150000, 150000)"));
        long[70_000] = [69_998, 70_001];
        assert!(bad(&long, 200_001).contains("edge 70000 (69998, 70001) follows (69999, 70000)"));
        long[20_000] = [20_000, 300_000];
        assert!(bad(&long, 200_001).contains("edge 20000 is (20000, 300000): node 300000"));
    }
}
