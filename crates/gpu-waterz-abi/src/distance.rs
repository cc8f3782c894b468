//! The exact Euclidean distance transform: the argument structs of its
//! passes (`edt_rows` along x, then `edt_lines` or `edt_pass` along y and
//! z, `edt_indices` for the feature transform) and the per-element logic
//! they run.

/// The least `value(q) + (s (p - q))²` over the positions `q` of a line
/// of `n` elements, for the element at `p`, and the offset `q - p` of the
/// first position that gives it; `value(k)` is the value at `p + k` (the
/// caller keeps `0 <= p + k < n`). The search walks outward from `p` and
/// stops once `(s k)²` alone reaches the best value found, so the result
/// is the exact minimum of the float64 sums it compares.
#[inline(always)]
pub fn line_minimum(p: u64, n: u64, s: f64, value: impl Fn(i64) -> f64) -> (f64, i64) {
    let mut best = value(0);
    let mut at = 0i64;
    let mut k: u64 = 1;
    while k < n {
        let d = k as f64 * s;
        let d2 = d * d;
        if d2 >= best {
            break;
        }
        let below = k <= p;
        let above = p + k < n;
        if !below && !above {
            break;
        }
        if below {
            let v = value(-(k as i64)) + d2;
            if v < best {
                (best, at) = (v, -(k as i64));
            }
        }
        if above {
            let v = value(k as i64) + d2;
            if v < best {
                (best, at) = (v, k as i64);
            }
        }
        k += 1;
    }
    (best, at)
}

/// The positions, within one 32-position word of a row, of the nearest set
/// bits of `bits` at or below `lane` and at or above it (`None`: none in the
/// word). The first pass of the distance transform finds a row's
/// background elements this way, a warp's ballot per word.
#[inline(always)]
pub fn nearest_set_bits(bits: u32, lane: u32) -> (Option<u32>, Option<u32>) {
    let at_or_below = bits & (u32::MAX >> (31 - lane));
    let at_or_above = bits & (u32::MAX << lane);
    (
        (at_or_below != 0).then(|| 31 - at_or_below.leading_zeros()),
        (at_or_above != 0).then(|| at_or_above.trailing_zeros()),
    )
}

/// The nearer of two positions `left <= p <= right` of a row to `p` (the
/// left one on a tie), `u32::MAX` standing for none; `u32::MAX` if neither
/// exists.
#[inline(always)]
pub fn nearer_of(left: u32, right: u32, p: u32) -> u32 {
    match (left != u32::MAX, right != u32::MAX) {
        (true, true) => {
            if p - left <= right - p {
                left
            } else {
                right
            }
        }
        (true, false) => left,
        (false, true) => right,
        (false, false) => u32::MAX,
    }
}

/// The squared Euclidean metric of the integer passes: a step of `k`
/// elements costs `k²` and costs along axes add.
pub const METRIC_EUCLIDEAN: u32 = 0;
/// The taxicab (city-block) metric: a step of `k` costs `k`; costs add.
pub const METRIC_TAXICAB: u32 = 1;
/// The chessboard metric: a step of `k` costs `k`; the larger cost counts.
pub const METRIC_CHESSBOARD: u32 = 2;

/// The cost of `k` elements along one axis under `metric` (one of the
/// `METRIC_*` constants): `k²` for the squared Euclidean metric, else `k`.
/// The callers keep `k` below 2^16 for the squared metric.
#[inline(always)]
pub const fn axis_cost(metric: u32, k: u32) -> u32 {
    if metric == METRIC_EUCLIDEAN {
        k.wrapping_mul(k)
    } else {
        k
    }
}

/// The cost of reaching a background element at cost `value` over the
/// earlier axes and `step` along this one: their sum, or for the
/// chessboard metric the larger. [`EDT_INFINITE`] (none) stays infinite.
#[inline(always)]
pub const fn combine_cost(metric: u32, value: u32, step: u32) -> u32 {
    if value == EDT_INFINITE {
        EDT_INFINITE
    } else if metric == METRIC_CHESSBOARD {
        if value > step {
            value
        } else {
            step
        }
    } else {
        value + step
    }
}

