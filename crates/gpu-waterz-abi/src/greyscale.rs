//! The greyscale watershed as a cellular automaton: cell kinds, neighbour
//! directions, the per-cell update rules, the tile layout and the kernels'
//! argument structs. The rules are shared by the synchronous reference,
//! the block-asynchronous CPU version and the GPU kernels, so that all three
//! run the same per-cell code.
//!
//! # The watershed computed
//! Images are `(z, y, x)` volumes of `u32` keys (a 2D image has `z = 1`),
//! ordered as the grey levels they stand for; [`MASKED`] is reserved.
//! Neighbours are the cells at a Chebyshev distance of 1 whose offset has at
//! most `connectivity` non-zero coordinates (scikit-image's meaning: 1 gives
//! 4 or 6 neighbours, 2 gives 8 or 18, 3 gives 26).
//!
//! 1. The level `g`: without markers the image itself; with markers, the
//!    image reconstructed so that the markers are its only minima,
//!    `g(p) = max(f(p), min over neighbours q of g(q))` for unmarked cells
//!    and `g(m) = f(m)` at markers (the lowest pass over which a flood from a
//!    marker reaches `p`). Cells no marker reaches keep [`MASKED`].
//! 2. The plateau distance `d`: 0 at markers and at cells with a lower
//!    neighbour; otherwise one more than the least `d` of the neighbours on
//!    the same level (the lower completion of the plateaus). Without markers,
//!    the cells left at [`INFINITE`] are the regional minima.
//! 3. Each regional minimum (a connected plateau of minima) is labelled by
//!    the smallest linear index of its cells plus one, then numbered `1..`
//!    in the order of those indices (as `scipy.ndimage.label` numbers).
//!    With markers, markers keep their labels.
//! 4. Every other cell that has a `d` descends to its lowest neighbour by
//!    `(g, d)`, the smallest index among equals ([`parent_direction`]), and
//!    takes the label of the cell it descends to ([`relax_label`]).
//! 5. Watershed lines, when asked for: a labelled cell that is not a marker
//!    or a minimum becomes 0 if a neighbour lower by `(g, d, index)` has
//!    another label ([`is_line_cell`]).
//!
//! The rules of steps 1 to 3 are order-preserving maps of the states
//! (a lower state of the neighbours never gives a higher new state) that
//! start above their fixed point, and step 4's labels flow down a fixed
//! forest; so any order of updates that keeps updating until nothing
//! changes ends at the same labels (chaotic iteration): this is why the
//! block-asynchronous versions equal the synchronous one. The
//! *first-arrival* distance rule ([`relax_distance`] with `first_arrival`)
//! is the classical wavefront, which keeps the first distance that reaches
//! a cell; it is exact when every cell advances one step per global step
//! (the synchronous automaton) and leaves artifacts on plateaus when tiles
//! advance several steps between global synchronisations.

/// Reserved key: a cell outside the mask (or outside the volume), and the
/// level of a cell that no marker reaches.
pub const MASKED: u32 = u32::MAX;
/// A distance not (yet) reached.
pub const INFINITE: u32 = u32::MAX;

/// Cell kind: outside the mask.
pub const KIND_MASKED: u8 = 0;
/// Cell kind: an ordinary cell.
pub const KIND_FREE: u8 = 1;
/// Cell kind: a marker (its label is given).
pub const KIND_MARKER: u8 = 2;

/// Parent code: the cell is a marker or a minimum and keeps its label.
pub const PARENT_TERMINAL: u8 = 254;
/// Parent code: the cell has no label (masked or unreached).
pub const PARENT_NONE: u8 = 255;

/// Number of direction codes: `(dz + 1) * 9 + (dy + 1) * 3 + (dx + 1)`.
pub const DIRECTIONS: usize = 27;
/// The code of the zero offset (the cell itself).
pub const SELF_DIRECTION: usize = 13;

