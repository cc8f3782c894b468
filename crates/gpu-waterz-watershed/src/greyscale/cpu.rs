//! The automaton on the CPU's cores, by tiles: each global step relaxes
//! every active tile in local memory, reading its one-cell halo from the
//! previous global state and writing its cells to the next one, until the
//! tile settles (or for one local step, the synchronous schedule). Tiles
//! run in parallel on rayon's threads, a slab of tiles per task; the
//! result depends only on the schedule, never on the threads' timing, and
//! equals the GPU's, which runs the same tiles.

use super::{run_on_host, Cells, Config, GreyscaleError, Image, Segmentation};
use gpu_waterz_abi::greyscale::{self as abi, tile_for_depth, GreyRule, DIRECTIONS, MASKED};
use gpu_waterz_abi::Dims3;
use rayon::prelude::*;

/// The greyscale watershed on the CPU's cores with `config`'s schedule.
pub fn watershed(image: &Image<'_>, config: &Config) -> Result<Segmentation, GreyscaleError> {
    let max_local_steps = config.get_schedule().max_local_steps();
    run_on_host(image, config, &mut |cells, rule, companion, state| {
        relax_tiles(cells, rule, max_local_steps, companion, state)
    })
}

/// The tile grid of a volume: tiles per axis.
pub(crate) fn tile_grid(dims: Dims3) -> [u64; 3] {
    let t = tile_for_depth(dims.z);
    [dims.z.div_ceil(t[0] as u64), dims.y.div_ceil(t[1] as u64), dims.x.div_ceil(t[2] as u64)]
}

/// Global steps of `rule` over the tiles until one changes nothing.
fn relax_tiles(
    cells: Cells<'_>,
    rule: GreyRule,
    max_local_steps: u32,
    companion: Option<&[u32]>,
    state: &mut Vec<u32>,
) -> u64 {
    let dims = cells.dims;
    let tile = tile_for_depth(dims.z).map(|t| t as usize);
    let grid = tile_grid(dims).map(|g| g as usize);
    let n_tiles = grid[0] * grid[1] * grid[2];
    let slab_len = tile[0] * (dims.y * dims.x) as usize;
    let mut active = vec![true; n_tiles];
    let mut next = state.clone();
    let mut steps = 0;
    loop {
        steps += 1;
        let input: &[u32] = state;
        let changed: Vec<usize> = next
            .par_chunks_mut(slab_len.max(1))
            .enumerate()
            .flat_map_iter(|(tz, slab)| {
                let mut scratch = Tile::new(tile);
                let mut changed = Vec::new();
                for ty in 0..grid[1] {
                    for tx in 0..grid[2] {
                        let t = (tz * grid[1] + ty) * grid[2] + tx;
                        if active[t]
                            && scratch.relax(cells, rule, max_local_steps, companion, input, [tz, ty, tx], slab)
                        {
                            changed.push(t);
                        }
                    }
                }
                changed
            })
            .collect();
        if changed.is_empty() {
            return steps;
        }
        active.iter_mut().for_each(|a| *a = false);
        for t in changed {
            let (tz, ty, tx) = (t / (grid[1] * grid[2]), (t / grid[2]) % grid[1], t % grid[2]);
            for dir in 0..DIRECTIONS {
                let [dz, dy, dx] = abi::direction_offset(dir);
                let (z, y, x) = (tz as i64 + dz, ty as i64 + dy, tx as i64 + dx);
                if z >= 0
                    && y >= 0
                    && x >= 0
                    && (z as usize) < grid[0]
                    && (y as usize) < grid[1]
                    && (x as usize) < grid[2]
                {
                    active[(z as usize * grid[1] + y as usize) * grid[2] + x as usize] = true;
                }
            }
        }
        std::mem::swap(state, &mut next);
    }
}