/// Arguments of `edt_rows`: the first pass of the distance transform,
/// along x, from the mask (rows of fewer than `u32::MAX` elements), of
/// `items` volumes of `dims` one after another.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EdtRowsArgs {
    /// One volume.
    pub dims: crate::Dims3,
    /// The volumes, one after another.
    pub items: u64,
    /// The integer output's metric (`METRIC_*`): the cost of `k` elements
    /// is [`axis_cost`].
    pub metric: u32,
    /// Rows per warp ([`edt_rows_per_warp`]), taken only where the rows
    /// are a multiple of 32 long and at most [`EDT_ROW_RUN_MAX_LENGTH`]
    /// (at most [`EDT_ROW_RUN_MAX_ROWS`]; 0 counts as 1).
    pub rows_per_warp: u32,
    /// The spacing along x (the float64 output).
    pub sampling: f64,
    /// The mask: 0 is background, any other byte is measured.
    pub mask: *const u8,
    /// Out: each element's cost to its row's nearest background element
    /// ([`axis_cost`] of the elements between; unit spacing), or null.
    pub squared: *mut u32,
    /// Out: squared distances in float64 (with `sampling`), or null.
    pub squared_f64: *mut f64,
    /// Out (unless null): the flat index of each element's nearest
    /// background element along its row, [`EDT_NO_FEATURE`] for none.
    pub features: *mut u32,
    /// One word per volume: set to 1 if any of its elements is background.
    pub background: *mut u32,
}

/// A feature (the flat index of a nearest background element) not found
/// yet: no background on the lines searched so far.
pub const EDT_NO_FEATURE: u32 = u32::MAX;

/// Threads per block of `edt_rows` (a warp per run of rows).
pub const EDT_ROW_THREADS: u32 = 256;

/// The positions a warp of `edt_rows` walks per run where rows are short:
/// its loads take 128 positions at a time, so a row of 64 alone leaves
/// half of the warp idle, and each row costs its own start and end.
pub const EDT_ROW_RUN: u32 = 512;

/// The longest rows that `edt_rows` walks several to a warp.
pub const EDT_ROW_RUN_MAX_LENGTH: u32 = 1024;

/// The most rows that `edt_rows` walks in one run.
pub const EDT_ROW_RUN_MAX_ROWS: u32 = 64;

/// The rows per warp of `edt_rows` for rows of `length` elements: as many
/// as fill [`EDT_ROW_RUN`] positions where the rows are a multiple of 32
/// long (their ends fall on the walk's words), else one.
pub fn edt_rows_per_warp(length: u64) -> u32 {
    if length > 0 && length.is_multiple_of(32) && length < EDT_ROW_RUN as u64 {
        (EDT_ROW_RUN / length as u32).min(EDT_ROW_RUN_MAX_ROWS)
    } else {
        1
    }
}

/// Arguments of `edt_pass`: one float64 pass of the distance transform
/// along `axis` (y or z) of `items` `(z, y, x)` volumes one after another,
/// after `edt_rows`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EdtPassArgs {
    /// One volume.
    pub dims: crate::Dims3,
    /// The volumes, one after another.
    pub items: u64,
    /// The axis (0: z, 1: y).
    pub axis: u32,
    /// The last pass writes square roots.
    pub last: u32,
    /// The spacing along `axis`.
    pub sampling: f64,
    /// Squared distances so far.
    pub input: *const f64,
    /// Out: squared distances (or distances, last pass).
    pub output: *mut f64,
    /// The features so far (null: none are kept).
    pub features_in: *const u32,
    /// Out: the features after this pass (null when `features_in` is).
    pub features_out: *mut u32,
}

/// Threads per block of `edt_lines`.
pub const EDT_LINE_THREADS: u32 = 256;
/// Bytes of shared memory `edt_lines` may take per block (the lines it
/// holds, 4 bytes per element).
pub const EDT_LINE_SHARED_BYTES: u32 = 48 * 1024;
/// An unreached squared distance in the integer passes.
pub const EDT_INFINITE: u32 = u32::MAX;

/// Lines per block of `edt_lines` for lines of `n` elements: one when the
/// lines are `contiguous` (rows), else the most, up to 32 and a power of
/// two, whose elements fit [`EDT_LINE_SHARED_BYTES`]; 0 when one line does
/// not fit.
pub const fn edt_lines_per_block(n: u64, contiguous: bool) -> u32 {
    let fit = EDT_LINE_SHARED_BYTES as u64 / (4 * if n == 0 { 1 } else { n });
    if fit == 0 {
        return 0;
    }
    if contiguous {
        return 1;
    }
    let mut lines = 32;
    while lines as u64 > fit {
        lines /= 2;
    }
    lines
}

