//! The exact Euclidean distance transform: one pass per axis, x first
//! from the mask (`gpu_waterz_abi::distance` has the per-element logic),
//! and the feature transform's indices.

use crate::device::*;
use gpu_waterz_abi::distance::*;
use gpu_waterz_abi::Dims3;

kernel! {
    /// The first pass of the distance transform, along x, from the mask,
    /// of `items` volumes one after another: each element's cost to the
    /// nearest background element of its row (`axis_cost(metric, k)` for
    /// `k` elements apart into `squared`, or `(k s)²` into `squared_f64`;
    /// infinite for none), with `features` that element's flat index, and
    /// the flag of each volume with background set. A warp walks its row a
    /// word of 32 positions at a time (loaded 16 bytes per lane, 16 words
    /// at once, when the rows are 16-byte aligned; 4 bytes, 4 words, when
    /// 4-byte aligned; else a byte per lane and a ballot): the word's
    /// background elements are a set of bits; when a word holds one, the
    /// positions since the last background element (earlier words and this
    /// word's) are decided and written; the positions after the row's last
    /// one are written at its end. Each position is read and written once.
    /// Short rows of a multiple of 32 go `rows_per_warp` to a warp, walked
    /// as one run whose rows end on word boundaries, so that the loads fill
    /// the warp.
    ///
    /// # Safety
    /// `mask` and the outputs given (`squared` or `squared_f64`, and
    /// `features` unless null) hold one value per element of the `items`
    /// volumes of `dims`; `background` holds `items` words; flat indices
    /// fit `u32` below `EDT_NO_FEATURE` when `features` is given; launched
    /// with a multiple of 32 threads per block.
    ///
    /// # Parameters
    /// See [`EdtRowsArgs`].
    ///
    /// # Thread mapping
    /// A warp per run of rows (grid-stride over the runs of the
    /// `items * z * y` rows: `rows_per_warp` rows each where the rows are a
    /// multiple of 32 long and at most `EDT_ROW_RUN_MAX_LENGTH`, else one);
    /// lane `l` takes positions `l`, `l + 32`, ... of the run.
    pub unsafe extern "ptx-kernel" fn edt_rows(
        dims: Dims3,
        items: u64,
        metric: u32,
        rows_per_warp: u32,
        sampling: f64,
        mask: *const u8,
        squared: *mut u32,
        squared_f64: *mut f64,
        features: *mut u32,
        background: *mut u32,
    ) as EdtRowsArgs {
        const NONE: u32 = u32::MAX;
        // Positions within a row are u32 (the host keeps rows shorter).
        let (rows_per_item, length) = (dims.z * dims.y, dims.x as u32);
        let rows = items * rows_per_item;
        // A run of rows per warp only where their boundaries fall on words
        // (and the run stays far from u32::MAX).
        let per_warp = if length > 0 && length % 32 == 0 && length <= EDT_ROW_RUN_MAX_LENGTH {
            rows_per_warp.clamp(1, EDT_ROW_RUN_MAX_ROWS) as u64
        } else {
            1
        };
        let runs = rows.div_ceil(per_warp);
        let lane = thread_idx_x() % 32;
        let warps = (block_dim_x() / 32) as u64;
        let mut run = block_idx_x() as u64 * warps + (thread_idx_x() / 32) as u64;
        // Writes position p's results given its nearest background element
        // (both counted from base).
        let write = |base: u64, p: u32, nearest: u32| {
            let at = (base + p as u64) as usize;
            let k = if nearest == NONE { 0 } else { p.abs_diff(nearest) };
            // SAFETY: p is a position of the run at base: an element.
            unsafe {
                if !squared.is_null() {
                    // Integer rows are at most 12,288 long: k * k fits.
                    *squared.add(at) = if nearest == NONE { EDT_INFINITE } else { axis_cost(metric, k) };
                } else {
                    let d = k as f64 * sampling;
                    *squared_f64.add(at) = if nearest == NONE { f64::INFINITY } else { d * d };
                }
                if !features.is_null() {
                    *features.add(at) = if nearest == NONE { EDT_NO_FEATURE } else { (base + nearest as u64) as u32 };
                }
            }
        };
        // Flags volume `item` when a row of it held background. Every row
        // of a volume would store to its one word, and the stores to one
        // address queue: only a word still read as clear is written (a
        // stale read costs one more store of the same value).
        let flag = |item: u64, seen: bool| {
            if seen && lane == 0 {
                // SAFETY: background holds a word per volume; item < items.
                unsafe {
                    let word = background.add(item as usize);
                    if *word == 0 {
                        *word = 1;
                    }
                }
            }
        };
        // Rows of a multiple of 16 bytes from a 16-byte aligned mask: each
        // lane loads 16 positions at once (512 per warp), pairs of lanes
        // assemble a word; of a multiple of 4 from a 4-byte aligned one, 4
        // positions (128 per warp), groups of 8 lanes; else a byte per
        // lane and a ballot per word.
        let wide = length % 16 == 0 && mask as u64 % 16 == 0;
        let aligned = length % 4 == 0 && mask as u64 % 4 == 0;
        while run < runs {
            let first_row = run * per_warp;
            let count = (rows - first_row).min(per_warp) as u32;
            let base = first_row * length as u64;
            // The run's positions; a row ends at each multiple of length.
            let span = count * length;
            let mut state = RowState { last_zero: NONE, pending: 0 };
            let mut seen = false;
            // The run's row: where it ends, its volume and that volume's
            // rows from it on (one division per run).
            let item = first_row / rows_per_item;
            let left = (item + 1) * rows_per_item - first_row;
            let mut current = RunRow { end: length, item, left };
            // Before the word at w (< span): ends the row before it when w
            // starts a row (never with one row a run: its end is the span).
            let boundary = |state: &mut RowState, seen: &mut bool, row: &mut RunRow, w: u32| {
                if w == row.end {
                    state.finish(w, lane, |p, nearest| write(base, p, nearest));
                    flag(row.item, *seen);
                    *seen = false;
                    row.end += length;
                    row.left -= 1;
                    if row.left == 0 {
                        row.item += 1;
                        row.left = rows_per_item;
                    }
                }
            };
            // The words of the chunk from `chunk` (at most `words`, within
            // the span) whose background bits lane `k * lanes` holds in
            // `zeros` for word k.
            let chunk_words =
                |state: &mut RowState, seen: &mut bool, row: &mut RunRow, chunk: u32, zeros: u32, words: u32, lanes: u32| {
                    let mut k = 0;
                    while k < words && chunk + 32 * k < span {
                        // SAFETY: every lane is here (the loops are warp-uniform).
                        let bits = unsafe { shuffle_u32(zeros, lanes * k) };
                        let w = chunk + 32 * k;
                        boundary(state, seen, row, w);
                        *seen |= state.word(w, bits, lane, |p, nearest| write(base, p, nearest));
                        k += 1;
                    }
                };
            if wide {
                let mut chunk = 0u32;
                while chunk < span {
                    let x = chunk + 16 * lane;
                    // Positions past the run's end count as measured.
                    let bytes = if x < span {
                        // SAFETY: 16 positions of the run (span and x are
                        // multiples of 16), 16-byte aligned.
                        unsafe { load_16_bytes(mask.add((base + x as u64) as usize) as *const u32) }
                    } else {
                        [0x0101_0101; 4]
                    };
                    let nibble = gpu_waterz_abi::morphology::bytes_nibble;
                    let half = nibble(bytes[0]) | nibble(bytes[1]) << 4 | nibble(bytes[2]) << 8 | nibble(bytes[3]) << 12;
                    let pair = half << (16 * (lane % 2));
                    // SAFETY: every lane is here (the loops are warp-uniform).
                    let zeros = !(pair | unsafe { shuffle_xor_u32(pair, 1) });
                    chunk_words(&mut state, &mut seen, &mut current, chunk, zeros, 16, 2);
                    // Past u32::MAX - 512 the row ends (the host's bound).
                    chunk = chunk.saturating_add(512);
                }
            } else if aligned {
                let mut chunk = 0u32;
                while chunk < span {
                    let x = chunk + 4 * lane;
                    // Positions past the run's end count as measured.
                    let bytes = if x < span {
                        // SAFETY: 4 positions of the run, 4-byte aligned.
                        unsafe { *(mask.add((base + x as u64) as usize) as *const u32) }
                    } else {
                        0x0101_0101
                    };
                    // SAFETY: every lane is here (the loops are warp-uniform).
                    let zeros = unsafe { !nibble_word(bytes, lane) };
                    chunk_words(&mut state, &mut seen, &mut current, chunk, zeros, 4, 8);
                    // Past u32::MAX - 128 the row ends (the host's bound).
                    chunk = chunk.saturating_add(128);
                }
            } else {
                let mut word = 0u32;
                while word < span {
                    let x = word + lane;
                    // SAFETY: x < span: an element of the run.
                    let zero = x < span && unsafe { *mask.add((base + x as u64) as usize) } == 0;
                    // SAFETY: every lane is here (the loops are warp-uniform).
                    let bits = unsafe { ballot(zero) };
                    boundary(&mut state, &mut seen, &mut current, word);
                    seen |= state.word(word, bits, lane, |p, nearest| write(base, p, nearest));
                    word = word.saturating_add(32);
                }
            }
            state.finish(span, lane, |p, nearest| write(base, p, nearest));
            flag(current.item, seen);
            run += grid_dim_x() as u64 * warps;
        }
    }
}

