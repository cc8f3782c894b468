//! The greyscale watershed's automaton (`gpu_waterz_abi::greyscale` has the
//! rules and why every schedule that runs to a fixed point agrees).
//!
//! [`grey_relax`] is the block-asynchronous step: one thread block per
//! tile loads the tile and its one-cell halo from the previous global
//! state into shared memory, relaxes the tile in Jacobi steps (every cell
//! reads its neighbours, a barrier, every cell writes) until a step changes
//! nothing or `max_local_steps` have run, and writes its cells to the next
//! global state. The halo stays as loaded, so a step's result depends only
//! on the previous state, never on the order blocks run in. The other
//! kernels are per-cell passes between the phases.

use crate::device::*;
use gpu_waterz_abi::greyscale::*;
use gpu_waterz_abi::Dims3;

/// The tile grid of `dims`: tiles per axis.
#[inline(always)]
fn tile_grid(dims: Dims3, tile: [u32; 3]) -> [u64; 3] {
    [dims.z.div_ceil(tile[0] as u64), dims.y.div_ceil(tile[1] as u64), dims.x.div_ceil(tile[2] as u64)]
}

kernel! {
    /// One global step of a rule over the active tiles (see the module).
    ///
    /// # Safety
    /// Every array holds one value per cell of `dims` (`parents` may be
    /// null unless the rule is `Label`, `companion` null unless it reads
    /// one); `active_in`/`active_out` hold one value per tile; `state_in`
    /// and `state_out` do not overlap; launched with
    /// [`GREY_TILE_THREADS`] threads and `(2 * halo_cells + 1) * 4` bytes
    /// of shared memory.
    ///
    /// # Parameters
    /// See [`GreyRelaxArgs`].
    ///
    /// # Thread mapping
    /// Block `b` is tile `b` of the grid (C order); thread `t` is cell `t`
    /// of the tile (C order) and loads every 512th cell of the halo box.
    pub unsafe extern "ptx-kernel" fn grey_relax(
        dims: Dims3,
        rule: u32,
        connectivity: u32,
        step: u32,
        max_local_steps: u32,
        image: *const u32,
        kinds: *const u8,
        parents: *const u8,
        companion: *const u32,
        state_in: *const u32,
        state_out: *mut u32,
        active_in: *const u32,
        active_out: *mut u32,
        changed: *mut u32,
    ) as GreyRelaxArgs {
        let Some(rule) = GreyRule::from_code(rule) else { return };
        let tile = tile_for_depth(dims.z);
        let grid = tile_grid(dims, tile);
        let t = block_idx_x() as u64;
        // SAFETY: t indexes the tile arrays. Both conditions are
        // block-uniform, so every thread of the block leaves together.
        if t >= grid[0] * grid[1] * grid[2] || unsafe { *active_in.add(t as usize) } == 0 {
            return;
        }
        let at = [t / (grid[1] * grid[2]), (t / grid[2]) % grid[1], t % grid[2]];
        let halo = [tile[0] + 2, tile[1] + 2, tile[2] + 2];
        let halo_len = (halo[0] * halo[1] * halo[2]) as usize;
        let shared = dynamic_shared::<u32>();
        let companion_tile = shared;
        // SAFETY: the launch gives 2 * halo_len + 1 words.
        let state_tile = unsafe { shared.add(halo_len) };
        let origin = [
            (at[0] * tile[0] as u64) as i64 - 1,
            (at[1] * tile[1] as u64) as i64 - 1,
            (at[2] * tile[2] as u64) as i64 - 1,
        ];
        let extent = [dims.z as i64, dims.y as i64, dims.x as i64];
        let sentinel = state_sentinel(rule);
        let tid = thread_idx_x();
        let mut h = tid as usize;
        while h < halo_len {
            let hz = (h / (halo[1] * halo[2]) as usize) as i64;
            let hy = ((h / halo[2] as usize) % halo[1] as usize) as i64;
            let hx = (h % halo[2] as usize) as i64;
            let p = [origin[0] + hz, origin[1] + hy, origin[2] + hx];
            let inside = p[0] >= 0 && p[1] >= 0 && p[2] >= 0 && p[0] < extent[0] && p[1] < extent[1] && p[2] < extent[2];
            // SAFETY: h < halo_len; g is a cell of the volume when inside.
            unsafe {
                if inside {
                    let g = dims.index(p[0] as u64, p[1] as u64, p[2] as u64) as usize;
                    *state_tile.add(h) = *state_in.add(g);
                    *companion_tile.add(h) = if companion.is_null() { MASKED } else { *companion.add(g) };
                } else {
                    *state_tile.add(h) = sentinel;
                    *companion_tile.add(h) = MASKED;
                }
            }
            h += GREY_TILE_THREADS as usize;
        }
        let l = [tid / (tile[1] * tile[2]), (tid / tile[2]) % tile[1], tid % tile[2]];
        let p = [origin[0] + 1 + l[0] as i64, origin[1] + 1 + l[1] as i64, origin[2] + 1 + l[2] as i64];
        let inside = tid < GREY_TILE_THREADS && p[0] < extent[0] && p[1] < extent[1] && p[2] < extent[2];
        let own = (((l[0] + 1) * halo[1] + l[1] + 1) * halo[2] + l[2] + 1) as usize;
        let g = if inside { dims.index(p[0] as u64, p[1] as u64, p[2] as u64) as usize } else { 0 };
        // SAFETY: g is this thread's cell when inside.
        let (kind, key, parent) = unsafe {
            if inside {
                let parent = if parents.is_null() { PARENT_NONE } else { *parents.add(g) };
                (*kinds.add(g), *image.add(g), parent)
            } else {
                (KIND_MASKED, MASKED, PARENT_NONE)
            }
        };
        let plane = (halo[1] * halo[2]) as isize;
        let row = halo[2] as isize;
        // SAFETY: every thread reaches it.
        unsafe { sync_threads() };
        let mut changed_here = false;
        let mut local = 0;
        while local < max_local_steps {
            local += 1;
            // SAFETY: own and own + offset lie in the halo box (offsets are
            // at most one cell along each axis).
            let (v, old) = unsafe {
                let old = *state_tile.add(own);
                let v = if inside {
                    let neighbour = |dir: usize| {
                        let o = direction_offset(dir);
                        let q = (own as isize + o[0] as isize * plane + o[1] as isize * row + o[2] as isize) as usize;
                        (*companion_tile.add(q), *state_tile.add(q))
                    };
                    relax(rule, kind, key, parent, *companion_tile.add(own), old, connectivity, neighbour)
                } else {
                    old
                };
                (v, old)
            };
            let mine = v != old;
            // SAFETY: every thread reaches it; it also ends the step's reads.
            if !unsafe { sync_threads_or(mine) } {
                break;
            }
            if mine {
                // SAFETY: own lies in the halo box.
                unsafe { *state_tile.add(own) = v };
                changed_here = true;
            }
            // SAFETY: every thread reaches it.
            unsafe { sync_threads() };
        }
        if inside {
            // SAFETY: g is this thread's cell.
            unsafe { *state_out.add(g) = *state_tile.add(own) };
        }
        // SAFETY: every thread reaches it.
        if unsafe { sync_threads_or(changed_here) } {
            if (tid as usize) < DIRECTIONS {
                let o = direction_offset(tid as usize);
                let q = [at[0] as i64 + o[0], at[1] as i64 + o[1], at[2] as i64 + o[2]];
                if q[0] >= 0 && q[1] >= 0 && q[2] >= 0 && (q[0] as u64) < grid[0] && (q[1] as u64) < grid[1] && (q[2] as u64) < grid[2] {
                    let n = (q[0] as u64 * grid[1] + q[1] as u64) * grid[2] + q[2] as u64;
                    // SAFETY: n is a tile of the grid.
                    unsafe { *active_out.add(n as usize) = 1 };
                }
            }
            if tid == 0 {
                // SAFETY: one word.
                unsafe { *changed = step };
            }
        }
    }
}