/// The integer form of [`line_minimum`] for unit spacing under `metric`
/// (`METRIC_*`): the least [`combine_cost`] of `value(q)` and
/// [`axis_cost`]`(|p - q|)` with [`EDT_INFINITE`] for no value, and the
/// first `q` that gives it (`p` when none is finite); exact. The search
/// walks outward and stops once the step's cost alone reaches the best.
#[inline(always)]
pub fn line_minimum_metric(metric: u32, p: u32, n: u32, value: impl Fn(u32) -> u32) -> (u32, u32) {
    let mut best = value(p);
    let mut at = p;
    let mut k: u32 = 1;
    while k < n {
        let step = axis_cost(metric, k);
        if step >= best {
            break;
        }
        let below = k <= p;
        let above = p + k < n;
        if !below && !above {
            break;
        }
        if below {
            let v = combine_cost(metric, value(p - k), step);
            if v < best {
                (best, at) = (v, p - k);
            }
        }
        if above {
            let v = combine_cost(metric, value(p + k), step);
            if v < best {
                (best, at) = (v, p + k);
            }
        }
        k += 1;
    }
    (best, at)
}

/// `f + x²` of the parabola at position `x` with value `f`, in i64.
#[inline(always)]
fn parabola_height((x, f): (u32, u32)) -> i64 {
    f as i64 + x as i64 * x as i64
}

/// Whether the parabola `f + (p - x)²` at `v` leaves the lower envelope
/// when the one at `q` arrives, `u` being the one before `v` on it (`u.0 <
/// v.0 < q.0`, finite values): where `q` overtakes `v` is not past where
/// `v` overtakes `u`. Exact (integers).
#[inline(always)]
pub fn parabola_hidden(u: (u32, u32), v: (u32, u32), q: (u32, u32)) -> bool {
    let (hu, hv, hq) = (parabola_height(u), parabola_height(v), parabola_height(q));
    (hq - hv) * (v.0 as i64 - u.0 as i64) <= (hv - hu) * (q.0 as i64 - v.0 as i64)
}

/// Whether the parabola at `b` is lower than the one at `a` (`a.0 <
/// b.0`) past position `p`: they cross before `p`. Exact (integers).
#[inline(always)]
pub fn parabola_overtakes(a: (u32, u32), b: (u32, u32), p: u32) -> bool {
    parabola_height(b) - parabola_height(a) < 2 * p as i64 * (b.0 as i64 - a.0 as i64)
}

/// The lower envelope of the parabolas `value(q) + (p - q)²` of a line of
/// `n` elements ([`EDT_INFINITE`]: none at `q`), Felzenszwalb and
/// Huttenlocher's, in integers: calls `write(p, best, q)` for every `p`
/// in order with the least value and a position `q` that gives it (`p`
/// and [`EDT_INFINITE`] when no value is finite). `stack` reads and
/// `push` writes entry `k` of a scratch of `n` positions (the envelope's
/// parabolas, left to right). Linear in `n`: each position is pushed and
/// popped at most once; `value` is read once per position in order and
/// about once more per entry pushed.
#[inline(always)]
pub fn lower_envelope(
    n: u32,
    value: impl Fn(u32) -> u32,
    stack: impl Fn(u32) -> u32,
    mut push: impl FnMut(u32, u32),
    mut write: impl FnMut(u32, u32, u32),
) {
    // The envelope's last two parabolas (position, value) are kept here;
    // `top` counts the entries.
    let mut top: u32 = 0;
    let mut last = (0u32, 0u32);
    let mut before = (0u32, 0u32);
    let mut q = 0;
    while q < n {
        let f = value(q);
        if f != EDT_INFINITE {
            let arriving = (q, f);
            while top >= 2 && parabola_hidden(before, last, arriving) {
                top -= 1;
                last = before;
                if top >= 2 {
                    let x = stack(top - 2);
                    before = (x, value(x));
                }
            }
            push(top, q);
            top += 1;
            before = last;
            last = arriving;
        }
        q += 1;
    }
    if top == 0 {
        let mut p = 0;
        while p < n {
            write(p, EDT_INFINITE, p);
            p += 1;
        }
        return;
    }
    let entry = |k: u32| {
        let x = stack(k);
        (x, value(x))
    };
    let mut k = 0;
    let mut a = entry(0);
    let mut b = if top > 1 { entry(1) } else { a };
    let mut p = 0;
    while p < n {
        while k + 1 < top && parabola_overtakes(a, b, p) {
            k += 1;
            a = b;
            if k + 1 < top {
                b = entry(k + 1);
            }
        }
        let d = p.abs_diff(a.0);
        write(p, a.1 + d * d, a.0);
        p += 1;
    }
}

