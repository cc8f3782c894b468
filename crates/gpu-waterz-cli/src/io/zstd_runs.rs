//! zstd frames written straight from runs of equal values.
//!
//! A label chunk is mostly long runs of one label, and most of its rows
//! repeat the row before, most of its planes the plane before. A general
//! compressor (zstd level 3 through zarrs) reads every byte of the chunk,
//! made first in a buffer, to find those repeats again; here the runs are
//! given, and the repeats are found by walking the runs. At each voxel the
//! match with the voxels a given distance before (the row above, the plane
//! above) that won last is tried first and taken when it reaches past the
//! voxel's run; else the longest of the matches with those distances and
//! with the voxel before (the run going on) is taken; else the voxel's
//! value is written as literals. The frames are standard zstd frames (RFC
//! 8878): any zstd decoder reads them, zarr's `zstd` codec among them
//! (zarrs, and numcodecs for zarr-python: tested in `cli_blockwise` and
//! by hand).
//!
//! What the frames use of the format: the frame's content size, a window
//! that holds the farthest repeat, compressed blocks with raw literals and
//! sequences coded, per block and code table, with an RLE table where the
//! block's codes are all one, else the predefined FSE table, one made for
//! the block's codes or the one the block before made (repeat mode),
//! whichever is shorter; repeat offsets; raw blocks where a block would not
//! shrink. No checksum, no dictionary.
//!
//! Every choice the encoder makes reads only which values are equal, never
//! the values themselves, and the values appear in a frame only as raw
//! bytes (raw literals, raw blocks). So a frame of the runs of `v` is,
//! with the values in those bytes replaced by `f(v)`, a frame of the runs
//! of `f(v)` for any `f`: [`LabelFrame`] keeps where the values lie, and
//! [`LabelFrame::relabelled`] writes the frame of a relabelling without
//! walking the runs again (the frame is that of the finer runs, so it is
//! larger than one encoded from the relabelled runs).

use gpu_waterz_abi::frames::{
    LITERAL_LENGTH_BASE, LITERAL_LENGTH_BITS, LITERAL_LENGTH_NORM, MATCH_LENGTH_BASE, MATCH_LENGTH_BITS,
    MATCH_LENGTH_NORM, OFFSET_NORM,
};
use std::sync::OnceLock;

/// The decoded bytes of one block at most (the format's bound).
const BLOCK_BYTES: u64 = 128 << 10;

/// The largest window used: what zstd's decoders accept without being
/// told to (`ZSTD_WINDOWLOG_LIMIT_DEFAULT`). Repeats farther away are not
/// looked for.
const MAX_WINDOW_LOG: u32 = 27;

/// The frames' magic number.
const MAGIC: u32 = 0xFD2F_B528;

/// Symbol compression modes of the sequences section.
const MODE_PREDEFINED: u8 = 0;
const MODE_RLE: u8 = 1;
const MODE_FSE: u8 = 2;
const MODE_REPEAT: u8 = 3;

/// The table of a code field that the decoder holds from the last
/// compressed block with sequences, which the next such block may repeat
/// (`MODE_REPEAT`) instead of describing its own.
enum TableInUse {
    /// The predefined table, or one code (RLE): not worth repeating.
    Other,
    /// A table made for a block's codes, and its distribution.
    Made { norm: Vec<i16>, table: FseTable },
}

/// Per code table (literal lengths, offsets, match lengths): the
/// predefined distribution and its accuracy log, the number of codes and
/// the largest accuracy log of a table of the block's own.
const PREDEFINED_NORMS: [&[i16]; 3] = [&LITERAL_LENGTH_NORM, &OFFSET_NORM, &MATCH_LENGTH_NORM];
const PREDEFINED_LOGS: [u8; 3] = [6, 5, 6];
const SYMBOLS: [usize; 3] = [36, 32, 53];
const MAX_LOGS: [u8; 3] = [9, 8, 9];

/// Block types.
const BLOCK_RAW: u32 = 0;
const BLOCK_COMPRESSED: u32 = 2;

/// The code of `value` in a table of `bases` (the last base at or below
/// it): the reference that the fast lookups below are tested against.
#[cfg(test)]
fn code_of(bases: &[u32], value: u32) -> usize {
    bases.partition_point(|&b| b <= value) - 1
}

/// The codes of values below `N` (the part of a code table where the
/// codes are not yet one per power of two).
const fn small_codes<const N: usize, const M: usize>(bases: &[u32; M], first: u32) -> [u8; N] {
    let mut codes = [0u8; N];
    let mut v = 0;
    while v < N {
        let mut code = 0;
        while code + 1 < M && bases[code + 1] <= v as u32 + first {
            code += 1;
        }
        codes[v] = code as u8;
        v += 1;
    }
    codes
}

const LITERAL_LENGTH_SMALL: [u8; 64] = small_codes(&LITERAL_LENGTH_BASE, 0);
const MATCH_LENGTH_SMALL: [u8; 128] = small_codes(&MATCH_LENGTH_BASE, 3);

/// The literal-length code of `literals` bytes.
#[inline]
fn literal_length_code(literals: u32) -> usize {
    if literals < 64 {
        LITERAL_LENGTH_SMALL[literals as usize] as usize
    } else {
        (31 - literals.leading_zeros()) as usize + 19
    }
}

/// The match-length code of a match of `length` bytes (at least 3).
#[inline]
fn match_length_code(length: u32) -> usize {
    let above = length - 3;
    if above < 128 {
        MATCH_LENGTH_SMALL[above as usize] as usize
    } else {
        (31 - above.leading_zeros()) as usize + 36
    }
}

/// The cells of an FSE table (RFC 8878, 4.1.1) in the decoder's order:
/// each symbol's cells spread with the format's step, a symbol of
/// probability "below one" (-1) in one of the last cells.
fn spread(norm: &[i16], log: u8) -> Vec<u8> {
    let size = 1usize << log;
    let mut cells = vec![0u8; size];
    let mut high = size - 1;
    for (s, &p) in norm.iter().enumerate() {
        if p == -1 {
            cells[high] = s as u8;
            high -= 1;
        }
    }
    let step = (size >> 1) + (size >> 3) + 3;
    let mut position = 0;
    for (s, &p) in norm.iter().enumerate() {
        for _ in 0..p.max(0) {
            cells[position] = s as u8;
            position = (position + step) & (size - 1);
            while position > high {
                position = (position + step) & (size - 1);
            }
        }
    }
    cells
}

/// An FSE table as the encoder walks it (the layout of zstd's reference
/// encoder): the states, `2^log + cell`, of each symbol in the decoder's
/// order, and per symbol the numbers that give, from the state after it,
/// the bits to write and the symbol's state.
struct FseTable {
    log: u8,
    states: Vec<u16>,
    /// Per symbol: `(delta_bits, delta_state)`.
    symbols: Vec<(u32, i32)>,
}