kernel! {
    /// Cell kinds and starting levels.
    ///
    /// # Safety
    /// Every array holds `n` values (`markers` and `mask` may be null).
    ///
    /// # Parameters
    /// See [`GreyPrepareArgs`].
    ///
    /// # Thread mapping
    /// Grid-stride over the cells.
    pub unsafe extern "ptx-kernel" fn grey_prepare(
        n: u64,
        image: *const u32,
        markers: *const u32,
        mask: *const u8,
        kinds: *mut u8,
        level: *mut u32,
        reserved: *mut u32,
    ) as GreyPrepareArgs {
        grid_stride(n, |i| {
            let i = i as usize;
            // SAFETY: i < n.
            unsafe {
                let key = *image.add(i);
                if key == MASKED {
                    *reserved = 1;
                }
                let kind = if !mask.is_null() && *mask.add(i) == 0 {
                    KIND_MASKED
                } else if !markers.is_null() && *markers.add(i) != 0 {
                    KIND_MARKER
                } else {
                    KIND_FREE
                };
                *kinds.add(i) = kind;
                *level.add(i) = match kind {
                    KIND_MASKED => MASKED,
                    KIND_MARKER => key,
                    _ if !markers.is_null() => MASKED,
                    _ => key,
                };
            }
        });
    }
}

/// `values[neighbour of i in direction dir]`, `outside` beyond the volume.
///
/// # Safety
/// `values` holds one value per cell of `dims`; `i` is a cell.
#[inline(always)]
unsafe fn at<T: Copy>(dims: Dims3, values: *const T, i: u64, dir: usize, outside: T) -> T {
    match neighbour_index(dims, i, dir) {
        // SAFETY: q is a cell of the volume.
        Some(q) => unsafe { *values.add(q as usize) },
        None => outside,
    }
}

/// The number of cells of `dims`.
#[inline(always)]
fn cells(dims: Dims3) -> u64 {
    dims.z * dims.y * dims.x
}