/// The row of a run of `edt_rows` being walked (warp-uniform): the
/// position (from the run's start) where it ends, its volume and the rows
/// of that volume from it on.
struct RunRow {
    end: u32,
    item: u64,
    left: u64,
}

/// A row's walk in `edt_rows` (warp-uniform): its last background
/// element so far (`u32::MAX`: none) and the first position not written.
struct RowState {
    last_zero: u32,
    pending: u32,
}

impl RowState {
    /// The word of 32 positions from `word`, whose background elements are
    /// the set `bits`: when it holds one, writes the positions since the
    /// last background element (`write(p, nearest)`, lane `lane` taking
    /// every 32nd) and moves on. Returns whether it held one.
    #[inline(always)]
    fn word(&mut self, word: u32, bits: u32, lane: u32, write: impl Fn(u32, u32)) -> bool {
        if bits == 0 {
            return false;
        }
        let first = word + bits.trailing_zeros();
        let last = word + 31 - bits.leading_zeros();
        // The earlier words' pending positions lie between last_zero and
        // this word's first background element.
        let mut p = self.pending + lane;
        while p < word {
            write(p, nearer_of(self.last_zero, first, p));
            p += 32;
        }
        // This word's positions up to its last background element have one
        // on either side in the word, or last_zero on the left.
        let x = word + lane;
        if x <= last {
            let (below, above) = nearest_set_bits(bits, lane);
            let left = below.map_or(self.last_zero, |b| word + b);
            let right = above.map_or(u32::MAX, |b| word + b);
            write(x, nearer_of(left, right, x));
        }
        self.last_zero = last;
        self.pending = last + 1;
        true
    }