impl FseTable {
    /// The table of a normalized distribution (`norm` sums to `2^log`).
    fn new(norm: &[i16], log: u8) -> Self {
        let size = 1u32 << log;
        let cells = spread(norm, log);
        let mut next = Vec::with_capacity(norm.len());
        let mut total = 0usize;
        for &p in norm {
            next.push(total);
            total += if p == -1 { 1 } else { p.max(0) as usize };
        }
        let mut states = vec![0u16; size as usize];
        for (cell, &s) in cells.iter().enumerate() {
            states[next[s as usize]] = (size as usize + cell) as u16;
            next[s as usize] += 1;
        }
        let mut symbols = vec![(0, 0); norm.len()];
        let mut total = 0i32;
        for (s, &p) in norm.iter().enumerate() {
            symbols[s] = match p {
                0 => (0, 0),
                -1 | 1 => {
                    total += 1;
                    ((u32::from(log) << 16) - size, total - 2)
                }
                p => {
                    let p = p as u32;
                    let most_bits = u32::from(log) - (31 - (p - 1).leading_zeros());
                    total += p as i32;
                    ((most_bits << 16) - (p << most_bits), total - 2 * p as i32)
                }
            };
        }
        Self { log, states, symbols }
    }

    /// The state of `symbol` the encoder starts from (the last sequence's).
    fn first_state(&self, symbol: u8) -> u32 {
        let (delta_bits, delta_state) = self.symbols[symbol as usize];
        let bits = (delta_bits + (1 << 15)) >> 16;
        let value = (bits << 16) - delta_bits;
        u32::from(self.states[((value >> bits) as i32 + delta_state) as usize])
    }

    /// From `state` (the next sequence's), writes the bits that the decoder
    /// reads to get there and returns the state of `symbol`.
    #[inline(always)]
    fn step_back(&self, state: u32, symbol: u8, bits: &mut BitWriter) -> u32 {
        let (delta_bits, delta_state) = self.symbols[symbol as usize];
        let n = (state + delta_bits) >> 16;
        bits.add(state & ((1 << n) - 1), n as u8);
        u32::from(self.states[((state >> n) as i32 + delta_state) as usize])
    }

    /// Writes the first state's cell (read first by the decoder).
    fn write_state(&self, state: u32, bits: &mut BitWriter) {
        bits.add(state & ((1 << self.log) - 1), self.log);
    }
}

/// A distribution over `2^log` cells in proportion to `counts`: each
/// symbol counted at least one cell, the largest what rounding leaves.
/// `counts` holds at most `2^log` symbols counted, at least one.
fn normalize(counts: &[u32], log: u8) -> Vec<i16> {
    let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
    let size = 1i64 << log;
    let mut norm: Vec<i16> =
        counts.iter().map(|&c| if c == 0 { 0 } else { ((u64::from(c) << log) / total).max(1) as i16 }).collect();
    let mut sum: i64 = norm.iter().map(|&p| i64::from(p)).sum();
    while sum != size {
        let largest = (0..norm.len()).max_by_key(|&s| (norm[s], s)).expect("a counted symbol");
        if sum < size {
            norm[largest] += (size - sum) as i16;
            sum = size;
        } else {
            let taken = (sum - size).min(i64::from(norm[largest]) - 1);
            norm[largest] -= taken as i16;
            sum -= taken;
        }
    }
    norm
}

/// Writes the description of a distribution (RFC 8878, 4.1.1): the
/// accuracy log, then each symbol's cells plus one in as few bits as the
/// cells left allow, runs of absent symbols as 2-bit repeat flags.
fn write_distribution(norm: &[i16], log: u8, out: &mut Vec<u8>) {
    let (mut held, mut count) = (u64::from(log - 5), 4u32);
    let mut add = |value: u64, bits: u32, out: &mut Vec<u8>| {
        held |= value << count;
        count += bits;
        while count >= 8 {
            out.push(held as u8);
            held >>= 8;
            count -= 8;
        }
    };
    let size = 1i32 << log;
    let (mut remaining, mut threshold, mut bits) = (size + 1, size, u32::from(log) + 1);
    let (mut symbol, mut previous_zero) = (0, false);
    while symbol < norm.len() && remaining > 1 {
        if previous_zero {
            let mut start = symbol;
            while norm[symbol] == 0 {
                symbol += 1;
            }
            while symbol >= start + 24 {
                start += 24;
                add(0xFFFF, 16, out);
            }
            while symbol >= start + 3 {
                start += 3;
                add(3, 2, out);
            }
            add((symbol - start) as u64, 2, out);
        }
        let p = i32::from(norm[symbol]);
        symbol += 1;
        let max = (2 * threshold - 1) - remaining;
        remaining -= p.abs();
        let mut value = p + 1;
        if value >= threshold {
            value += max;
        }
        add(value as u64, bits - u32::from(value < max), out);
        previous_zero = value == 1;
        while remaining < threshold {
            bits -= 1;
            threshold >>= 1;
        }
    }
    // The last byte, its bits above the description's zero.
    add(0, 7, out);
}

/// The predefined tables of literal lengths, offsets and match lengths.
fn predefined() -> &'static [FseTable; 3] {
    static TABLES: OnceLock<[FseTable; 3]> = OnceLock::new();
    TABLES.get_or_init(|| std::array::from_fn(|t| FseTable::new(PREDEFINED_NORMS[t], PREDEFINED_LOGS[t])))
}

/// Bits written from the lowest up, read back by the decoder from the end,
/// into a buffer sized beforehand with 8 bytes to spare. Bits are added to
/// a 64-bit holder without a test, and [`BitWriter::flush`] writes its
/// whole bytes, also without one: the caller flushes often enough that the
/// holder never takes more than 63 bits (a branch per added field, taken at
/// random, cost more than the fields).
struct BitWriter<'b> {
    buffer: &'b mut [u8],
    at: usize,
    held: u64,
    count: u32,
}

impl<'b> BitWriter<'b> {
    fn new(buffer: &'b mut [u8]) -> Self {
        Self { buffer, at: 0, held: 0, count: 0 }
    }

    /// Appends the low `bits` bits of `value` (`bits` at most 32; the
    /// bits above them 0; at most 63 held after it).
    #[inline(always)]
    fn add(&mut self, value: u32, bits: u8) {
        debug_assert!(bits == 32 || value >> bits == 0);
        debug_assert!(self.count + u32::from(bits) < 64, "{} bits held", self.count + u32::from(bits));
        self.held |= u64::from(value) << self.count;
        self.count += u32::from(bits);
    }

    /// Writes the whole bytes held; at most 7 bits stay.
    #[inline(always)]
    fn flush(&mut self) {
        let bytes = (self.count >> 3) as usize;
        self.buffer[self.at..self.at + 8].copy_from_slice(&self.held.to_le_bytes());
        self.at += bytes;
        // At most 7 bytes: the holder never has all 64 bits.
        self.held >>= bytes * 8;
        self.count &= 7;
    }