/// The chamfer pass of a line of `n` elements under `metric`
/// ([`METRIC_TAXICAB`] or [`METRIC_CHESSBOARD`]): for every `p`, the least
/// [`combine_cost`] of `value(q)` ([`EDT_INFINITE`]: none) and `|p - q|`,
/// and a `q` that gives it (`p` when none is finite), by a sweep each way,
/// linear in `n`. The forward sweep's `(cost, q)` for each `p` goes to
/// `keep(p, cost, q)` and comes back from `kept(p)` in the backward sweep,
/// which calls `write(p, best, q)` for every `p` from the last to the
/// first (after `kept(p)`). Taxicab: `cost(p) = min(value(p), 1 +
/// cost(p ∓ 1))`. Chessboard: a stack of positions (`stack`, `push`: entry `k`)
/// whose values rise from the bottom; a position whose value is at least a
/// later one's never gives a minimum again and leaves it; the entries
/// from `cursor` on are those with `q + value(q)` (in the sweep's
/// direction) not behind `p`, so the least cost is the cursor's value or
/// the distance to the entry below it.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn chamfer_line(
    metric: u32,
    n: u32,
    value: impl Fn(u32) -> u32,
    stack: impl Fn(u32) -> u32,
    mut push: impl FnMut(u32, u32),
    mut keep: impl FnMut(u32, u32, u32),
    kept: impl Fn(u32) -> (u32, u32),
    mut write: impl FnMut(u32, u32, u32),
) {
    chamfer_sweep(true, metric, n, &value, &stack, &mut push, &mut keep);
    chamfer_sweep(false, metric, n, &value, &stack, &mut push, |p, best, q| {
        let (earlier, from) = kept(p);
        if earlier <= best {
            write(p, earlier, from);
        } else {
            write(p, best, q);
        }
    });
}

/// One sweep of [`chamfer_line`], `forward` (positions in order) or
/// backward: `emit(p, cost, q)` for every position in the sweep's order,
/// the least cost from positions at or before it in that order.
#[inline(always)]
fn chamfer_sweep(
    forward: bool,
    metric: u32,
    n: u32,
    value: impl Fn(u32) -> u32,
    stack: impl Fn(u32) -> u32,
    mut push: impl FnMut(u32, u32),
    mut emit: impl FnMut(u32, u32, u32),
) {
    let at = |i: u32| if forward { i } else { n - 1 - i };
    if metric == METRIC_CHESSBOARD {
        let (mut len, mut cursor) = (0u32, 0u32);
        let mut i = 0;
        while i < n {
            let p = at(i);
            let f = value(p);
            if f != EDT_INFINITE {
                while len > 0 && value(stack(len - 1)) >= f {
                    len -= 1;
                }
                push(len, p);
                len += 1;
                if cursor > len - 1 {
                    cursor = len - 1;
                }
            }
            // Entries whose value no longer covers the distance to p fall
            // behind the cursor.
            while cursor < len && value(stack(cursor)) < stack(cursor).abs_diff(p) {
                cursor += 1;
            }
            let (mut best, mut from) = (EDT_INFINITE, p);
            if cursor < len {
                let q = stack(cursor);
                (best, from) = (value(q), q);
            }
            if cursor > 0 {
                let q = stack(cursor - 1);
                if q.abs_diff(p) < best {
                    (best, from) = (q.abs_diff(p), q);
                }
            }
            emit(p, best, from);
            i += 1;
        }
    } else {
        let (mut best, mut from) = (EDT_INFINITE, 0u32);
        let mut i = 0;
        while i < n {
            let p = at(i);
            let f = value(p);
            let carried = if best == EDT_INFINITE { EDT_INFINITE } else { best + 1 };
            if f <= carried && f != EDT_INFINITE {
                (best, from) = (f, p);
            } else {
                best = carried;
            }
            emit(p, best, if best == EDT_INFINITE { p } else { from });
            i += 1;
        }
    }
}

/// Arguments of `edt_chamfer`: one pass of the chamfer transform (taxicab
/// or chessboard) along `axis` (y or z) of `items` volumes one after
/// another, after `edt_rows`: each line's [`chamfer_line`] by one thread,
/// in global memory.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EdtChamferArgs {
    /// One volume.
    pub dims: crate::Dims3,
    /// The volumes, one after another.
    pub items: u64,
    /// The axis (0: z, 1: y).
    pub axis: u32,
    /// [`METRIC_TAXICAB`] or [`METRIC_CHESSBOARD`].
    pub metric: u32,
    /// Costs so far.
    pub input: *const u32,
    /// Out: costs ([`EDT_INFINITE`] for none, -1 as an int32).
    pub output: *mut u32,
    /// The features so far (null: none are kept).
    pub features_in: *const u32,
    /// Out: the features after this pass (null when `features_in` is);
    /// holds the forward sweep's positions in between.
    pub features_out: *mut u32,
    /// Scratch: the chessboard sweeps' stacks, one word per element (entry
    /// `k` of line `l` at `k * lines + l`).
    pub stack: *mut u32,
    /// A byte per line: non-zero for the lines this pass takes (those
    /// `edt_lines` deferred); null: every line.
    pub deferred: *const u8,
}