    /// Ends the row at `end` (exclusive): writes its positions after its
    /// last background element (or all of it, to none) and starts the next
    /// row there with none seen.
    #[inline(always)]
    fn finish(&mut self, end: u32, lane: u32, write: impl Fn(u32, u32)) {
        let mut p = self.pending.saturating_add(lane);
        while p < end {
            write(p, self.last_zero);
            p = p.saturating_add(32);
        }
        self.last_zero = u32::MAX;
        self.pending = end;
    }
}

kernel! {
    /// A float64 pass of the distance transform along `axis` (y or z, after
    /// `edt_rows`) of `items` volumes one after another: each element's
    /// least `value(q) + (s (p - q))²` over its line (within its volume),
    /// and (with features) the feature of the `q` that gives it.
    ///
    /// # Safety
    /// `input`, `output` and the features (unless null) hold one value per
    /// element of the `items` volumes of `dims` and the outputs overlap no
    /// input.
    ///
    /// # Parameters
    /// See [`EdtPassArgs`].
    ///
    /// # Thread mapping
    /// Grid-stride over the elements; adjacent threads take adjacent
    /// elements along x, so their reads along any axis are coalesced.
    pub unsafe extern "ptx-kernel" fn edt_pass(
        dims: Dims3,
        items: u64,
        axis: u32,
        last: u32,
        sampling: f64,
        input: *const f64,
        output: *mut f64,
        features_in: *const u32,
        features_out: *mut u32,
    ) as EdtPassArgs {
        // A line's position p counts within its volume, so the search
        // stays there.
        let n = items * dims.z * dims.y * dims.x;
        let (extent, stride) = match axis {
            0 => (dims.z, dims.y * dims.x),
            _ => (dims.y, dims.x),
        };
        grid_stride(n, |i| {
            let p = (i / stride) % extent;
            // SAFETY: every index read is i + k * stride with 0 <= p + k < extent: an element.
            let value = |k: i64| unsafe { *input.add((i as i64 + k * stride as i64) as usize) };
            let (best, at) = line_minimum(p, extent, sampling, value);
            // SAFETY: i and i + at * stride are elements.
            unsafe {
                *output.add(i as usize) = if last != 0 { sqrt_f64(best) } else { best };
                if !features_out.is_null() {
                    *features_out.add(i as usize) = *features_in.add((i as i64 + at * stride as i64) as usize);
                }
            }
        });
    }
}