/// Threads per block of the tile kernels: one cell of the tile each.
pub const GREY_TILE_THREADS: u32 = 512;
/// The tile of a 3D volume, `(z, y, x)`.
pub const GREY_TILE_3D: [u32; 3] = [8, 8, 8];
/// The tile of a 2D image (`z = 1`), `(z, y, x)`.
pub const GREY_TILE_2D: [u32; 3] = [1, 16, 32];
const _: () = assert!(
    GREY_TILE_3D[0] * GREY_TILE_3D[1] * GREY_TILE_3D[2] == GREY_TILE_THREADS
        && GREY_TILE_2D[0] * GREY_TILE_2D[1] * GREY_TILE_2D[2] == GREY_TILE_THREADS,
    "a tile has one cell per thread"
);
/// The most local steps a tile takes in one global step (a guard: a tile
/// settles in fewer steps than it has cells).
pub const GREY_MAX_LOCAL_STEPS: u32 = 4096;

/// The tile for a volume of `depth` sections.
pub const fn tile_for_depth(depth: u64) -> [u32; 3] {
    if depth == 1 {
        GREY_TILE_2D
    } else {
        GREY_TILE_3D
    }
}

/// Cells of a tile with its one-cell halo, for a tile of `tile` cells.
pub const fn halo_cells(tile: [u32; 3]) -> u32 {
    (tile[0] + 2) * (tile[1] + 2) * (tile[2] + 2)
}

/// The offset `(dz, dy, dx)` of direction `code`.
#[inline(always)]
pub const fn direction_offset(code: usize) -> [i64; 3] {
    [(code / 9) as i64 - 1, ((code / 3) % 3) as i64 - 1, (code % 3) as i64 - 1]
}

/// The linear index of the neighbour of cell `index` in direction `code`,
/// or `None` beyond the volume.
#[inline(always)]
pub const fn neighbour_index(dims: crate::Dims3, index: u64, code: usize) -> Option<u64> {
    let o = direction_offset(code);
    let (x, y, z) = (index % dims.x, (index / dims.x) % dims.y, index / (dims.x * dims.y));
    let (qz, qy, qx) = (z as i64 + o[0], y as i64 + o[1], x as i64 + o[2]);
    if qz < 0 || qy < 0 || qx < 0 || qz >= dims.z as i64 || qy >= dims.y as i64 || qx >= dims.x as i64 {
        return None;
    }
    Some(dims.index(qz as u64, qy as u64, qx as u64))
}

/// Whether direction `code` is a neighbour under `connectivity` (at most
/// that many non-zero coordinates; the zero offset is not).
#[inline(always)]
pub const fn is_neighbour(code: usize, connectivity: u32) -> bool {
    let o = direction_offset(code);
    let nonzero = (o[0] != 0) as u32 + (o[1] != 0) as u32 + (o[2] != 0) as u32;
    nonzero >= 1 && nonzero <= connectivity
}

/// The monotone `u32` key of a float32 grey level: keys compare as the
/// floats do, and `-0.0` and `0.0` (equal floats) get one key; `None` for
/// NaN, whose order is undefined. Keys of finite and infinite floats stay
/// below [`MASKED`].
#[inline(always)]
pub const fn f32_key(value: f32) -> Option<u32> {
    if value.is_nan() {
        return None;
    }
    let bits = if value == 0.0 { 0 } else { value.to_bits() };
    Some(if bits & 0x8000_0000 != 0 { !bits } else { bits | 0x8000_0000 })
}

/// Step 1's rule: the new level of a cell of `kind` with grey level `f` and
/// level `g`; `level(dir)` is the level of the neighbour in direction `dir`
/// ([`MASKED`] outside the mask or the volume).
#[inline(always)]
pub fn relax_level(kind: u8, f: u32, g: u32, connectivity: u32, level: impl Fn(usize) -> u32) -> u32 {
    if kind != KIND_FREE {
        return g;
    }
    let mut lowest = g;
    let mut dir = 0;
    while dir < DIRECTIONS {
        if is_neighbour(dir, connectivity) {
            let q = level(dir);
            if q < lowest {
                lowest = q;
            }
        }
        dir += 1;
    }
    if lowest == MASKED {
        MASKED
    } else if lowest > f {
        lowest
    } else {
        f
    }
}