kernel! {
    /// Distances 0 at sources and infinite elsewhere.
    ///
    /// # Safety
    /// Every array holds one value per cell of `dims`.
    ///
    /// # Parameters
    /// See [`GreyDistanceInitArgs`].
    ///
    /// # Thread mapping
    /// Grid-stride over the cells.
    pub unsafe extern "ptx-kernel" fn grey_distance_init(
        dims: Dims3,
        connectivity: u32,
        kinds: *const u8,
        level: *const u32,
        distance: *mut u32,
    ) as GreyDistanceInitArgs {
        grid_stride(cells(dims), |i| {
            // SAFETY: i is a cell; neighbours are read through `at`.
            unsafe {
                let lv = |dir| at(dims, level, i, dir, MASKED);
                let source = is_distance_source(*kinds.add(i as usize), *level.add(i as usize), connectivity, lv);
                *distance.add(i as usize) = if source { 0 } else { INFINITE };
            }
        });
    }
}

kernel! {
    /// Parent codes, and the labels of markers and minima.
    ///
    /// # Safety
    /// Every array holds one value per cell of `dims` (`markers` null
    /// without markers); the cell count is below `u32::MAX`.
    ///
    /// # Parameters
    /// See [`GreyDescendArgs`].
    ///
    /// # Thread mapping
    /// Grid-stride over the cells.
    pub unsafe extern "ptx-kernel" fn grey_descend(
        dims: Dims3,
        connectivity: u32,
        has_markers: u32,
        kinds: *const u8,
        level: *const u32,
        distance: *const u32,
        markers: *const u32,
        parents: *mut u8,
        labels: *mut u32,
    ) as GreyDescendArgs {
        grid_stride(cells(dims), |i| {
            let c = i as usize;
            // SAFETY: i is a cell; neighbours are read through `at`.
            unsafe {
                let nb = |dir| (at(dims, level, i, dir, MASKED), at(dims, distance, i, dir, INFINITE));
                let parent =
                    parent_direction(*kinds.add(c), *level.add(c), *distance.add(c), has_markers != 0, connectivity, nb);
                *parents.add(c) = parent;
                *labels.add(c) = if parent != PARENT_TERMINAL {
                    0
                } else if has_markers != 0 && !markers.is_null() {
                    *markers.add(c)
                } else {
                    i as u32 + 1
                };
            }
        });
    }
}

kernel! {
    /// Flags the first cell of each regional minimum.
    ///
    /// # Safety
    /// Every array holds `n` values.
    ///
    /// # Parameters
    /// See [`GreyMinimumRootsArgs`].
    ///
    /// # Thread mapping
    /// Grid-stride over the cells.
    pub unsafe extern "ptx-kernel" fn grey_minimum_roots(
        n: u64,
        parents: *const u8,
        labels: *const u32,
        flags: *mut u32,
    ) as GreyMinimumRootsArgs {
        grid_stride(n, |i| {
            let c = i as usize;
            // SAFETY: i < n.
            unsafe {
                *flags.add(c) = (*parents.add(c) == PARENT_TERMINAL && *labels.add(c) as u64 == i + 1) as u32;
            }
        });
    }
}

kernel! {
    /// Renumbers minima `1..` by their first cells' order.
    ///
    /// # Safety
    /// Every array holds `n` values.
    ///
    /// # Parameters
    /// See [`GreyMinimumNumberArgs`].
    ///
    /// # Thread mapping
    /// Grid-stride over the cells.
    pub unsafe extern "ptx-kernel" fn grey_minimum_number(
        n: u64,
        parents: *const u8,
        offsets: *const u64,
        labels: *mut u32,
    ) as GreyMinimumNumberArgs {
        grid_stride(n, |i| {
            let c = i as usize;
            // SAFETY: i < n; a label is read as an index only if in 1..=n.
            unsafe {
                let l = *labels.add(c) as u64;
                if *parents.add(c) == PARENT_TERMINAL && l >= 1 && l <= n {
                    *labels.add(c) = (*offsets.add(l as usize - 1) + 1) as u32;
                }
            }
        });
    }
}

kernel! {
    /// Watershed lines: `labels_out` is `labels_in` with lines set to 0.
    ///
    /// # Safety
    /// Every array holds one value per cell of `dims`; the label arrays do
    /// not overlap.
    ///
    /// # Parameters
    /// See [`GreyLinesArgs`].
    ///
    /// # Thread mapping
    /// Grid-stride over the cells.
    pub unsafe extern "ptx-kernel" fn grey_lines(
        dims: Dims3,
        connectivity: u32,
        parents: *const u8,
        level: *const u32,
        distance: *const u32,
        labels_in: *const u32,
        labels_out: *mut u32,
    ) as GreyLinesArgs {
        grid_stride(cells(dims), |i| {
            let c = i as usize;
            // SAFETY: i is a cell; neighbours are read through `at`.
            unsafe {
                let nb = |dir| {
                    (at(dims, level, i, dir, MASKED), at(dims, distance, i, dir, INFINITE), at(dims, labels_in, i, dir, 0))
                };
                let label = *labels_in.add(c);
                let line =
                    is_line_cell(*parents.add(c), *level.add(c), *distance.add(c), label, connectivity, nb);
                *labels_out.add(c) = if line { 0 } else { label };
            }
        });
    }
}