/// The lines of the pass along `axis` of `items` volumes of `dims`: their
/// number, their length and the stride between their elements.
#[inline(always)]
fn line_geometry(dims: Dims3, items: u64, axis: u32) -> (u64, u64, u64) {
    // (lines, length, stride)
    match axis {
        0 => (items * dims.y * dims.x, dims.z, dims.y * dims.x),
        1 => (items * dims.z * dims.x, dims.y, dims.x),
        _ => (items * dims.z * dims.y, dims.x, 1),
    }
}

/// The first element of line `line` of the pass along `axis`: the z lines
/// of a volume are its plane's elements, the y lines a plane's columns
/// (the volumes' planes follow one another).
#[inline(always)]
fn line_base(dims: Dims3, axis: u32, line: u64) -> u64 {
    let plane = dims.y * dims.x;
    match axis {
        0 => (line / plane) * dims.z * plane + line % plane,
        1 => (line / dims.x) * plane + line % dims.x,
        _ => line * dims.x,
    }
}

kernel! {
    /// One integer pass of the distance transform along `axis` (y or z,
    /// unit spacing, exact, after `edt_rows`) of `items` volumes one after
    /// another, under `metric` (`METRIC_*`): each block holds
    /// `lines_per_block` neighbouring lines in shared memory (element `j`
    /// of line `l` at `j * L + l`, so that the loads of neighbouring lines
    /// are coalesced) and each element searches its line there
    /// (`line_minimum_metric`); with features, it takes the feature of the
    /// position that gives its minimum. A line without a finite cost (no
    /// background on the lines searched so far) is not searched: its
    /// elements stay infinite, with their own features. Unless
    /// `mean_radius` is [`EDT_SEARCH_EVERY_LINE`], a line whose elements'
    /// bounds on their search ([`search_radius_bound`]) exceed it on
    /// average ([`line_deferred`]) is neither searched nor written: its
    /// byte of `deferred` is set (else cleared) for `edt_envelope` or
    /// `edt_chamfer` to take it. The Euclidean metric's last pass writes
    /// the square roots as float64 distances, the others' costs.
    ///
    /// # Safety
    /// `input`, and `output` (every pass but the Euclidean last) or
    /// `distances` (that one), and the features (unless null) hold one
    /// value per element of the `items` volumes of `dims`; `deferred`
    /// holds a byte per line unless `mean_radius` is
    /// [`EDT_SEARCH_EVERY_LINE`]; outputs overlap no input; launched with
    /// [`EDT_LINE_THREADS`] threads and `lines_per_block * (length + 3) *
    /// 4` bytes of shared memory (the lines, then a word per line marking
    /// the group in which it held a finite cost, then two words per line
    /// for the sums of the bounds), `lines_per_block` a power of two
    /// dividing [`EDT_LINE_THREADS`].
    ///
    /// # Parameters
    /// See [`EdtLinesArgs`].
    ///
    /// # Thread mapping
    /// Blocks stride over groups of `lines_per_block` lines; thread `t`
    /// takes line `t % lines_per_block` of each group and its elements
    /// `t / lines_per_block`, then every `threads / lines_per_block`-th.
    pub unsafe extern "ptx-kernel" fn edt_lines(
        dims: Dims3,
        items: u64,
        axis: u32,
        last: u32,
        lines_per_block: u32,
        metric: u32,
        input: *const u32,
        output: *mut u32,
        distances: *mut f64,
        features_in: *const u32,
        features_out: *mut u32,
        mean_radius: u32,
        deferred: *mut u8,
    ) as EdtLinesArgs {
        let (lines, length, stride) = line_geometry(dims, items, axis);
        let roots = last != 0 && metric == METRIC_EUCLIDEAN;
        let defers = mean_radius != EDT_SEARCH_EVERY_LINE;
        // lines_per_block is a power of two dividing the block (the
        // host's), so each thread keeps one line of every group, `l`, and
        // steps along it by `step` elements: no division per element.
        let per = lines_per_block.max(1) as u64;
        let groups = lines.div_ceil(per);
        let shared = dynamic_shared::<u32>();
        // SAFETY: the marks follow the lines' length * per words, the two
        // rows of sums the marks.
        let (marks, sums) = unsafe { (shared.add((length * per) as usize), shared.add((length * per + per) as usize)) };
        let tid = thread_idx_x() as u64;
        let (l, first_j, step) = (tid % per, tid / per, block_dim_x() as u64 / per);
        if tid < per {
            // SAFETY: one of the per marks and of each row of per sums. No
            // group marks 0 (see below).
            unsafe {
                *marks.add(tid as usize) = 0;
                *sums.add(tid as usize) = 0;
                *sums.add((per + tid) as usize) = 0;
            }
        }
        // SAFETY: every thread reaches it, before any mark is set.
        unsafe { sync_threads() };
        let mut group = block_idx_x() as u64;
        // The sums of the groups alternate between the two rows: one is
        // summed and read while the other is cleared for the next group.
        let mut row = 0u64;
        while group < groups {
            let line = group * per + l;
            let start = if line < lines { line_base(dims, axis, line) } else { 0 };
            // The group's mark: never 0 below 2^32 - 1 groups per launch
            // (past that a stale mark only costs a search, never a value).
            let mark = (group as u32).wrapping_add(1);
            let mut bound = 0u32;
            let mut j = first_j;
            // The element's offsets in the volume and in the shared lines,
            // stepped (no multiplication per element).
            let (mut from, mut to) = (start + first_j * stride, first_j * per + l);
            while j < length {
                // SAFETY: element j of a line of the volume (from = start +
                // j * stride); to = j * per + l < length * per, the shared
                // words launched; l < per marks.
                unsafe {
                    let v = if line < lines { *input.add(from as usize) } else { EDT_INFINITE };
                    *shared.add(to as usize) = v;
                    if v != EDT_INFINITE {
                        *marks.add(l as usize) = mark;
                    }
                    if defers {
                        // At most length * length <= 12,288^2 per line.
                        bound += search_radius_bound(metric, v, length as u32);
                    }
                }
                j += step;
                from += step * stride;
                to += step * per;
            }
            // SAFETY: row < 2 and l < per: one of the 2 * per sums.
            let sum = unsafe { sums.add((row * per + l) as usize) };
            if defers {
                // SAFETY: one of this row's per sums, cleared before the
                // barrier that ended the group before (or the first one).
                unsafe { shared_atomic_add_u32(sum, bound) };
            }
            // SAFETY: every thread reaches it (the group loop is block-uniform).
            unsafe { sync_threads() };
            // SAFETY: l < per marks, set (or not) before the barrier.
            let finite = unsafe { *marks.add(l as usize) } == mark;
            // SAFETY: this row's sum of line l, complete at the barrier.
            let deferring = defers && finite && line_deferred(unsafe { *sum }, length as u32, mean_radius);
            if defers {
                if line < lines && first_j == 0 {
                    // SAFETY: deferred holds a byte per line; line < lines.
                    unsafe { *deferred.add(line as usize) = deferring as u8 };
                }
                if tid < per {
                    // SAFETY: one of the other row's sums, read by no one
                    // until the next group's barrier.
                    unsafe { *sums.add(((1 - row) * per + tid) as usize) = 0 };
                }
            }
            row = 1 - row;
            if line < lines && !deferring {
                // Line l's words in shared memory, every per-th from l; u32
                // offsets (below length * per, at most 12,288 * 32).
                // SAFETY: l < per: the first word of line l.
                let own = unsafe { shared.add(l as usize) };
                let per32 = per as u32;
                // SAFETY: q < length, so q * per + l is a shared word.
                let value = |q: u32| unsafe { *own.add((q * per32) as usize) };
                let mut p = first_j;
                let mut g = start + first_j * stride;
                while p < length {
                    // A line without a finite cost has nothing to search:
                    // infinite, with the element's own feature. The search
                    // is written out per metric (constant in its loop).
                    let (best, at) = if !finite {
                        (EDT_INFINITE, p as u32)
                    } else if metric == METRIC_EUCLIDEAN {
                        line_minimum_metric(METRIC_EUCLIDEAN, p as u32, length as u32, value)
                    } else if metric == METRIC_TAXICAB {
                        line_minimum_metric(METRIC_TAXICAB, p as u32, length as u32, value)
                    } else {
                        line_minimum_metric(METRIC_CHESSBOARD, p as u32, length as u32, value)
                    };
                    // SAFETY: g (start + p * stride) and the line's element
                    // at are elements of the volume.
                    unsafe {
                        if roots {
                            *distances.add(g as usize) = sqrt_f64(best as f64);
                        } else {
                            *output.add(g as usize) = best;
                        }
                        if !features_out.is_null() {
                            *features_out.add(g as usize) = *features_in.add((start + at as u64 * stride) as usize);
                        }
                    }
                    p += step;
                    g += step * stride;
                }
            }
            // SAFETY: every thread reaches it; the next group reuses the shared memory.
            unsafe { sync_threads() };
            group += grid_dim_x() as u64;
        }
    }
}