/// Whether a cell starts step 2 at distance 0: a marker, or a cell with a
/// neighbour on a lower level.
#[inline(always)]
pub fn is_distance_source(kind: u8, g: u32, connectivity: u32, level: impl Fn(usize) -> u32) -> bool {
    if kind == KIND_MARKER {
        return true;
    }
    if kind != KIND_FREE || g == MASKED {
        return false;
    }
    let mut dir = 0;
    while dir < DIRECTIONS {
        if is_neighbour(dir, connectivity) && level(dir) < g {
            return true;
        }
        dir += 1;
    }
    false
}

/// Step 2's rule: the new distance of a cell on level `g` at distance `d`;
/// `neighbour(dir)` is the neighbour's `(level, distance)`. With
/// `first_arrival`, a distance once reached is kept (the wavefront);
/// without, it keeps decreasing to the least one (the artifact-free rule).
#[inline(always)]
pub fn relax_distance(
    kind: u8,
    g: u32,
    d: u32,
    first_arrival: bool,
    connectivity: u32,
    neighbour: impl Fn(usize) -> (u32, u32),
) -> u32 {
    if kind != KIND_FREE || g == MASKED || d == 0 || (first_arrival && d != INFINITE) {
        return d;
    }
    let mut best = d;
    let mut dir = 0;
    while dir < DIRECTIONS {
        if is_neighbour(dir, connectivity) {
            let (qg, qd) = neighbour(dir);
            if qg == g && qd != INFINITE && qd + 1 < best {
                best = qd + 1;
            }
        }
        dir += 1;
    }
    best
}

/// Step 3's rule: a regional-minimum cell (`label != 0`) takes the least
/// label of the minimum cells on its level around it; `neighbour(dir)` is
/// the neighbour's `(level, label)`. Other cells keep `label`.
#[inline(always)]
pub fn relax_minimum(g: u32, label: u32, connectivity: u32, neighbour: impl Fn(usize) -> (u32, u32)) -> u32 {
    if label == 0 {
        return 0;
    }
    let mut best = label;
    let mut dir = 0;
    while dir < DIRECTIONS {
        if is_neighbour(dir, connectivity) {
            let (qg, ql) = neighbour(dir);
            if qg == g && ql != 0 && ql < best {
                best = ql;
            }
        }
        dir += 1;
    }
    best
}

/// Step 4's descent: the direction of the neighbour a cell descends to,
/// the lowest by `(level, distance)` among those strictly below the cell's
/// `(g, d)`, the first direction (the smallest linear index) among equals;
/// [`PARENT_TERMINAL`] for markers and minima, [`PARENT_NONE`] for cells
/// without a label. `neighbour(dir)` is `(level, distance)`, [`MASKED`]
/// outside the mask or the volume.
#[inline(always)]
pub fn parent_direction(
    kind: u8,
    g: u32,
    d: u32,
    has_markers: bool,
    connectivity: u32,
    neighbour: impl Fn(usize) -> (u32, u32),
) -> u8 {
    if kind == KIND_MARKER {
        return PARENT_TERMINAL;
    }
    if kind != KIND_FREE || g == MASKED {
        return PARENT_NONE;
    }
    if d == INFINITE {
        return if has_markers { PARENT_NONE } else { PARENT_TERMINAL };
    }
    let mut best = (g, d);
    let mut best_dir = PARENT_NONE;
    let mut dir = 0;
    while dir < DIRECTIONS {
        if is_neighbour(dir, connectivity) {
            let q = neighbour(dir);
            if q.0 != MASKED && (q.0 < best.0 || (q.0 == best.0 && q.1 < best.1)) {
                best = q;
                best_dir = dir as u8;
            }
        }
        dir += 1;
    }
    best_dir
}

/// Step 4's rule: an unlabelled cell takes the label of the cell it
/// descends to once that one has one; `label_at(dir)` is the neighbour's.
#[inline(always)]
pub fn relax_label(parent: u8, label: u32, label_at: impl Fn(usize) -> u32) -> u32 {
    if label != 0 || (parent as usize) >= DIRECTIONS {
        return label;
    }
    label_at(parent as usize)
}