    /// The end mark (a 1 bit above the last one written) and the last
    /// bytes; the bytes written.
    fn finish(mut self) -> usize {
        self.add(1, 1);
        let bytes = self.count.div_ceil(8) as usize;
        self.buffer[self.at..self.at + bytes].copy_from_slice(&self.held.to_le_bytes()[..bytes]);
        self.at + bytes
    }
}

/// A zstd sequence: `literals` bytes, then a match of `length` bytes at
/// `offset` bytes back.
#[derive(Clone, Copy, Debug)]
struct Sequence {
    literals: u32,
    length: u32,
    offset: u32,
}

/// Why runs cannot be encoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunsError {
    /// The width is not 4 or 8 bytes.
    #[error("values of {0} bytes (4 or 8 are encoded)")]
    Width(usize),
    /// A value needs more bytes than the width.
    #[error("the value {value} does not fit {width} bytes")]
    Value {
        /// The value.
        value: u64,
        /// The width.
        width: usize,
    },
    /// A relabelling has no label for a value of the frame.
    #[error("the value {0} has no new label")]
    Unmapped(u64),
    /// A frame given whole ([`LabelFrame::from_frame`]) that is not one
    /// whose values lie in raw literals and raw blocks.
    #[error("not a frame of raw values: {0}")]
    Frame(String),
}

/// Runs of equal values, neighbours always different: each run's value
/// and the position after its last value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ValueRuns {
    values: Vec<u64>,
    ends: Vec<u64>,
}

impl ValueRuns {
    /// No runs, room for `runs` of them.
    pub fn with_capacity(runs: usize) -> Self {
        Self { values: Vec::with_capacity(runs), ends: Vec::with_capacity(runs) }
    }

    /// Appends `count` values `value`: the last run grows when it holds
    /// the same value; nothing when `count` is 0.
    #[inline]
    pub fn push(&mut self, value: u64, count: u64) {
        if count == 0 {
            return;
        }
        let end = self.len() + count;
        match self.values.last() {
            Some(&last) if last == value => *self.ends.last_mut().expect("one end per value") = end,
            _ => {
                self.values.push(value);
                self.ends.push(end);
            }
        }
    }

    /// No runs, the room kept.
    pub fn clear(&mut self) {
        self.values.clear();
        self.ends.clear();
    }

    /// The number of values.
    pub fn len(&self) -> u64 {
        self.ends.last().copied().unwrap_or(0)
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The runs, `(value, count)`.
    pub fn runs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        self.values.iter().zip(&self.ends).zip(starts).map(|((&v, &end), start)| (v, end - start))
    }
}

/// How many values from position `p` on (in run `r`) equal those from
/// position `q` on (in run `s`, `q` before `p`), at most `limit`, and the
/// runs that hold the positions that many after `p` and after `q`.
/// `ends[k]`: the position after run `k`; `p + limit` at most the last end.
#[inline]
fn common(values: &[u64], ends: &[u64], p: u64, mut r: usize, q: u64, mut s: usize, limit: u64) -> (u64, usize, usize) {
    let mut length = 0;
    while values[r] == values[s] {
        let (to_r, to_s) = (ends[r] - p, ends[s] - q);
        length = to_r.min(to_s).min(limit);
        r += usize::from(to_r == length);
        s += usize::from(to_s == length);
        if length == limit {
            break;
        }
    }
    (length, r, s)
}

/// Encodes `runs` as one zstd frame of the values written `width` bytes
/// each, little-endian (4 for uint32, 8 for uint64). `repeats`: distances
/// (in values) at which the values tend to repeat, besides the run
/// itself; for a C-order chunk of shape `(z, y, x)`, `[x, y * x]` (the row
/// and the plane above). Repeats farther than the largest window (128
/// MiB) are not looked for.
pub fn encode_runs(width: usize, repeats: &[u64], runs: &ValueRuns) -> Result<Vec<u8>, RunsError> {
    Ok(LabelFrame::encode(width, repeats, runs)?.bytes)
}

/// A frame of [`encode_runs`] and where its values lie (the raw literals
/// and raw blocks), so that a relabelling of the values can be written
/// without encoding again ([`LabelFrame::relabelled`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelFrame {
    bytes: Vec<u8>,
    width: usize,
    /// The byte ranges of the frame that hold values, `width` bytes each.
    values: Vec<std::ops::Range<usize>>,
}

impl LabelFrame {
    /// [`encode_runs`], keeping where the values lie.
    pub fn encode(width: usize, repeats: &[u64], runs: &ValueRuns) -> Result<Self, RunsError> {
        let (bytes, values) = match width {
            4 => {
                if let Some(&value) = runs.values.iter().find(|&&v| v > u64::from(u32::MAX)) {
                    return Err(RunsError::Value { value, width });
                }
                encode::<4>(repeats, runs)
            }
            8 => encode::<8>(repeats, runs),
            _ => return Err(RunsError::Width(width)),
        };
        Ok(Self { bytes, width, values })
    }

    /// A frame made elsewhere (such as `gpu_waterz_blockwise::label_frame`'s,
    /// made on the GPU) of values `width` bytes wide, its values found by
    /// walking its blocks: it must be a single zstd frame without
    /// dictionary or checksum whose blocks are raw, or compressed with
    /// raw literals (any sequences), every value whole in one of them.
    pub fn from_frame(bytes: Vec<u8>, width: usize) -> Result<Self, RunsError> {
        if width != 4 && width != 8 {
            return Err(RunsError::Width(width));
        }
        let bad = |what: &str| RunsError::Frame(what.to_string());
        let byte = |at: usize| bytes.get(at).copied().map(usize::from).ok_or_else(|| bad("it ends early"));
        if bytes.len() < 4 || u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) != MAGIC {
            return Err(bad("no zstd magic number"));
        }
        let descriptor = byte(4)?;
        if descriptor & 0b111 != 0 {
            return Err(bad("a checksum or a dictionary"));
        }
        let single_segment = descriptor & (1 << 5) != 0;
        let size_bytes = match descriptor >> 6 {
            0 => usize::from(single_segment),
            1 => 2,
            2 => 4,
            _ => 8,
        };
        let mut at = 5 + usize::from(!single_segment) + size_bytes;
        let mut values = Vec::new();
        loop {
            let header = byte(at)? | (byte(at + 1)? << 8) | (byte(at + 2)? << 16);
            at += 3;
            let (last, kind, size) = (header & 1 != 0, (header >> 1) & 3, header >> 3);
            let end = at + size;
            if end > bytes.len() {
                return Err(bad("a block past its end"));
            }
            match kind as u32 {
                BLOCK_RAW => values.push(at..end),
                BLOCK_COMPRESSED => {
                    let first = byte(at)?;
                    if first & 3 != 0 {
                        return Err(bad("literals that are not raw"));
                    }
                    let (header_bytes, n) = match (first >> 2) & 3 {
                        0 | 2 => (1, first >> 3),
                        1 => (2, (first >> 4) | (byte(at + 1)? << 4)),
                        _ => (3, (first >> 4) | (byte(at + 1)? << 4) | (byte(at + 2)? << 12)),
                    };
                    if at + header_bytes + n > end {
                        return Err(bad("literals past their block"));
                    }
                    if n > 0 {
                        values.push(at + header_bytes..at + header_bytes + n);
                    }
                }
                _ => return Err(bad("an RLE or reserved block")),
            }
            at = end;
            if last {
                break;
            }
        }
        if at != bytes.len() {
            return Err(bad("bytes after the last block"));
        }
        if values.iter().any(|r| r.len() % width != 0) {
            return Err(bad("values cut by a block's end"));
        }
        Ok(Self { bytes, width, values })
    }

    /// The frame.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The frame of the same values with each value `v` replaced by
    /// `label(v)` (the runs' structure kept: where `label` joins runs the
    /// frame is larger than one encoded from the new runs). Fails where
    /// `label` gives `None` or a value wider than the frame's.
    pub fn relabelled(&self, mut label: impl FnMut(u64) -> Option<u64>) -> Result<Vec<u8>, RunsError> {
        let mut bytes = self.bytes.clone();
        let width = self.width;
        for range in &self.values {
            for value in bytes[range.clone()].chunks_exact_mut(width) {
                let mut word = [0u8; 8];
                word[..width].copy_from_slice(value);
                let old = u64::from_le_bytes(word);
                let new = label(old).ok_or(RunsError::Unmapped(old))?;
                if width < 8 && new >> (8 * width) != 0 {
                    return Err(RunsError::Value { value: new, width });
                }
                value.copy_from_slice(&new.to_le_bytes()[..width]);
            }
        }
        Ok(bytes)
    }
}