kernel! {
    /// scipy's indices from the flat features of `items` volumes one after
    /// another: for each element, the coordinates within its volume of its
    /// feature along the array's `rank` axes, one plane per axis (a
    /// volume's planes together); an element with no feature (no
    /// background in its volume) gets scipy's `(-1, 0, ..., 0)`, or its own
    /// coordinates with `unreached_own`.
    ///
    /// # Safety
    /// `features` holds one value per element of the `items` volumes of
    /// `dims`, each a flat index of an element of the same volume or
    /// `EDT_NO_FEATURE`; `indices` holds `rank` values per element; `1 <=
    /// rank <= 3` and the leading `3 - rank` extents are 1.
    ///
    /// # Parameters
    /// See [`EdtIndicesArgs`].
    ///
    /// # Thread mapping
    /// Grid-stride over the elements.
    pub unsafe extern "ptx-kernel" fn edt_indices(
        dims: Dims3,
        items: u64,
        rank: u32,
        unreached_own: u32,
        features: *const u32,
        indices: *mut i32,
    ) as EdtIndicesArgs {
        let volume = dims.z * dims.y * dims.x;
        grid_stride(items * volume, |i| {
            // SAFETY: i is an element.
            let f = unsafe { *features.add(i as usize) };
            let (item, own) = (i / volume, i % volume);
            // The feature's position within its volume (the whole batch
            // has fewer than 2^32 - 1 elements, so it fits u32), or none.
            let at = if f != EDT_NO_FEATURE {
                Some(f - (item * volume) as u32)
            } else if unreached_own != 0 {
                Some(own as u32)
            } else {
                None
            };
            // The position's (z, y, x), or scipy's point (-1, 0, ..., 0).
            let (plane, row) = ((dims.y * dims.x) as u32, dims.x as u32);
            let (z, y, x) = match at {
                Some(a) => ((a / plane) as i32, ((a % plane) / row) as i32, (a % row) as i32),
                None => (-1, 0, 0),
            };
            let base = (item * volume * rank as u64 + own) as usize;
            let v = volume as usize;
            // SAFETY: the volume's rank planes of `volume` values each lie
            // within items * volume * rank values; own < volume.
            unsafe {
                match rank {
                    3 => {
                        *indices.add(base) = z;
                        *indices.add(base + v) = y;
                        *indices.add(base + 2 * v) = x;
                    }
                    // Ranks below 3 have leading extents of 1 (z = 0); no
                    // feature gives -1 on the first axis written.
                    2 => {
                        *indices.add(base) = if at.is_none() { -1 } else { y };
                        *indices.add(base + v) = x;
                    }
                    _ => *indices.add(base) = if at.is_none() { -1 } else { x },
                }
            }
        });
    }
}