/// Step 5: whether a labelled cell becomes a watershed line: it descends
/// (it is not a marker or a minimum) and a neighbour lower by
/// `(level, distance, direction order)` carries another label.
/// `neighbour(dir)` is `(level, distance, label)`.
#[inline(always)]
pub fn is_line_cell(
    parent: u8,
    g: u32,
    d: u32,
    label: u32,
    connectivity: u32,
    neighbour: impl Fn(usize) -> (u32, u32, u32),
) -> bool {
    if label == 0 || (parent as usize) >= DIRECTIONS {
        return false;
    }
    let mut dir = 0;
    while dir < DIRECTIONS {
        if is_neighbour(dir, connectivity) {
            let (qg, qd, ql) = neighbour(dir);
            // Directions before the cell's own code have smaller indices.
            let lower = qg < g || (qg == g && (qd < d || (qd == d && dir < SELF_DIRECTION)));
            if qg != MASKED && ql != 0 && ql != label && lower {
                return true;
            }
        }
        dir += 1;
    }
    false
}

/// Which rule a tile kernel relaxes.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GreyRule {
    /// Step 1: the level (state `g`; reads `f` and the kinds).
    Level = 0,
    /// Step 2, artifact-free: the least distance (state `d`; reads `g`).
    Distance = 1,
    /// Step 2, the wavefront: the first distance (state `d`; reads `g`).
    DistanceFirstArrival = 2,
    /// Step 3: the least index of each minimum (state `label`; reads `g`).
    Minimum = 3,
    /// Step 4: labels down the descent (state `label`; reads the parents).
    Label = 4,
}

impl GreyRule {
    /// The rule of code `code`, if any.
    pub const fn from_code(code: u32) -> Option<Self> {
        match code {
            0 => Some(Self::Level),
            1 => Some(Self::Distance),
            2 => Some(Self::DistanceFirstArrival),
            3 => Some(Self::Minimum),
            4 => Some(Self::Label),
            _ => None,
        }
    }
}

/// The state a rule reads outside the volume (and the companion reads
/// [`MASKED`] there).
pub const fn state_sentinel(rule: GreyRule) -> u32 {
    match rule {
        GreyRule::Level => MASKED,
        GreyRule::Distance | GreyRule::DistanceFirstArrival => INFINITE,
        GreyRule::Minimum | GreyRule::Label => 0,
    }
}

/// The new state of a cell under `rule`. `companion` is the read-only
/// array of the rule ([`GreyRule`]), `kind`, `f` and `parent` the cell's
/// own; `at(dir)` is the neighbour's `(companion, state)`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn relax(
    rule: GreyRule,
    kind: u8,
    f: u32,
    parent: u8,
    companion: u32,
    state: u32,
    connectivity: u32,
    at: impl Fn(usize) -> (u32, u32),
) -> u32 {
    match rule {
        GreyRule::Level => relax_level(kind, f, state, connectivity, |dir| at(dir).1),
        GreyRule::Distance => relax_distance(kind, companion, state, false, connectivity, at),
        GreyRule::DistanceFirstArrival => relax_distance(kind, companion, state, true, connectivity, at),
        GreyRule::Minimum => relax_minimum(companion, state, connectivity, at),
        GreyRule::Label => relax_label(parent, state, |dir| at(dir).1),
    }
}