/// One tile with its halo, as a thread block holds it in shared memory.
struct Tile {
    tile: [usize; 3],
    halo: [usize; 3],
    companion: Vec<u32>,
    state: Vec<u32>,
    new: Vec<u32>,
    /// The tile's cells inside the volume: (halo index, global index).
    own: Vec<(usize, usize)>,
}

impl Tile {
    fn new(tile: [usize; 3]) -> Self {
        let halo = tile.map(|t| t + 2);
        let cells = halo[0] * halo[1] * halo[2];
        let cells_per_tile = tile[0] * tile[1] * tile[2];
        let own = Vec::with_capacity(cells_per_tile);
        Self { tile, halo, companion: vec![0; cells], state: vec![0; cells], new: vec![0; cells_per_tile], own }
    }

    /// Relaxes tile `at` (tile coordinates) from `input` and writes its
    /// cells to `slab` (the tile row's z-slab of the output); whether any
    /// cell changed.
    #[allow(clippy::too_many_arguments)]
    fn relax(
        &mut self,
        cells: Cells<'_>,
        rule: GreyRule,
        max_local_steps: u32,
        companion: Option<&[u32]>,
        input: &[u32],
        at: [usize; 3],
        slab: &mut [u32],
    ) -> bool {
        let dims = cells.dims;
        let [hz, hy, hx] = self.halo;
        let origin = [0, 1, 2].map(|a| (at[a] * self.tile[a]) as i64 - 1);
        let sentinel = abi::state_sentinel(rule);
        let extent = [dims.z as i64, dims.y as i64, dims.x as i64];
        // Load the tile and its halo.
        for h in 0..hz * hy * hx {
            let p =
                [origin[0] + (h / (hy * hx)) as i64, origin[1] + ((h / hx) % hy) as i64, origin[2] + (h % hx) as i64];
            if (0..3).all(|a| p[a] >= 0 && p[a] < extent[a]) {
                let g = dims.index(p[0] as u64, p[1] as u64, p[2] as u64) as usize;
                self.state[h] = input[g];
                self.companion[h] = companion.map_or(MASKED, |c| c[g]);
            } else {
                self.state[h] = sentinel;
                self.companion[h] = MASKED;
            }
        }
        let mut own = std::mem::take(&mut self.own);
        own.clear();
        own.extend((0..self.new.len()).filter_map(|k| {
            let l = [k / (self.tile[1] * self.tile[2]), (k / self.tile[2]) % self.tile[1], k % self.tile[2]];
            let p = [0, 1, 2].map(|a| origin[a] + 1 + l[a] as i64);
            (0..3).all(|a| p[a] < extent[a]).then(|| {
                let h = ((l[0] + 1) * hy + l[1] + 1) * hx + l[2] + 1;
                (h, dims.index(p[0] as u64, p[1] as u64, p[2] as u64) as usize)
            })
        }));
        let offset = |dir: usize| {
            let [dz, dy, dx] = abi::direction_offset(dir);
            (dz * (hy * hx) as i64 + dy * hx as i64 + dx) as isize
        };
        let mut changed = false;
        for _ in 0..max_local_steps {
            let mut any = false;
            for (k, &(h, g)) in own.iter().enumerate() {
                let neighbour = |dir| {
                    let q = (h as isize + offset(dir)) as usize;
                    (self.companion[q], self.state[q])
                };
                let v = abi::relax(
                    rule,
                    cells.kinds[g],
                    cells.keys[g],
                    cells.parent(g),
                    self.companion[h],
                    self.state[h],
                    cells.connectivity,
                    neighbour,
                );
                any |= v != self.state[h];
                self.new[k] = v;
            }
            if !any {
                break;
            }
            changed = true;
            for (k, &(h, _)) in own.iter().enumerate() {
                self.state[h] = self.new[k];
            }
        }
        let slab_start = at[0] * self.tile[0] * (dims.y * dims.x) as usize;
        for &(h, g) in &own {
            slab[g - slab_start] = self.state[h];
        }
        self.own = own;
        changed
    }
}