kernel! {
    /// One integer pass of the Euclidean distance transform along `axis`
    /// (y or z, unit spacing, exact, after `edt_rows`) of `items` volumes
    /// one after another: each line's lower envelope of parabolas
    /// (`lower_envelope`), linear in its length whatever the distances,
    /// the line read from and its envelope kept in global memory; with
    /// features, each element takes the feature of the position that gives
    /// its minimum. With `deferred`, only the lines whose byte is set.
    ///
    /// # Safety
    /// `input`, `stack`, and `output` (passes but the last) or `distances`
    /// (the last), and the features (unless null) hold one value per
    /// element of the `items` volumes of `dims`; `deferred`, unless null,
    /// a byte per line; outputs overlap no input and `stack` nothing else;
    /// squared distances fit `u32` (lines of at most 12,288 elements).
    ///
    /// # Parameters
    /// See [`EdtEnvelopeArgs`].
    ///
    /// # Thread mapping
    /// A thread per line (grid-stride over the lines); neighbouring threads
    /// take neighbouring lines, whose elements are neighbours along x, so
    /// that their reads and writes at the same position are coalesced (the
    /// envelope's entry `k` of line `l` at `k * lines + l` too).
    pub unsafe extern "ptx-kernel" fn edt_envelope(
        dims: Dims3,
        items: u64,
        axis: u32,
        last: u32,
        input: *const u32,
        output: *mut u32,
        distances: *mut f64,
        features_in: *const u32,
        features_out: *mut u32,
        stack: *mut u32,
        deferred: *const u8,
    ) as EdtEnvelopeArgs {
        let (lines, length, stride) = line_geometry(dims, items, axis);
        grid_stride(lines, |line| {
            // SAFETY: deferred, unless null, holds a byte per line.
            if !deferred.is_null() && unsafe { *deferred.add(line as usize) } == 0 {
                return;
            }
            let start = line_base(dims, axis, line);
            let at = |j: u32| (start + j as u64 * stride) as usize;
            let slot = |k: u32| (k as u64 * lines + line) as usize;
            lower_envelope(
                length as u32,
                // SAFETY: j < length: an element of the line.
                |j| unsafe { *input.add(at(j)) },
                // SAFETY: k < length: slot(k) < length * lines, the elements.
                |k| unsafe { *stack.add(slot(k)) },
                // SAFETY: as above; stack is this kernel's alone.
                |k, x| unsafe { *stack.add(slot(k)) = x },
                |p, best, q| {
                    let g = at(p);
                    // SAFETY: p and q are positions of the line: elements.
                    unsafe {
                        if last != 0 {
                            *distances.add(g) = sqrt_f64(best as f64);
                        } else {
                            *output.add(g) = best;
                        }
                        if !features_out.is_null() {
                            *features_out.add(g) = *features_in.add(at(q));
                        }
                    }
                },
            );
        });
    }
}