/// Arguments of `grey_relax`: one global step of a rule over the tiles
/// marked active, each relaxed in shared memory until it settles.
///
/// Layouts: every array holds one value per cell in C order of `dims`;
/// tiles ([`tile_for_depth`]) are numbered in C order of the tile grid.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GreyRelaxArgs {
    /// The volume.
    pub dims: crate::Dims3,
    /// The rule ([`GreyRule`] as its code).
    pub rule: u32,
    /// Neighbourhood (1 to 3).
    pub connectivity: u32,
    /// The step's number; written to `changed` if any cell changes.
    pub step: u32,
    /// Local steps a tile takes at most (1: the synchronous automaton).
    pub max_local_steps: u32,
    /// Grey levels (read by [`GreyRule::Level`]).
    pub image: *const u32,
    /// Cell kinds (`KIND_*`).
    pub kinds: *const u8,
    /// Parent codes (read by [`GreyRule::Label`]).
    pub parents: *const u8,
    /// The rule's read-only companion array (levels), or null.
    pub companion: *const u32,
    /// The state before the step.
    pub state_in: *const u32,
    /// The state after the step (every cell of an active tile is written).
    pub state_out: *mut u32,
    /// Per tile: relax it this step (non-zero).
    pub active_in: *const u32,
    /// Per tile: relax it next step; set for a tile that changed and its
    /// neighbour tiles.
    pub active_out: *mut u32,
    /// Set to `step` if any cell changed.
    pub changed: *mut u32,
}

/// Arguments of `grey_prepare`: kinds and starting levels.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GreyPrepareArgs {
    /// Number of cells.
    pub n: u64,
    /// Keys of the image.
    pub image: *const u32,
    /// Markers (0: none), or null.
    pub markers: *const u32,
    /// Mask (non-zero: inside), or null.
    pub mask: *const u8,
    /// Out: the kinds.
    pub kinds: *mut u8,
    /// Out: the starting levels: [`MASKED`] outside the mask; with
    /// markers, the key at markers and [`MASKED`] elsewhere; without, the key.
    pub level: *mut u32,
    /// Set to 1 if a key is the reserved [`MASKED`].
    pub reserved: *mut u32,
}

/// Arguments of `grey_distance_init`: distance 0 at sources, else infinite.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GreyDistanceInitArgs {
    /// The volume.
    pub dims: crate::Dims3,
    /// Neighbourhood (1 to 3).
    pub connectivity: u32,
    /// Cell kinds.
    pub kinds: *const u8,
    /// Levels.
    pub level: *const u32,
    /// Out: the distances.
    pub distance: *mut u32,
}

/// Arguments of `grey_descend`: parent codes and the starting labels.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GreyDescendArgs {
    /// The volume.
    pub dims: crate::Dims3,
    /// Neighbourhood (1 to 3).
    pub connectivity: u32,
    /// Whether markers were given (non-zero).
    pub has_markers: u32,
    /// Cell kinds.
    pub kinds: *const u8,
    /// Levels.
    pub level: *const u32,
    /// Distances.
    pub distance: *const u32,
    /// Markers, or null.
    pub markers: *const u32,
    /// Out: parent codes.
    pub parents: *mut u8,
    /// Out: the marker's label at markers, index + 1 at minima, else 0.
    pub labels: *mut u32,
}

/// Arguments of `grey_minimum_roots`: flags the first cell of each minimum.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GreyMinimumRootsArgs {
    /// Number of cells.
    pub n: u64,
    /// Parent codes.
    pub parents: *const u8,
    /// Labels after step 3.
    pub labels: *const u32,
    /// Out: 1 where the cell's label is its own index + 1, else 0.
    pub flags: *mut u32,
}

/// Arguments of `grey_minimum_number`: minima labels to `1..`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GreyMinimumNumberArgs {
    /// Number of cells.
    pub n: u64,
    /// Parent codes.
    pub parents: *const u8,
    /// The exclusive scan of the roots' flags.
    pub offsets: *const u64,
    /// Labels, renumbered in place at minima.
    pub labels: *mut u32,
}

/// Arguments of `grey_lines`: watershed lines.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GreyLinesArgs {
    /// The volume.
    pub dims: crate::Dims3,
    /// Neighbourhood (1 to 3).
    pub connectivity: u32,
    /// Parent codes.
    pub parents: *const u8,
    /// Levels.
    pub level: *const u32,
    /// Distances.
    pub distance: *const u32,
    /// Labels.
    pub labels_in: *const u32,
    /// Out: labels with 0 on the lines.
    pub labels_out: *mut u32,
}