/// [`LabelFrame::encode`] of values `W` bytes wide that fit them: the
/// frame and the byte ranges of its values.
fn encode<const W: usize>(repeats: &[u64], runs: &ValueRuns) -> (Vec<u8>, Vec<std::ops::Range<usize>>) {
    let (values, ends) = (&runs.values[..], &runs.ends[..]);
    let total = runs.len();
    let w = W as u64;
    // The distances looked at past the voxel before, nearest first, and
    // the window that holds the farthest.
    let mut distances: Vec<u64> = repeats.iter().copied().filter(|&d| d > 1 && d * w <= 1 << MAX_WINDOW_LOG).collect();
    distances.sort_unstable();
    distances.dedup();
    let farthest = distances.last().copied().unwrap_or(1) * w;
    let window_log = (64 - (farthest - 1).leading_zeros()).max(17);
    let mut out = Vec::with_capacity(64 + values.len() * 2);
    out.extend_from_slice(&MAGIC.to_le_bytes());
    // Frame header: the content size in 4 or 8 bytes, not a single
    // segment (the window), no checksum, no dictionary.
    let bytes = total * w;
    let wide_size = bytes > u64::from(u32::MAX);
    out.push(if wide_size { 3 << 6 } else { 2 << 6 });
    out.push(((window_log - 10) << 3) as u8);
    if wide_size {
        out.extend_from_slice(&bytes.to_le_bytes());
    } else {
        out.extend_from_slice(&(bytes as u32).to_le_bytes());
    }
    let mut block = BlockEncoder::<W>::new(values, ends);
    // The run that holds voxel `p`, and for each distance the run that
    // holds the voxel that far back.
    let mut here = 0;
    let mut back: Vec<(u64, usize)> = distances.iter().map(|&d| (d, 0)).collect();
    let mut last_won = 0;
    let mut p = 0u64;
    while p < total {
        let limit = total - p;
        // The run going on (the voxel before holds the same value): the
        // rest of it.
        let start = if here == 0 { 0 } else { ends[here - 1] };
        let (mut best, mut best_distance, mut next) =
            if p > start { (ends[here] - p, 1, here + 1) } else { (0, 0, here) };
        // The distance that won last is tried first; when its match goes
        // past the run's end the others are not tried (most of a label
        // chunk repeats the row above or the plane above for a long way).
        for i in 0..back.len() {
            let k = if i == 0 {
                last_won
            } else if i <= last_won {
                i - 1
            } else {
                i
            };
            let (d, r) = &mut back[k];
            if *d > p {
                continue;
            }
            let q = p - *d;
            let mut at = *r;
            while ends[at] <= q {
                at += 1;
            }
            *r = at;
            let (length, after, behind) = common(values, ends, p, here, q, at, limit);
            if length > best {
                (best, best_distance, next) = (length, *d, after);
                // The run of the voxel `d` before the match's end: where
                // this distance looks next.
                *r = behind;
                last_won = k;
                if i == 0 {
                    break;
                }
            }
        }
        if best == 0 {
            block.literal(values[here], &mut out);
            best = 1;
            next = here + usize::from(ends[here] == p + 1);
        } else {
            block.matched(best_distance, best, &mut out);
        }
        here = next;
        p += best;
    }
    let values = block.finish(&mut out);
    (out, values)
}

/// Writes the extra bits of sequence `s` of `codes`, in the order literal
/// length, match length, offset (the decoder reads them the other way).
/// At most 59 bits: 16 and 16 for the lengths (a block holds 128 KiB),
/// 27 for the offset (the window is at most 2^27); flushed after the first
/// field, so from at most 7 + 16 held bits after it, at most 50 follow.
#[inline(always)]
fn extra_bits(bits: &mut BitWriter, s: &Sequence, c: &Codes) {
    let (ll, ml, of) = (c.literal_length as usize, c.match_length as usize, c.offset);
    bits.add(s.literals - LITERAL_LENGTH_BASE[ll], LITERAL_LENGTH_BITS[ll]);
    bits.flush();
    bits.add(s.length - MATCH_LENGTH_BASE[ml], MATCH_LENGTH_BITS[ml]);
    bits.add(c.offset_value - (1 << of), of);
}

/// The codes of a sequence, and its offset value.
#[derive(Clone, Copy, Debug, Default)]
struct Codes {
    literal_length: u8,
    offset: u8,
    match_length: u8,
    offset_value: u32,
}

/// The blocks of a frame of values `W` bytes wide: one block's literals
/// and sequences at a time, and the repeat offsets, which go on from
/// block to block.
struct BlockEncoder<'r, const W: usize> {
    /// The runs' values and ends (the position after each).
    values: &'r [u64],
    ends: &'r [u64],
    literals: Vec<u8>,
    sequences: Vec<Sequence>,
    /// Literal bytes not yet given to a sequence.
    pending: u32,
    /// The block's values so far, where it starts and the run there.
    count: u64,
    start: u64,
    start_run: usize,
    repeat_offsets: [u32; 3],
    /// The codes of a block's sequences (kept to reuse their memory).
    codes: Vec<Codes>,
    /// Per code field, the table the decoder holds.
    in_use: [TableInUse; 3],
    /// The byte ranges of the frame written so far that hold values.
    value_ranges: Vec<std::ops::Range<usize>>,
}