kernel! {
    /// One pass of the chamfer transform (taxicab or chessboard) along
    /// `axis` (y or z, after `edt_rows`) of `items` volumes one after
    /// another: each line's two sweeps (`chamfer_line`), linear in its
    /// length whatever the distances, in global memory; the forward sweep's
    /// costs wait in `output` and its positions in `features_out`; with
    /// features, each element takes the feature of the position that gives
    /// its minimum. With `deferred`, only the lines whose byte is set.
    ///
    /// # Safety
    /// `input`, `output`, `stack` and the features (unless null) hold one
    /// value per element of the `items` volumes of `dims`; `deferred`,
    /// unless null, a byte per line; outputs overlap no input and `stack`
    /// nothing else; `metric` is `METRIC_TAXICAB` or `METRIC_CHESSBOARD`.
    ///
    /// # Parameters
    /// See [`EdtChamferArgs`].
    ///
    /// # Thread mapping
    /// A thread per line (grid-stride over the lines), as `edt_envelope`.
    pub unsafe extern "ptx-kernel" fn edt_chamfer(
        dims: Dims3,
        items: u64,
        axis: u32,
        metric: u32,
        input: *const u32,
        output: *mut u32,
        features_in: *const u32,
        features_out: *mut u32,
        stack: *mut u32,
        deferred: *const u8,
    ) as EdtChamferArgs {
        let (lines, length, stride) = line_geometry(dims, items, axis);
        let features = !features_out.is_null();
        grid_stride(lines, |line| {
            // SAFETY: deferred, unless null, holds a byte per line.
            if !deferred.is_null() && unsafe { *deferred.add(line as usize) } == 0 {
                return;
            }
            let start = line_base(dims, axis, line);
            let at = |j: u32| (start + j as u64 * stride) as usize;
            let slot = |k: u32| (k as u64 * lines + line) as usize;
            chamfer_line(
                metric,
                length as u32,
                // SAFETY: j < length: an element of the line.
                |j| unsafe { *input.add(at(j)) },
                // SAFETY: k < length: slot(k) < length * lines, the elements.
                |k| unsafe { *stack.add(slot(k)) },
                // SAFETY: as above; stack is this kernel's alone.
                |k, x| unsafe { *stack.add(slot(k)) = x },
                // SAFETY: p is a position of the line: an element.
                |p, cost, q| unsafe {
                    *output.add(at(p)) = cost;
                    if features {
                        *features_out.add(at(p)) = q;
                    }
                },
                // SAFETY: as above; written by the forward sweep.
                |p| unsafe { (*output.add(at(p)), if features { *features_out.add(at(p)) } else { 0 }) },
                // SAFETY: p and q are positions of the line: elements.
                |p, best, q| unsafe {
                    *output.add(at(p)) = best;
                    if features {
                        *features_out.add(at(p)) = *features_in.add(at(q));
                    }
                },
            );
        });
    }
}