impl_kernel_args!(
    GreyRelaxArgs => GreyRelax {
        dims, rule, connectivity, step, max_local_steps, image, kinds, parents, companion, state_in, state_out,
        active_in, active_out, changed
    },
    GreyPrepareArgs => GreyPrepare { n, image, markers, mask, kinds, level, reserved },
    GreyDistanceInitArgs => GreyDistanceInit { dims, connectivity, kinds, level, distance },
    GreyDescendArgs => GreyDescend { dims, connectivity, has_markers, kinds, level, distance, markers, parents, labels },
    GreyMinimumRootsArgs => GreyMinimumRoots { n, parents, labels, flags },
    GreyMinimumNumberArgs => GreyMinimumNumber { n, parents, offsets, labels },
    GreyLinesArgs => GreyLines { dims, connectivity, parents, level, distance, labels_in, labels_out },
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbourhoods_have_scikit_image_sizes() {
        let count = |c| (0..DIRECTIONS).filter(|&d| is_neighbour(d, c)).count();
        assert_eq!((count(1), count(2), count(3)), (6, 18, 26));
        assert!(!is_neighbour(SELF_DIRECTION, 3));
        assert_eq!(direction_offset(SELF_DIRECTION), [0, 0, 0]);
        assert_eq!(direction_offset(0), [-1, -1, -1]);
    }

    #[test]
    fn f32_keys_keep_the_order() {
        let values = [f32::NEG_INFINITY, -2.5, -1e-30, 0.0, 1e-30, 3.0, f32::INFINITY];
        let keys: [u32; 7] = core::array::from_fn(|i| f32_key(values[i]).unwrap());
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(f32_key(-0.0), f32_key(0.0));
        assert!(keys.iter().all(|&k| k < MASKED));
        assert_eq!(f32_key(f32::NAN), None);
    }

    #[test]
    fn rules_on_a_line_of_cells() {
        // A cell between a level-3 neighbour (direction 12, x - 1) and a
        // level-5 one (direction 14, x + 1); connectivity 1, others masked.
        let levels = |dir: usize| match dir {
            12 => 3,
            14 => 5,
            _ => MASKED,
        };
        assert_eq!(relax_level(KIND_FREE, 1, MASKED, 1, levels), 3);
        assert_eq!(relax_level(KIND_FREE, 4, MASKED, 1, levels), 4);
        assert_eq!(relax_level(KIND_MARKER, 4, 4, 1, levels), 4);
        assert!(is_distance_source(KIND_FREE, 4, 1, levels));
        assert!(!is_distance_source(KIND_FREE, 3, 1, levels));
        let pairs = |dir: usize| match dir {
            12 => (3, 7),
            14 => (3, INFINITE),
            _ => (MASKED, INFINITE),
        };
        assert_eq!(relax_distance(KIND_FREE, 3, INFINITE, false, 1, pairs), 8);
        assert_eq!(relax_distance(KIND_FREE, 3, 9, false, 1, pairs), 8);
        assert_eq!(relax_distance(KIND_FREE, 3, 9, true, 1, pairs), 9);
        assert_eq!(parent_direction(KIND_FREE, 3, 9, false, 1, pairs), 12);
        assert_eq!(parent_direction(KIND_FREE, 3, INFINITE, false, 1, pairs), PARENT_TERMINAL);
        assert_eq!(parent_direction(KIND_FREE, 3, INFINITE, true, 1, pairs), PARENT_NONE);
        assert_eq!(relax_minimum(3, 9, 1, pairs), 7);
        assert_eq!(relax_label(12, 0, |d| if d == 12 { 5 } else { 0 }), 5);
        assert_eq!(relax_label(PARENT_TERMINAL, 2, |_| 5), 2);
        let labelled = |dir: usize| match dir {
            12 => (3, 7, 1),
            14 => (3, 9, 2),
            _ => (MASKED, INFINITE, 0),
        };
        assert!(is_line_cell(12, 3, 8, 2, 1, labelled));
        assert!(!is_line_cell(12, 3, 8, 1, 1, labelled));
    }
}