/// Arguments of `edt_envelope`: one integer pass (unit spacing, the
/// squared Euclidean metric) of the distance transform along `axis` (y or
/// z) of `items` volumes one after another, after `edt_rows`: each line's
/// [`lower_envelope`] by one thread, in global memory.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EdtEnvelopeArgs {
    /// One volume.
    pub dims: crate::Dims3,
    /// The volumes, one after another.
    pub items: u64,
    /// The axis (0: z, 1: y).
    pub axis: u32,
    /// The last pass writes float64 distances to `distances`; the others
    /// squared distances to `output`.
    pub last: u32,
    /// Squared distances so far.
    pub input: *const u32,
    /// Out: squared distances (passes but the last).
    pub output: *mut u32,
    /// Out: distances (the last pass).
    pub distances: *mut f64,
    /// The features so far (null: none are kept).
    pub features_in: *const u32,
    /// Out: the features after this pass (null when `features_in` is).
    pub features_out: *mut u32,
    /// Scratch: the envelopes' positions, one word per element (entry `k`
    /// of line `l` at `k * lines + l`).
    pub stack: *mut u32,
    /// A byte per line: non-zero for the lines this pass takes (those
    /// `edt_lines` deferred); null: every line.
    pub deferred: *const u8,
}

/// Arguments of `edt_lines`: one integer pass (unit spacing) of the
/// distance transform along `axis` (y or z) of `items` volumes one after
/// another, after `edt_rows`, a group of lines per block held in shared
/// memory.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EdtLinesArgs {
    /// One volume.
    pub dims: crate::Dims3,
    /// The volumes, one after another.
    pub items: u64,
    /// The axis (0: z, 1: y).
    pub axis: u32,
    /// The last pass of the Euclidean metric writes float64 distances to
    /// `distances`; every other pass writes costs to `output`.
    pub last: u32,
    /// Lines per block ([`edt_lines_per_block`]).
    pub lines_per_block: u32,
    /// The metric (`METRIC_*`).
    pub metric: u32,
    /// Costs so far.
    pub input: *const u32,
    /// Out: costs (every pass but the Euclidean metric's last; the
    /// chamfer metrics' last pass writes their distances, [`EDT_INFINITE`]
    /// for none, which is -1 as an int32).
    pub output: *mut u32,
    /// Out: distances (the Euclidean metric's last pass).
    pub distances: *mut f64,
    /// The features so far (null: none are kept).
    pub features_in: *const u32,
    /// Out: the features after this pass (null when `features_in` is).
    pub features_out: *mut u32,
    /// The lines whose bound on the mean search radius
    /// ([`search_radius_bound`] over their elements) exceeds this are not
    /// searched: their byte of `deferred` is set for `edt_envelope` or
    /// `edt_chamfer` to take them ([`EDT_SEARCH_EVERY_LINE`]: none).
    pub mean_radius: u32,
    /// Out: a byte per line (null when `mean_radius` is
    /// [`EDT_SEARCH_EVERY_LINE`]): 1 for a line deferred, else 0.
    pub deferred: *mut u8,
}

/// `mean_radius` of [`EdtLinesArgs`] that searches every line.
pub const EDT_SEARCH_EVERY_LINE: u32 = u32::MAX;

/// About how far at most [`line_minimum_metric`] searches from an element
/// whose own cost is `value` on a line of `length`: the step whose cost
/// reaches `value` (for the Euclidean metric its square root, estimated
/// by one Newton step from the power of two above it: at least the root's
/// integer part, at most a quarter more and one; `value` itself for the
/// chamfer metrics), at most `length` (also for no finite cost). The
/// search stops sooner when a neighbour's cost is lower.
#[inline(always)]
pub fn search_radius_bound(metric: u32, value: u32, length: u32) -> u32 {
    if value == EDT_INFINITE {
        return length;
    }
    let radius = if metric == METRIC_EUCLIDEAN {
        if value == 0 {
            0
        } else {
            // 2^s with s = ceil(bits / 2) is at least the root and at most
            // twice it; Newton's step from above stays above it.
            let s = (32 - value.leading_zeros()).div_ceil(2);
            let r = 1u32 << s;
            (r + (value >> s)).div_ceil(2)
        }
    } else {
        value
    };
    radius.min(length)
}