impl<'r, const W: usize> BlockEncoder<'r, W> {
    /// The values that fit a block.
    const ROOM: u64 = BLOCK_BYTES / W as u64;

    fn new(values: &'r [u64], ends: &'r [u64]) -> Self {
        Self {
            values,
            ends,
            literals: Vec::with_capacity(BLOCK_BYTES as usize),
            sequences: Vec::new(),
            pending: 0,
            count: 0,
            start: 0,
            start_run: 0,
            repeat_offsets: [1, 4, 8],
            codes: Vec::new(),
            in_use: std::array::from_fn(|_| TableInUse::Other),
            value_ranges: Vec::new(),
        }
    }

    /// Adds one value as literals.
    #[inline]
    fn literal(&mut self, value: u64, out: &mut Vec<u8>) {
        if self.count == Self::ROOM {
            self.flush(out, false);
        }
        let bytes: [u8; 8] = value.to_le_bytes();
        self.literals.extend_from_slice(&bytes[..W]);
        self.pending += W as u32;
        self.count += 1;
    }

    /// Adds `count` values copied from `distance` values back, cut at the
    /// blocks' ends.
    #[inline]
    fn matched(&mut self, distance: u64, mut count: u64, out: &mut Vec<u8>) {
        loop {
            if self.count == Self::ROOM {
                self.flush(out, false);
            }
            let here = count.min(Self::ROOM - self.count);
            // A block holds at most 128 KiB, and the window at most 128 MiB.
            self.sequences.push(Sequence {
                literals: self.pending,
                length: (here * W as u64) as u32,
                offset: (distance * W as u64) as u32,
            });
            self.pending = 0;
            self.count += here;
            count -= here;
            if count == 0 {
                return;
            }
        }
    }

    /// Writes the last block; gives the byte ranges of the frame that
    /// hold values.
    fn finish(mut self, out: &mut Vec<u8>) -> Vec<std::ops::Range<usize>> {
        self.flush(out, true);
        self.value_ranges
    }

    /// Writes the block (compressed, or raw when that is not shorter) and
    /// starts the next.
    fn flush(&mut self, out: &mut Vec<u8>, last: bool) {
        let at = out.len();
        out.extend_from_slice(&[0; 3]);
        let before = self.repeat_offsets;
        let ranges_before = self.value_ranges.len();
        let tables = self.write_compressed(out);
        let size = (out.len() - at - 3) as u64;
        let decoded = self.count * W as u64;
        let (kind, size) = if size < decoded {
            // The decoder now holds this block's tables.
            for (in_use, table) in self.in_use.iter_mut().zip(tables) {
                if let Some(table) = table {
                    *in_use = table;
                }
            }
            (BLOCK_COMPRESSED, size)
        } else {
            // A raw block leaves the decoder's repeat offsets and tables as
            // they were.
            self.repeat_offsets = before;
            out.truncate(at + 3);
            self.value_ranges.truncate(ranges_before);
            self.value_ranges.push(at + 3..at + 3 + decoded as usize);
            let (mut position, mut run) = (self.start, self.start_run);
            let end = self.start + self.count;
            while position < end {
                let n = self.ends[run].min(end) - position;
                let bytes: [u8; 8] = self.values[run].to_le_bytes();
                for _ in 0..n {
                    out.extend_from_slice(&bytes[..W]);
                }
                position += n;
                run += 1;
            }
            (BLOCK_RAW, decoded)
        };
        let header = u32::from(last) | (kind << 1) | ((size as u32) << 3);
        out[at..at + 3].copy_from_slice(&header.to_le_bytes()[..3]);
        self.start += self.count;
        while self.start_run < self.ends.len() && self.ends[self.start_run] <= self.start {
            self.start_run += 1;
        }
        self.literals.clear();
        self.sequences.clear();
        self.pending = 0;
        self.count = 0;
    }

    /// The offset value of a match at `offset` bytes after `literals`
    /// literal bytes (a repeat code where one fits), with the repeat
    /// offsets updated as the decoder updates them (RFC 8878, 3.1.2.5).
    #[inline]
    fn offset_value(&mut self, offset: u32, literals: u32) -> u32 {
        let r = &mut self.repeat_offsets;
        if literals > 0 {
            if offset == r[0] {
                return 1;
            }
            if offset == r[1] {
                *r = [r[1], r[0], r[2]];
                return 2;
            }
            if offset == r[2] {
                *r = [r[2], r[0], r[1]];
                return 3;
            }
        } else {
            if offset == r[1] {
                *r = [r[1], r[0], r[2]];
                return 1;
            }
            if offset == r[2] {
                *r = [r[2], r[0], r[1]];
                return 2;
            }
            if offset == r[0].wrapping_sub(1) {
                *r = [offset, r[0], r[1]];
                return 3;
            }
        }
        *r = [offset, r[0], r[1]];
        offset + 3
    }