/// Whether `edt_lines` defers a line of `length` whose elements' bounds
/// ([`search_radius_bound`]) sum to `sum`: their mean exceeds
/// `mean_radius`.
#[inline(always)]
pub fn line_deferred(sum: u32, length: u32, mean_radius: u32) -> bool {
    mean_radius != EDT_SEARCH_EVERY_LINE && sum as u64 > mean_radius as u64 * length as u64
}

/// Arguments of `edt_indices`: scipy's indices (int32, `(rank,) + shape`
/// per volume, the volumes one after another) from the flat features;
/// [`EDT_NO_FEATURE`] gives scipy's point for no background, `(-1, 0,
/// ..., 0)`, or with `unreached_own` the element's own coordinates (the
/// chamfer transform's).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EdtIndicesArgs {
    /// One volume (leading axes of extent 1 for ranks below 3).
    pub dims: crate::Dims3,
    /// The volumes, one after another.
    pub items: u64,
    /// The array's rank, 1 to 3: the trailing `rank` axes are written.
    pub rank: u32,
    /// An element without a feature gets its own coordinates (1) or
    /// scipy's `(-1, 0, ..., 0)` (0).
    pub unreached_own: u32,
    /// The flat index (within the whole batch) of each element's nearest
    /// background element.
    pub features: *const u32,
    /// Out: per volume, `rank` planes of one int32 per element.
    pub indices: *mut i32,
}

impl_kernel_args!(
    EdtRowsArgs => EdtRows { dims, items, metric, rows_per_warp, sampling, mask, squared, squared_f64, features, background },
    EdtPassArgs => EdtPass { dims, items, axis, last, sampling, input, output, features_in, features_out },
    EdtLinesArgs => EdtLines {
        dims, items, axis, last, lines_per_block, metric, input, output, distances, features_in, features_out,
        mean_radius, deferred
    },
    EdtIndicesArgs => EdtIndices { dims, items, rank, unreached_own, features, indices },
    EdtChamferArgs => EdtChamfer {
        dims, items, axis, metric, input, output, features_in, features_out, stack, deferred
    },
    EdtEnvelopeArgs => EdtEnvelope {
        dims, items, axis, last, input, output, distances, features_in, features_out, stack, deferred
    },
);

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    #[test]
    fn line_minimum_is_the_minimum() {
        let f = [f64::INFINITY, 4.0, f64::INFINITY, 0.0, f64::INFINITY, f64::INFINITY, 9.0];
        let cost = |p: usize, q: usize| f[q] + ((p as f64 - q as f64) * 1.5).powi(2);
        for p in 0..f.len() {
            let want = (0..f.len()).map(|q| cost(p, q)).fold(f64::INFINITY, f64::min);
            let (got, at) = line_minimum(p as u64, f.len() as u64, 1.5, |k| f[(p as i64 + k) as usize]);
            assert_eq!(got, want, "p = {p}");
            assert_eq!(cost(p, (p as i64 + at) as usize), want, "p = {p}: the offset gives the minimum");
        }
        assert_eq!(line_minimum(0, 3, 1.0, |_| f64::INFINITY), (f64::INFINITY, 0));
        let g = [EDT_INFINITE, 4, EDT_INFINITE, 0, EDT_INFINITE, EDT_INFINITE, 9];
        let cost = |p: u32, q: u32| g[q as usize] + (p as i64 - q as i64).pow(2) as u32;
        for p in 0..g.len() as u32 {
            let want =
                (0..g.len() as u32).filter(|&q| g[q as usize] != EDT_INFINITE).map(|q| cost(p, q)).min().unwrap();
            let (got, at) = line_minimum_metric(METRIC_EUCLIDEAN, p, g.len() as u32, |q| g[q as usize]);
            assert_eq!(got, want, "p = {p}");
            assert_eq!(cost(p, at), want, "p = {p}: the position gives the minimum");
        }
        assert_eq!(line_minimum_metric(METRIC_EUCLIDEAN, 1, 3, |_| EDT_INFINITE), (EDT_INFINITE, 1));
        assert_eq!(edt_lines_per_block(512, true), 1);
        assert_eq!(edt_lines_per_block(512, false), 16);
        assert_eq!(edt_lines_per_block(100_000, false), 0);
    }

    #[test]
    fn chamfer_line_minima_are_the_brute_force_minima() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for case in 0..400u32 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let n = 1 + (state >> 40) as usize % 40;
            let values: Vec<u32> = (0..n)
                .map(|i| {
                    let r = (state >> (i % 50)) as u32 ^ (i as u32).wrapping_mul(2654435761);
                    if r.is_multiple_of(3) && !case.is_multiple_of(7) {
                        r % 23
                    } else {
                        EDT_INFINITE
                    }
                })
                .collect();
            for metric in [METRIC_EUCLIDEAN, METRIC_TAXICAB, METRIC_CHESSBOARD] {
                for p in 0..n as u32 {
                    let cost = |q: u32| combine_cost(metric, values[q as usize], axis_cost(metric, p.abs_diff(q)));
                    let want = (0..n as u32).map(cost).min().unwrap();
                    let (got, at) = line_minimum_metric(metric, p, n as u32, |q| values[q as usize]);
                    assert_eq!(got, want, "metric {metric}, case {case}, p = {p}");
                    assert_eq!(cost(at), want, "metric {metric}, case {case}, p = {p}: the position gives it");
                    if want == EDT_INFINITE {
                        assert_eq!(at, p, "none: the element's own position");
                    }
                }
            }
        }
        assert_eq!(combine_cost(METRIC_CHESSBOARD, 3, 5), 5);
        assert_eq!(combine_cost(METRIC_CHESSBOARD, 7, 5), 7);
        assert_eq!(combine_cost(METRIC_TAXICAB, 3, 5), 8);
        assert_eq!(combine_cost(METRIC_TAXICAB, EDT_INFINITE, 5), EDT_INFINITE);
        assert_eq!(axis_cost(METRIC_EUCLIDEAN, 7), 49);
        assert_eq!(axis_cost(METRIC_CHESSBOARD, 7), 7);
    }

    #[test]
    fn lower_envelopes_are_the_brute_force_minima() {
        let mut state = 0x51_7cc1_b727_220au64;
        for case in 0..600u32 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let n = 1 + (state >> 40) as u32 % 70;
            let density = [1, 2, 5, 20, 100][case as usize % 5];
            let values: Vec<u32> = (0..n)
                .map(|i| {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let r = (state >> 33) as u32;
                    if r % 100 < density {
                        // Values as the passes make them: sums of squares,
                        // large ones included.
                        (r >> 8) % [1, 10, 5000, 40_000_000][i as usize % 4]
                    } else {
                        EDT_INFINITE
                    }
                })
                .collect();
            let mut stack = std::vec![u32::MAX; n as usize];
            let mut got = Vec::new();
            let stack_ref = core::cell::RefCell::new(&mut stack);
            lower_envelope(
                n,
                |q| values[q as usize],
                |k| stack_ref.borrow()[k as usize],
                |k, v| stack_ref.borrow_mut()[k as usize] = v,
                |p, best, q| got.push((p, best, q)),
            );
            assert_eq!(got.len(), n as usize);
            for (p, best, q) in got {
                let cost = |q: u32| {
                    let f = values[q as usize];
                    if f == EDT_INFINITE {
                        EDT_INFINITE
                    } else {
                        f + p.abs_diff(q) * p.abs_diff(q)
                    }
                };
                let want = (0..n).map(cost).min().unwrap();
                assert_eq!(best, want, "case {case}, p = {p}");
                assert_eq!(cost(q), want, "case {case}, p = {p}: q gives the minimum");
                if want == EDT_INFINITE {
                    assert_eq!(q, p);
                }
            }
        }
        assert!(parabola_overtakes((0, 100), (5, 0), 3));
        assert!(!parabola_overtakes((0, 0), (5, 100), 3));
    }

    #[test]
    fn chamfer_lines_are_the_brute_force_minima() {
        let mut state = 0x7a3d_19c4_e2b1_5f08u64;
        for case in 0..600u32 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let n = 1 + (state >> 40) as u32 % 60;
            let density = [1, 3, 10, 40, 100][case as usize % 5];
            let values: Vec<u32> = (0..n)
                .map(|i| {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let r = (state >> 33) as u32;
                    if r % 100 < density {
                        (r >> 8) % [1, 4, 30, 100_000][i as usize % 4]
                    } else {
                        EDT_INFINITE
                    }
                })
                .collect();
            for metric in [METRIC_TAXICAB, METRIC_CHESSBOARD] {
                let stack = core::cell::RefCell::new(std::vec![u32::MAX; n as usize]);
                let forward = core::cell::RefCell::new(std::vec![(0u32, 0u32); n as usize]);
                let mut got = std::vec![None; n as usize];
                chamfer_line(
                    metric,
                    n,
                    |q| values[q as usize],
                    |k| stack.borrow()[k as usize],
                    |k, x| stack.borrow_mut()[k as usize] = x,
                    |p, c, q| forward.borrow_mut()[p as usize] = (c, q),
                    |p| forward.borrow()[p as usize],
                    |p, c, q| got[p as usize] = Some((c, q)),
                );
                for p in 0..n {
                    let cost = |q: u32| combine_cost(metric, values[q as usize], p.abs_diff(q));
                    let want = (0..n).map(cost).min().unwrap();
                    let (best, q) = got[p as usize].expect("every position written");
                    assert_eq!(best, want, "metric {metric}, case {case}, p = {p}, values {values:?}");
                    assert_eq!(cost(q), want, "metric {metric}, case {case}, p = {p}: q gives the minimum");
                    if want == EDT_INFINITE {
                        assert_eq!(q, p);
                    }
                }
            }
        }
    }

    #[test]
    fn nearest_set_bits_are_the_nearest_on_either_side() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for case in 0..2000 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let bits = match case {
                0 => 0,
                1 => u32::MAX,
                2 => 1,
                3 => 1 << 31,
                _ => (state >> 32) as u32 & (state >> 7) as u32,
            };
            for lane in 0..32 {
                let below = (0..=lane).rev().find(|&b| bits >> b & 1 == 1);
                let above = (lane..32).find(|&b| bits >> b & 1 == 1);
                assert_eq!(nearest_set_bits(bits, lane), (below, above), "bits {bits:#x}, lane {lane}");
            }
        }
    }

    #[test]
    fn short_rows_fill_a_run_and_others_go_one_to_a_warp() {
        assert_eq!(edt_rows_per_warp(64), 8);
        assert_eq!(edt_rows_per_warp(32), 16);
        assert_eq!(edt_rows_per_warp(96), 5);
        assert_eq!(edt_rows_per_warp(480), 1);
        for length in [0, 1, 31, 33, 100, 512, 1024, 1 << 40] {
            assert_eq!(edt_rows_per_warp(length), 1, "length {length}");
        }
        for length in (32..EDT_ROW_RUN as u64).step_by(32) {
            let rows = edt_rows_per_warp(length);
            assert!(length <= EDT_ROW_RUN_MAX_LENGTH as u64 && rows <= EDT_ROW_RUN_MAX_ROWS, "length {length}");
            assert!(rows as u64 * length <= EDT_ROW_RUN as u64 && (rows as u64 + 1) * length > EDT_ROW_RUN as u64);
        }
    }

    #[test]
    fn nearer_of_takes_the_nearer_and_the_left_on_a_tie() {
        const NONE: u32 = u32::MAX;
        assert_eq!(nearer_of(2, 8, 5), 2);
        assert_eq!(nearer_of(2, 8, 6), 8);
        assert_eq!(nearer_of(2, 7, 4), 2);
        assert_eq!(nearer_of(5, 5, 5), 5);
        assert_eq!(nearer_of(NONE, 7, 0), 7);
        assert_eq!(nearer_of(3, NONE, 9), 3);
        assert_eq!(nearer_of(NONE, NONE, 4), NONE);
    }

    #[test]
    fn search_radius_bounds_follow_the_root() {
        let mut values: Vec<u32> = (0..5000).collect();
        values.extend((0..32).flat_map(|b| [1u32 << b, (1u32 << b) - 1, (1u32 << b) + 1]));
        values.extend([u32::MAX - 1, 3 * 12288 * 12288, 1 << 31]);
        for &v in &values {
            let r = search_radius_bound(METRIC_EUCLIDEAN, v, u32::MAX - 1);
            if v == EDT_INFINITE {
                assert_eq!(r, u32::MAX - 1);
                continue;
            }
            let root = (v as f64).sqrt();
            assert!(r >= v.isqrt(), "{v}: {r} below the root {root}");
            assert!(r as f64 <= 1.25 * root + 1.0, "{v}: {r} above 1.25 times the root {root} and one");
            assert_eq!(search_radius_bound(METRIC_EUCLIDEAN, v, 7), r.min(7));
            assert_eq!(search_radius_bound(METRIC_TAXICAB, v, 100), v.min(100));
            assert_eq!(search_radius_bound(METRIC_CHESSBOARD, v, 100), v.min(100));
        }
        assert_eq!(search_radius_bound(METRIC_TAXICAB, EDT_INFINITE, 9), 9);
    }

    #[test]
    fn lines_are_deferred_past_the_mean_radius() {
        assert!(!line_deferred(40, 10, 4));
        assert!(line_deferred(41, 10, 4));
        assert!(line_deferred(1, 10, 0));
        assert!(!line_deferred(0, 10, 0));
        assert!(!line_deferred(u32::MAX, 1, EDT_SEARCH_EVERY_LINE));
        assert!(line_deferred(u32::MAX, 12288, 12287));
    }
}