    /// The literals section (raw) and the sequences section; per code
    /// field, the table the block leaves the decoder holding if it is kept
    /// compressed (None: the one held stays, repeated or not used).
    fn write_compressed(&mut self, out: &mut Vec<u8>) -> [Option<TableInUse>; 3] {
        let n = self.literals.len();
        // Raw literals; the header's size format by the size.
        if n < 32 {
            out.push((n as u8) << 3);
        } else if n < 4096 {
            out.extend_from_slice(&[(1 << 2) | ((n as u8 & 0xF) << 4), (n >> 4) as u8]);
        } else {
            out.extend_from_slice(&[(3 << 2) | ((n as u8 & 0xF) << 4), (n >> 4) as u8, (n >> 12) as u8]);
        }
        if n > 0 {
            self.value_ranges.push(out.len()..out.len() + n);
        }
        out.extend_from_slice(&self.literals);
        let count = self.sequences.len();
        if count < 128 {
            out.push(count as u8);
        } else if count < 0x7F00 {
            out.extend_from_slice(&[((count >> 8) + 128) as u8, count as u8]);
        } else {
            let rest = count - 0x7F00;
            out.extend_from_slice(&[255, rest as u8, (rest >> 8) as u8]);
        }
        if count == 0 {
            return [None, None, None];
        }
        // The codes, in the decoder's order: the repeat offsets change
        // from sequence to sequence.
        // And each table's codes counted on the way.
        let mut codes = std::mem::take(&mut self.codes);
        codes.clear();
        let mut all_counts = [[0u32; 53]; 3];
        for k in 0..count {
            let s = self.sequences[k];
            let offset_value = self.offset_value(s.offset, s.literals);
            let c = Codes {
                literal_length: literal_length_code(s.literals) as u8,
                offset: (31 - offset_value.leading_zeros()) as u8,
                match_length: match_length_code(s.length) as u8,
                offset_value,
            };
            all_counts[0][c.literal_length as usize] += 1;
            all_counts[1][c.offset as usize] += 1;
            all_counts[2][c.match_length as usize] += 1;
            codes.push(c);
        }
        // Per code table: one code (RLE), else the predefined table, one
        // made for the block's codes (with its description) or the one the
        // decoder holds from the block before, whichever writes fewer bits.
        let symbols = |c: &Codes| [c.literal_length, c.offset, c.match_length];
        let mut modes = [MODE_PREDEFINED; 3];
        let mut descriptions: [Vec<u8>; 3] = Default::default();
        let mut block_tables: [Option<TableInUse>; 3] = [None, None, None];
        for (t, counts) in all_counts.iter().enumerate() {
            let used = counts.iter().filter(|&&n| n > 0).count();
            if used == 1 {
                modes[t] = MODE_RLE;
                descriptions[t].push(symbols(&codes[0])[t]);
                block_tables[t] = Some(TableInUse::Other);
                continue;
            }
            let bits_with = |norm: &[i16], log: u8| -> f64 {
                let mut bits = 0.0;
                for (s, &n) in counts.iter().enumerate() {
                    if n > 0 {
                        let p = norm.get(s).map_or(0, |&p| if p == -1 { 1 } else { p });
                        if p == 0 {
                            return f64::INFINITY;
                        }
                        bits += f64::from(n) * (f64::from(log) - f64::from(p).log2());
                    }
                }
                bits
            };
            let mut fewest_bits = bits_with(PREDEFINED_NORMS[t], PREDEFINED_LOGS[t]);
            block_tables[t] = Some(TableInUse::Other);
            if let TableInUse::Made { norm, table } = &self.in_use[t] {
                let repeated = bits_with(norm, table.log);
                if repeated < fewest_bits {
                    (fewest_bits, modes[t], block_tables[t]) = (repeated, MODE_REPEAT, None);
                }
            }
            let fewest = (usize::BITS - (used - 1).leading_zeros()).max(5) as u8;
            let log = ((usize::BITS - count.leading_zeros()) as u8).clamp(fewest, MAX_LOGS[t]);
            let own = normalize(&counts[..SYMBOLS[t]], log);
            let mut description = Vec::new();
            write_distribution(&own, log, &mut description);
            if bits_with(&own, log) + 8.0 * (description.len() as f64) < fewest_bits {
                let table = FseTable::new(&own, log);
                block_tables[t] = Some(TableInUse::Made { norm: own, table });
                modes[t] = MODE_FSE;
                descriptions[t] = description;
            }
        }
        out.push((modes[0] << 6) | (modes[1] << 4) | (modes[2] << 2));
        for description in &descriptions {
            out.extend_from_slice(description);
        }
        let rle = modes.map(|m| m == MODE_RLE);
        // The bitstream, from the last sequence to the first: the decoder
        // reads it backwards. A sequence takes at most 85 bits (16 + 16 +
        // 27 extra bits, 26 of states).
        let predefined = predefined();
        let tables: [&FseTable; 3] = std::array::from_fn(|t| match (modes[t], &block_tables[t], &self.in_use[t]) {
            (MODE_FSE, Some(TableInUse::Made { table, .. }), _) => table,
            (MODE_REPEAT, _, TableInUse::Made { table, .. }) => table,
            _ => &predefined[t],
        });
        let at = out.len();
        out.resize(at + count * 11 + 8, 0);
        let mut bits = BitWriter::new(&mut out[at..]);
        let last = count - 1;
        let mut states: [u32; 3] = std::array::from_fn(|t| tables[t].first_state(symbols(&codes[last])[t]));
        extra_bits(&mut bits, &self.sequences[last], &codes[last]);
        for k in (0..last).rev() {
            // The transitions into sequence k + 1's states, in the order
            // offset, match length, literal length: at most 26 bits.
            bits.flush();
            let symbol = symbols(&codes[k]);
            for t in [1, 2, 0] {
                if !rle[t] {
                    states[t] = tables[t].step_back(states[t], symbol[t], &mut bits);
                }
            }
            extra_bits(&mut bits, &self.sequences[k], &codes[k]);
        }
        // The first states, read first: literal length, offset, match
        // length (at most 26 bits).
        bits.flush();
        for t in [2, 1, 0] {
            if !rle[t] {
                tables[t].write_state(states[t], &mut bits);
            }
        }
        let written = bits.finish();
        out.truncate(at + written);
        self.codes = codes;
        block_tables
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The values of `runs`, `width` bytes each, as a zstd decoder gives them.
    fn expanded(width: usize, runs: &[(u64, u64)]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for &(value, count) in runs {
            for _ in 0..count {
                bytes.extend_from_slice(&value.to_le_bytes()[..width]);
            }
        }
        bytes
    }

    /// The runs of `(value, count)` pairs (joined where neighbours hold
    /// one value).
    fn value_runs(runs: &[(u64, u64)]) -> ValueRuns {
        let mut joined = ValueRuns::default();
        for &(value, count) in runs {
            joined.push(value, count);
        }
        joined
    }

    fn decoded(frame: &[u8]) -> Vec<u8> {
        zstd::stream::decode_all(frame).expect("a valid zstd frame")
    }

    /// The decoder's view of a table (RFC 8878, 4.1.1): per cell its
    /// symbol, bits and base of the next state.
    fn decoder_cells(norm: &[i16], log: u8) -> Vec<(u8, u8, u32)> {
        let size = 1u32 << log;
        let mut next: Vec<u32> = norm.iter().map(|&p| if p == -1 { 1 } else { p.max(0) as u32 }).collect();
        spread(norm, log)
            .into_iter()
            .map(|s| {
                let n = next[s as usize];
                next[s as usize] += 1;
                let bits = u32::from(log) - (31 - n.leading_zeros());
                (s, bits as u8, (n << bits) - size)
            })
            .collect()
    }

    /// Every step of the encoder lands on a cell of its symbol from which
    /// the decoder, reading the bits written, comes back to the state it
    /// started from; the predefined tables and normalized ones.
    #[test]
    fn each_step_back_is_the_decoders_step_forward() {
        let mut norms: Vec<(Vec<i16>, u8)> =
            vec![(LITERAL_LENGTH_NORM.to_vec(), 6), (OFFSET_NORM.to_vec(), 5), (MATCH_LENGTH_NORM.to_vec(), 6)];
        for (seed, log) in [(1u64, 5u8), (2, 6), (3, 8), (4, 9)] {
            let mut state = seed;
            let counts: Vec<u32> = (0..40)
                .map(|_| {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let v = (state >> 33) % 1000;
                    if v < 300 {
                        0
                    } else {
                        (v * v / 1000) as u32
                    }
                })
                .collect();
            norms.push((normalize(&counts, log), log));
        }
        for (norm, log) in norms {
            assert_eq!(norm.iter().map(|&p| i32::from(p.abs())).sum::<i32>(), 1 << log);
            let table = FseTable::new(&norm, log);
            let cells = decoder_cells(&norm, log);
            let size = 1u32 << log;
            for (symbol, &p) in norm.iter().enumerate() {
                if p == 0 {
                    continue;
                }
                let first = table.first_state(symbol as u8);
                assert_eq!(cells[(first - size) as usize].0 as usize, symbol);
                for next in size..2 * size {
                    let mut buffer = [0u8; 16];
                    let mut bits = BitWriter::new(&mut buffer);
                    let state = table.step_back(next, symbol as u8, &mut bits);
                    let (s, n, base) = cells[(state - size) as usize];
                    assert_eq!(s as usize, symbol);
                    // The bits written are the next state's offset from the base.
                    let written = next - size - base;
                    assert!(written < 1 << n, "symbol {symbol}, next {next}");
                    assert_eq!(u64::from(written), bits.held & ((1 << n) - 1));
                }
            }
        }
    }

    #[test]
    fn codes_and_their_ranges() {
        assert_eq!(code_of(&LITERAL_LENGTH_BASE, 4), 4);
        assert_eq!(code_of(&LITERAL_LENGTH_BASE, 16), 16);
        assert_eq!(code_of(&LITERAL_LENGTH_BASE, 65535), 34);
        assert_eq!(code_of(&LITERAL_LENGTH_BASE, 131071), 35);
        assert_eq!(code_of(&MATCH_LENGTH_BASE, 3), 0);
        assert_eq!(code_of(&MATCH_LENGTH_BASE, 34), 31);
        assert_eq!(code_of(&MATCH_LENGTH_BASE, 35), 32);
        assert_eq!(code_of(&MATCH_LENGTH_BASE, 131072), 52);
        assert_eq!(MATCH_LENGTH_BASE[52], 65539);
        // A block holds 128 KiB: literal lengths stay below that, match lengths reach it.
        for v in 0..=131_072u32 {
            if v < 131_072 {
                assert_eq!(literal_length_code(v), code_of(&LITERAL_LENGTH_BASE, v), "literals {v}");
            }
            if v >= 3 {
                assert_eq!(match_length_code(v), code_of(&MATCH_LENGTH_BASE, v), "match {v}");
            }
        }
        assert_eq!(LITERAL_LENGTH_BASE[35], 65536);
    }

    #[test]
    fn decodes_to_the_runs_values() {
        let cases: Vec<(usize, Vec<(u64, u64)>)> = vec![
            (4, vec![(7, 1)]),
            (4, vec![(7, 2)]),
            (4, vec![(0, 1 << 20)]),
            (8, vec![(u64::MAX, 3), (1, 1), (2, 1), (3, 100_000)]),
            (4, (0..100_000u64).map(|v| (v * 2_654_435_761 % 4_000_000_000, 1)).collect()),
            (4, (0..10_000u64).map(|v| (v, 1 + v % 7)).collect()),
            (4, vec![(1, 32_767), (2, 1), (3, 32_768), (4, 32_769), (5, 1)]),
            (8, vec![(9, 16_383), (10, 16_385), (11, 2)]),
        ];
        for (width, runs) in cases {
            for repeats in [vec![], vec![3, 70_000], vec![2, 4, 1 << 25]] {
                let frame = encode_runs(width, &repeats, &value_runs(&runs)).unwrap();
                assert_eq!(decoded(&frame), expanded(width, &runs), "width {width}, {} runs", runs.len());
                // The frame states its content size, as zarr's readers want.
                let size = zstd::zstd_safe::get_frame_content_size(&frame).unwrap();
                assert_eq!(size, Some(expanded(width, &runs).len() as u64));
            }
        }
    }

    #[test]
    fn long_runs_shrink_and_short_ones_stay_raw() {
        let runs: Vec<(u64, u64)> = (0..4096u64).map(|v| (v % 3, 64)).collect();
        let frame = encode_runs(4, &[], &value_runs(&runs)).unwrap();
        assert!(frame.len() * 20 < 4096 * 64 * 4, "{} bytes", frame.len());
        let distinct: Vec<(u64, u64)> = (0..65_536u64).map(|v| (v, 1)).collect();
        let frame = encode_runs(4, &[], &value_runs(&distinct)).unwrap();
        assert!(frame.len() <= 65_536 * 4 + 64, "{} bytes", frame.len());
        assert_eq!(decoded(&frame), expanded(4, &distinct));
    }

    /// The symbol compression modes byte of each compressed block of
    /// `frame` that has sequences (the frames `encode_runs` writes: a
    /// window descriptor and a content size, raw literals).
    fn sequence_modes(frame: &[u8]) -> Vec<u8> {
        let descriptor = frame[4];
        let mut at = 6 + if descriptor >> 6 == 3 { 8 } else { 4 };
        let mut modes = Vec::new();
        loop {
            let header = u32::from_le_bytes([frame[at], frame[at + 1], frame[at + 2], 0]);
            let (last, kind, size) = (header & 1 == 1, (header >> 1) & 3, (header >> 3) as usize);
            at += 3;
            if kind == BLOCK_COMPRESSED {
                let first = frame[at];
                let (literals, header_bytes) = match (first >> 2) & 3 {
                    0 | 2 => (usize::from(first >> 3), 1),
                    1 => (usize::from(first >> 4) | usize::from(frame[at + 1]) << 4, 2),
                    _ => (
                        usize::from(first >> 4) | usize::from(frame[at + 1]) << 4 | usize::from(frame[at + 2]) << 12,
                        3,
                    ),
                };
                let mut s = at + header_bytes + literals;
                let count = match frame[s] {
                    0 => 0,
                    b if b < 128 => usize::from(b),
                    255 => 1,
                    _ => 2,
                };
                s += match frame[s] {
                    b if b < 128 => 1,
                    255 => 3,
                    _ => 2,
                };
                if count > 0 {
                    modes.push(frame[s]);
                }
                at += size;
            } else {
                at += if kind == BLOCK_RAW { size } else { 1 };
            }
            if last {
                return modes;
            }
        }
    }

    /// A label-like chunk of many blocks whose codes are alike from block
    /// to block: some blocks repeat the table the block before made, and
    /// zstd reads the frame back.
    #[test]
    fn blocks_repeat_the_table_before() {
        let (z, y, x) = (16u64, 128u64, 128u64);
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut runs = ValueRuns::default();
        let mut pairs = Vec::new();
        for k in 0..z {
            for j in 0..y {
                // Cells 11 wide whose edges move by 0 to 2 from row to row.
                for i in 0..x {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let label = (k / 4) * 10_000 + (j / 9) * 100 + (i + state % 3) / 11;
                    runs.push(label, 1);
                    pairs.push((label, 1));
                }
            }
        }
        let frame = encode_runs(4, &[x, y * x], &runs).unwrap();
        assert_eq!(decoded(&frame), expanded(4, &pairs));
        let modes = sequence_modes(&frame);
        assert!(modes.len() > 4, "{} blocks with sequences", modes.len());
        let field_modes = |m: u8| [m >> 6, (m >> 4) & 3, (m >> 2) & 3];
        assert!(modes.iter().any(|&m| field_modes(m).contains(&MODE_REPEAT)), "modes {modes:?}");
        assert!(modes.iter().any(|&m| field_modes(m).contains(&MODE_FSE)), "modes {modes:?}");
    }

    #[test]
    fn bad_runs_are_refused() {
        assert!(matches!(encode_runs(2, &[], &value_runs(&[(1, 1)])), Err(RunsError::Width(2))));
        assert!(matches!(encode_runs(4, &[], &value_runs(&[(1 << 32, 1)])), Err(RunsError::Value { .. })));
        assert_eq!(decoded(&encode_runs(4, &[8], &ValueRuns::default()).unwrap()), Vec::<u8>::new());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn random_runs_decode_to_their_values(
            wide in any::<bool>(),
            runs in proptest::collection::vec((0u64..6, prop_oneof![1u64..4, 1u64..100, 1u64..70_000]), 0..300),
            repeats in proptest::collection::vec(1u64..300, 0..3),
            big in any::<u32>(),
        ) {
            let width = if wide { 8 } else { 4 };
            // Values of every byte length, few of them so that neighbours repeat.
            let runs: Vec<(u64, u64)> = runs
                .into_iter()
                .map(|(v, c)| (if v == 5 { u64::from(big) } else { v << (8 * v) }, c))
                .map(|(v, c)| (if width == 4 { v & u64::from(u32::MAX) } else { v }, c))
                .collect();
            let frame = encode_runs(width, &repeats, &value_runs(&runs)).unwrap();
            prop_assert_eq!(decoded(&frame), expanded(width, &runs));
        }

        /// Label-like volumes: rows and planes that mostly repeat.
        #[test]
        fn repeating_rows_and_planes_decode_to_their_values(
            wide in any::<bool>(),
            shape in (1u64..6, 1u64..40, 1u64..90),
            cuts in proptest::collection::vec((0u64..100_000, 0u64..7), 0..60),
        ) {
            let width = if wide { 8 } else { 4 };
            let (z, y, x) = shape;
            // Cells: boxes of labels whose edges move by cut.
            let label = |k: u64, j: u64, i: u64| {
                let shift = cuts.iter().filter(|&&(at, _)| at % (z * y) == k * y + j).map(|c| c.1).sum::<u64>();
                (k / 2) * 1000 + (j / 7) * 100 + (i + shift) / 11
            };
            let mut runs: Vec<(u64, u64)> = Vec::new();
            for k in 0..z {
                for j in 0..y {
                    for i in 0..x {
                        match runs.last_mut() {
                            Some((v, n)) if *v == label(k, j, i) => *n += 1,
                            _ => runs.push((label(k, j, i), 1)),
                        }
                    }
                }
            }
            let frame = encode_runs(width, &[x, y * x], &value_runs(&runs)).unwrap();
            prop_assert_eq!(decoded(&frame), expanded(width, &runs));
        }

        /// A relabelled frame decodes to the relabelled values, in raw
        /// blocks (short runs) and compressed ones alike, and so do the
        /// values of the map that joins neighbouring runs.
        #[test]
        fn relabelled_frames_decode_to_the_new_labels(
            wide in any::<bool>(),
            runs in proptest::collection::vec((0u64..40, prop_oneof![1u64..3, 1u64..100, 1u64..70_000]), 0..300),
            repeats in proptest::collection::vec(1u64..300, 0..3),
            modulus in 1u64..12,
            offset in any::<u32>(),
            short in any::<bool>(),
        ) {
            let width = if wide { 8 } else { 4 };
            // Runs of one value alone leave the blocks raw.
            let runs: Vec<(u64, u64)> = runs.into_iter().map(|(v, n)| (v, if short { 1 } else { n })).collect();
            let frame = LabelFrame::encode(width, &repeats, &value_runs(&runs)).unwrap();
            prop_assert_eq!(decoded(frame.bytes()), expanded(width, &runs));
            // Its values found again from the bytes alone.
            prop_assert_eq!(&LabelFrame::from_frame(frame.bytes().to_vec(), width).unwrap(), &frame);
            let label = |v: u64| v % modulus + u64::from(offset);
            let relabelled = frame.relabelled(|v| Some(label(v))).unwrap();
            prop_assert_eq!(relabelled.len(), frame.bytes().len());
            let new: Vec<(u64, u64)> = runs.iter().map(|&(v, n)| (label(v), n)).collect();
            prop_assert_eq!(decoded(&relabelled), expanded(width, &new));
        }
    }

    #[test]
    fn frames_made_by_blocks_relabel_as_their_labels() {
        // Labels with long runs, repeated rows and planes, and changes.
        let shape = [6u64, 40, 300];
        let n = (shape[0] * shape[1] * shape[2]) as usize;
        let labels: Vec<u32> = (0..n).map(|i| ((i / 7 + i / 2000) % 23) as u32 + 1).collect();
        let bytes = gpu_waterz_blockwise::label_frame(&labels, shape).unwrap();
        let frame = LabelFrame::from_frame(bytes.clone(), 4).unwrap();
        assert_eq!(frame.bytes(), &bytes[..]);
        let relabelled = frame.relabelled(|v| Some(v * 1000 + 1)).unwrap();
        let expected: Vec<u8> = labels.iter().flat_map(|&v| (v * 1000 + 1).to_le_bytes()).collect();
        assert_eq!(decoded(&relabelled), expected);
        // Not a frame of raw values.
        assert!(LabelFrame::from_frame(bytes[..bytes.len() - 1].to_vec(), 4).is_err());
        assert!(LabelFrame::from_frame(vec![1, 2, 3], 4).is_err());
        let level3 = zstd::bulk::compress(&expected, 3).unwrap();
        assert!(matches!(LabelFrame::from_frame(level3, 4), Err(RunsError::Frame(_))));
        assert!(matches!(LabelFrame::from_frame(bytes, 3), Err(RunsError::Width(3))));
    }

    #[test]
    fn relabelling_refuses_missing_and_wide_labels() {
        let runs = value_runs(&[(1, 3), (2, 5), (1, 4)]);
        let frame = LabelFrame::encode(4, &[4], &runs).unwrap();
        assert!(matches!(frame.relabelled(|v| (v == 1).then_some(9)), Err(RunsError::Unmapped(2))));
        assert!(matches!(frame.relabelled(|_| Some(1 << 32)), Err(RunsError::Value { value: 4294967296, width: 4 })));
        let wide = LabelFrame::encode(8, &[4], &runs).unwrap();
        let relabelled = wide.relabelled(|v| Some(v << 40)).unwrap();
        assert_eq!(decoded(&relabelled), expanded(8, &[(1 << 40, 3), (2 << 40, 5), (1 << 40, 4)]));
    }
}
