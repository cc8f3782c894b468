//! zstd frames of uint32 label chunks, made block by block on the GPU:
//! the kernels' argument structs and the encoder of one zstd block, which
//! the kernel runs per warp (every lane alike, the matches counted a warp
//! at a time) and host tests run as it is.
//!
//! A frame (RFC 8878) of a C-order chunk of `n` voxels, 4 bytes each,
//! little-endian: the frame header ([`frame_header`]) and one zstd block
//! per [`BLOCK_VOXELS`] voxels, each encoded alone ([`encode_block`]), so
//! that every block is one warp's work. A block's matches copy the
//! voxel before (a run going on), the row above or the plane above
//! (`FrameGeometry`), wherever they lie in the chunk (the decoder holds
//! the whole window); at each voxel the longest of those matches is
//! taken, else the voxel's value is a literal. The literals are raw, the
//! sequences coded with the format's predefined tables, their offsets
//! repeat codes only where the block itself set the repeated offset (the
//! decoder's repeat offsets at a block's start depend on the blocks
//! before, which a warp does not know). A block that would not shrink is
//! written raw.
//!
//! Every choice reads only which voxels are equal, and values appear only
//! as raw bytes (raw literals, raw blocks), so the frame of a relabelling
//! is this frame with those bytes relabelled.

/// Voxels per zstd block (16 KiB of content): one GPU thread's work.
pub const BLOCK_VOXELS: u64 = 4096;

/// Bytes per voxel (uint32 labels).
pub const VALUE_BYTES: u64 = 4;

/// The bytes of a raw block of [`BLOCK_VOXELS`]: its header and content.
pub const RAW_BLOCK_BYTES: u64 = 3 + BLOCK_VOXELS * VALUE_BYTES;

/// Room per block in the kernel's output: a raw block, and 8 bytes past
/// the end that the bit writer's whole-word stores may touch.
pub const SLOT_BYTES: u64 = RAW_BLOCK_BYTES + 13;

/// The largest window a frame uses (what zstd's decoders accept without
/// being told to): repeats farther away are not used.
pub const MAX_WINDOW_LOG: u32 = 27;

/// Where a block's literals start in its slot: after the block header (3
/// bytes) and the literals section's header (always the 3-byte form).
const LITERALS_AT: usize = 6;

/// Block types (RFC 8878, 3.1.1.2).
const BLOCK_RAW: u32 = 0;
const BLOCK_COMPRESSED: u32 = 2;

/// The distances, in voxels, at which a chunk's matches are looked for:
/// the voxel before, then the row above and the plane above where they
/// fit the window (0: not used).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameGeometry {
    /// The voxels of the chunk.
    pub voxels: u64,
    /// The row above (a chunk's x extent), or 0.
    pub row: u64,
    /// The plane above (y times x), or 0.
    pub plane: u64,
}

impl FrameGeometry {
    /// The geometry of a C-order chunk of `shape` (z, y, x): a repeat is
    /// used where it lies more than one voxel back and within the largest
    /// window.
    pub const fn of(shape: [u64; 3]) -> Self {
        let plane = shape[1].saturating_mul(shape[2]);
        Self { voxels: shape[0].saturating_mul(plane), row: usable(shape[2]), plane: usable(plane) }
    }

    /// The zstd blocks of the frame.
    pub const fn blocks(&self) -> u64 {
        self.voxels.div_ceil(BLOCK_VOXELS)
    }

    /// Distance `i` looked at, in voxels (0: not used): the voxel before,
    /// the row, the plane (a match, not an array, which the GPU would keep
    /// in local memory).
    #[inline(always)]
    const fn distance(&self, i: usize) -> u64 {
        match i {
            0 => 1,
            1 => self.row,
            _ => self.plane,
        }
    }

    /// The window's log: it holds the farthest repeat (at least 2^17, so
    /// that a block of 128 KiB is allowed).
    pub const fn window_log(&self) -> u32 {
        let farthest = if self.plane > 0 {
            self.plane
        } else if self.row > 0 {
            self.row
        } else {
            1
        };
        let bytes = farthest * VALUE_BYTES;
        let log = 64 - (bytes - 1).leading_zeros();
        if log < 17 {
            17
        } else {
            log
        }
    }
}

/// A repeat `d` voxels back, or 0 where it is not used: at most one
/// voxel back (the voxel before is always looked at) or past the window.
const fn usable(d: u64) -> u64 {
    if d > 1 && d.saturating_mul(VALUE_BYTES) <= 1 << MAX_WINDOW_LOG {
        d
    } else {
        0
    }
}

/// The frame's header: magic number, descriptor (the content size in 4 or
/// 8 bytes, a window, no checksum, no dictionary), window and content
/// size. Gives the bytes and how many of them are used.
pub fn frame_header(geometry: &FrameGeometry) -> ([u8; 14], usize) {
    let mut out = [0u8; 14];
    out[..4].copy_from_slice(&0xFD2F_B528u32.to_le_bytes());
    let bytes = geometry.voxels * VALUE_BYTES;
    let wide = bytes > u32::MAX as u64;
    out[4] = if wide { 3 << 6 } else { 2 << 6 };
    out[5] = ((geometry.window_log() - 10) << 3) as u8;
    if wide {
        out[6..14].copy_from_slice(&bytes.to_le_bytes());
        (out, 14)
    } else {
        out[6..10].copy_from_slice(&(bytes as u32).to_le_bytes());
        (out, 10)
    }
}

/// Extra bits of each literal-length code (RFC 8878, 3.1.1.3.2.1.1).
pub const LITERAL_LENGTH_BITS: [u8; 36] =
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16];

/// Extra bits of each match-length code.
pub const MATCH_LENGTH_BITS: [u8; 53] = [
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2,
    3, 3, 4, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
];

/// The predefined distributions (RFC 8878, 3.1.1.3.2.2): literal lengths
/// and match lengths at accuracy log 6, offsets at 5 (-1: a probability
/// below one cell). These and the tables above are also the host
/// encoder's (`gpu_waterz_cli::io::encode_runs`).
pub const LITERAL_LENGTH_NORM: [i16; 36] =
    [4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1, -1, -1, -1, -1];
/// See [`LITERAL_LENGTH_NORM`].
pub const MATCH_LENGTH_NORM: [i16; 53] = [
    1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1,
];
/// See [`LITERAL_LENGTH_NORM`].
pub const OFFSET_NORM: [i16; 29] =
    [1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1];

/// The first value of each code: `first`, then each code's range after
/// the one before.
const fn bases<const N: usize>(first: u32, bits: &[u8; N]) -> [u32; N] {
    let mut base = [0u32; N];
    base[0] = first;
    let mut i = 1;
    while i < N {
        base[i] = base[i - 1] + (1 << bits[i - 1]);
        i += 1;
    }
    base
}

/// The first literal length of each literal-length code.
pub const LITERAL_LENGTH_BASE: [u32; 36] = bases(0, &LITERAL_LENGTH_BITS);
/// The first match length (in bytes) of each match-length code.
pub const MATCH_LENGTH_BASE: [u32; 53] = bases(3, &MATCH_LENGTH_BITS);

/// The code tables that the encoder indexes at run time, as named statics:
/// a `const` indexed at run time becomes an anonymous global in the PTX,
/// named by a hash of where this crate lies, which would make the
/// committed PTX depend on the checkout's path.
static LITERAL_LENGTH_BASES: [u32; 36] = LITERAL_LENGTH_BASE;
static LITERAL_LENGTH_EXTRA: [u8; 36] = LITERAL_LENGTH_BITS;
static MATCH_LENGTH_BASES: [u32; 53] = MATCH_LENGTH_BASE;
static MATCH_LENGTH_EXTRA: [u8; 53] = MATCH_LENGTH_BITS;

/// The literal-length code of `literals` bytes.
#[inline(always)]
pub fn literal_length_code(literals: u32) -> usize {
    // Codes 16 to 24 cover 16..64 in ranges of 2, 2, 2, 2, 4, 4, 8, 8, 16.
    length_code(literals, literals, 16, 64, &LITERAL_LENGTH_BASES, 19)
}

/// The match-length code of a match of `length` bytes (at least 3).
#[inline(always)]
pub fn match_length_code(length: u32) -> usize {
    length_code(length, length - 3, 32, 128, &MATCH_LENGTH_BASES, 36)
}

/// The code of a literal or match length of `value` (`above` its least,
/// 0 or 3): `above` itself below `direct`; up to `stepped`, the last code
/// whose base (`bases`, in `value`'s terms) is at most `value`; from there
/// on one code per power of two, `log_offset` plus the power.
#[inline(always)]
fn length_code(value: u32, above: u32, direct: u32, stepped: u32, bases: &[u32], log_offset: usize) -> usize {
    if above < direct {
        above as usize
    } else if above < stepped {
        let mut code = direct as usize;
        while code + 1 < bases.len() && bases[code + 1] <= value {
            code += 1;
        }
        code
    } else {
        (31 - above.leading_zeros()) as usize + log_offset
    }
}

/// An FSE table as the encoder walks it (zstd's reference layout): the
/// states (`2^log + cell`) of each symbol in the decoder's order, and per
/// symbol the numbers that give, from the state after it, the bits to
/// write and the symbol's state.
pub struct FseTable<const CELLS: usize, const SYMBOLS: usize> {
    log: u32,
    states: [u16; CELLS],
    delta_bits: [u32; SYMBOLS],
    delta_state: [i32; SYMBOLS],
}

impl<const CELLS: usize, const SYMBOLS: usize> FseTable<CELLS, SYMBOLS> {
    /// The table of a normalized distribution over `CELLS = 2^log` cells.
    const fn new(norm: &[i16; SYMBOLS], log: u32) -> Self {
        // The cells in the decoder's order: each symbol's spread with the
        // format's step, those "below one" in the last cells.
        let mut cells = [0u8; CELLS];
        let mut high = CELLS - 1;
        let mut s = 0;
        while s < SYMBOLS {
            if norm[s] == -1 {
                cells[high] = s as u8;
                high -= 1;
            }
            s += 1;
        }
        let step = (CELLS >> 1) + (CELLS >> 3) + 3;
        let mut position = 0;
        s = 0;
        while s < SYMBOLS {
            let mut k = 0;
            while k < norm[s] {
                cells[position] = s as u8;
                position = (position + step) & (CELLS - 1);
                while position > high {
                    position = (position + step) & (CELLS - 1);
                }
                k += 1;
            }
            s += 1;
        }
        let mut next = [0usize; SYMBOLS];
        let mut total = 0usize;
        s = 0;
        while s < SYMBOLS {
            next[s] = total;
            total += if norm[s] == -1 {
                1
            } else if norm[s] > 0 {
                norm[s] as usize
            } else {
                0
            };
            s += 1;
        }
        let mut states = [0u16; CELLS];
        let mut cell = 0;
        while cell < CELLS {
            let symbol = cells[cell] as usize;
            states[next[symbol]] = (CELLS + cell) as u16;
            next[symbol] += 1;
            cell += 1;
        }
        let mut delta_bits = [0u32; SYMBOLS];
        let mut delta_state = [0i32; SYMBOLS];
        let mut total = 0i32;
        let size = CELLS as u32;
        s = 0;
        while s < SYMBOLS {
            let p = norm[s];
            if p == -1 || p == 1 {
                total += 1;
                delta_bits[s] = (log << 16) - size;
                delta_state[s] = total - 2;
            } else if p > 1 {
                let p = p as u32;
                let most_bits = log - (31 - (p - 1).leading_zeros());
                total += p as i32;
                delta_bits[s] = (most_bits << 16) - (p << most_bits);
                delta_state[s] = total - 2 * p as i32;
            }
            s += 1;
        }
        Self { log, states, delta_bits, delta_state }
    }

    /// The state of `symbol` the encoder starts from (the last sequence's).
    #[inline(always)]
    fn first_state(&self, symbol: usize) -> u32 {
        let bits = (self.delta_bits[symbol] + (1 << 15)) >> 16;
        let value = (bits << 16) - self.delta_bits[symbol];
        self.states[((value >> bits) as i32 + self.delta_state[symbol]) as usize] as u32
    }

    /// From `state` (the next sequence's), writes the bits that the decoder
    /// reads to get there and returns the state of `symbol`.
    #[inline(always)]
    fn step_back(&self, state: u32, symbol: usize, bits: &mut BitWriter<'_>) -> u32 {
        let n = (state + self.delta_bits[symbol]) >> 16;
        bits.add(state & ((1 << n) - 1), n);
        self.states[((state >> n) as i32 + self.delta_state[symbol]) as usize] as u32
    }

    /// Writes the first state's cell (read first by the decoder).
    #[inline(always)]
    fn write_state(&self, state: u32, bits: &mut BitWriter<'_>) {
        bits.add(state & ((1 << self.log) - 1), self.log);
    }
}

/// The predefined tables.
static LITERAL_LENGTH_TABLE: FseTable<64, 36> = FseTable::new(&LITERAL_LENGTH_NORM, 6);
static OFFSET_TABLE: FseTable<32, 29> = FseTable::new(&OFFSET_NORM, 5);
static MATCH_LENGTH_TABLE: FseTable<64, 53> = FseTable::new(&MATCH_LENGTH_NORM, 6);

/// Bits written from the lowest up into `buffer` from `at`, whole 64-bit
/// words at a time (the buffer has 8 bytes to spare past the last byte).
struct BitWriter<'b> {
    buffer: &'b mut [u8],
    at: usize,
    held: u64,
    count: u32,
}

impl BitWriter<'_> {
    /// Appends the low `bits` bits of `value` (at most 63 held after it).
    #[inline(always)]
    fn add(&mut self, value: u32, bits: u32) {
        self.held |= (value as u64) << self.count;
        self.count += bits;
    }

    /// Writes the whole bytes held; at most 7 bits stay.
    #[inline(always)]
    fn flush(&mut self) {
        let bytes = (self.count >> 3) as usize;
        let word = self.held.to_le_bytes();
        let mut k = 0;
        while k < 8 {
            self.buffer[self.at + k] = word[k];
            k += 1;
        }
        self.at += bytes;
        self.held = if bytes == 8 { 0 } else { self.held >> (bytes * 8) };
        self.count &= 7;
    }

    /// The end mark and the last bytes; gives the position after them.
    fn finish(mut self) -> usize {
        self.add(1, 1);
        let bytes = self.count.div_ceil(8) as usize;
        let word = self.held.to_le_bytes();
        let mut k = 0;
        while k < bytes {
            self.buffer[self.at + k] = word[k];
            k += 1;
        }
        self.at + bytes
    }
}

/// A sequence packed in a u32: literal voxels (13 bits), match voxels
/// (13 bits), the distance's index (2 bits: the voxel before, the row,
/// the plane) and the offset's repeat code (2 bits, 0: the offset itself).
#[inline(always)]
const fn pack_sequence(literals: u64, length: u64, distance: usize) -> u32 {
    (literals as u32) | ((length as u32) << 13) | ((distance as u32) << 26)
}

/// Literal bytes, match bytes, distance index and repeat code of a packed
/// sequence.
#[inline(always)]
const fn unpack_sequence(s: u32) -> (u32, u32, usize, u32) {
    ((s & 0x1FFF) * VALUE_BYTES as u32, ((s >> 13) & 0x1FFF) * VALUE_BYTES as u32, ((s >> 26) & 3) as usize, s >> 28)
}

/// How many voxels from `p` on equal those `d` before, up to `end`.
#[inline(always)]
fn match_length(labels: &[u32], p: usize, d: usize, end: usize) -> usize {
    let mut k = 0;
    while p + k < end && labels[p + k] == labels[p + k - d] {
        k += 1;
    }
    k
}

/// Encodes zstd block `block` of the frame of `labels` (the whole chunk,
/// C order) into `slot` (at least [`SLOT_BYTES`]), with `sequences` (at
/// least [`BLOCK_VOXELS`] values) as room for its sequences: the block's
/// header, then its content, compressed or raw. `last`: whether it is the
/// frame's last block. Gives the bytes written.
pub fn encode_block(
    labels: &[u32],
    geometry: &FrameGeometry,
    block: u64,
    last: bool,
    slot: &mut [u8],
    sequences: &mut [u32],
) -> usize {
    let length = |p, d, end| match_length(labels, p, d, end);
    encode_block_with(labels, geometry, block, last, slot, sequences, length)
}

/// [`encode_block`] with the matches' lengths given by `length(p, d,
/// end)`: how many voxels from `p` on equal those `d` before, up to `end`
/// (which must be what [`encode_block`] counts; the GPU counts them a warp
/// at a time, every lane of the warp running this function alike).
pub fn encode_block_with(
    labels: &[u32],
    geometry: &FrameGeometry,
    block: u64,
    last: bool,
    slot: &mut [u8],
    sequences: &mut [u32],
    mut length: impl FnMut(usize, usize, usize) -> usize,
) -> usize {
    let start = (block * BLOCK_VOXELS) as usize;
    let end = ((block + 1) * BLOCK_VOXELS).min(geometry.voxels) as usize;
    // The parse: at each voxel the longest match, else a literal.
    let (mut p, mut pending, mut count, mut at) = (start, 0u64, 0usize, LITERALS_AT);
    while p < end {
        let (mut best, mut which) = (0, 0);
        let mut i = 0;
        while i < 3 {
            let d = geometry.distance(i) as usize;
            if d > 0 && d <= p {
                let length = length(p, d, end);
                if length > best {
                    (best, which) = (length, i);
                }
            }
            i += 1;
        }
        if best == 0 {
            let bytes = labels[p].to_le_bytes();
            slot[at] = bytes[0];
            slot[at + 1] = bytes[1];
            slot[at + 2] = bytes[2];
            slot[at + 3] = bytes[3];
            at += 4;
            pending += 1;
            p += 1;
        } else {
            sequences[count] = pack_sequence(pending, best as u64, which);
            count += 1;
            pending = 0;
            p += best;
        }
    }
    let decoded = (end - start) * VALUE_BYTES as usize;
    let literals = at - LITERALS_AT;
    // A sequence takes at most 85 bits: when the bound does not fit below
    // the raw block's size, the block is written raw.
    let bound = LITERALS_AT + literals + 4 + 11 * count + 8;
    let size = if bound <= 3 + decoded {
        let size = write_sequences(slot, literals, &mut sequences[..count], geometry) - 3;
        if size < decoded {
            Some(size)
        } else {
            None
        }
    } else {
        None
    };
    let (kind, size) = match size {
        Some(size) => (BLOCK_COMPRESSED, size),
        None => {
            let mut q = 3;
            let mut v = start;
            while v < end {
                let bytes = labels[v].to_le_bytes();
                slot[q] = bytes[0];
                slot[q + 1] = bytes[1];
                slot[q + 2] = bytes[2];
                slot[q + 3] = bytes[3];
                q += 4;
                v += 1;
            }
            (BLOCK_RAW, decoded)
        }
    };
    let header = (last as u32) | (kind << 1) | ((size as u32) << 3);
    let header = header.to_le_bytes();
    slot[0] = header[0];
    slot[1] = header[1];
    slot[2] = header[2];
    3 + size
}

/// Writes a compressed block's literals header (its literals already at
/// [`LITERALS_AT`]), sequences header and sequences; gives the position
/// after them.
fn write_sequences(slot: &mut [u8], literals: usize, sequences: &mut [u32], geometry: &FrameGeometry) -> usize {
    // Raw literals, the 3-byte header (size format 3: 20 bits of size).
    slot[3] = (3 << 2) | (((literals & 0xF) as u8) << 4);
    slot[4] = (literals >> 4) as u8;
    slot[5] = (literals >> 12) as u8;
    let mut at = LITERALS_AT + literals;
    let count = sequences.len();
    if count < 128 {
        slot[at] = count as u8;
        at += 1;
    } else {
        // At most BLOCK_VOXELS sequences: below 0x7F00.
        slot[at] = ((count >> 8) + 128) as u8;
        slot[at + 1] = count as u8;
        at += 2;
    }
    if count == 0 {
        return at;
    }
    // Predefined tables for all three codes.
    slot[at] = 0;
    at += 1;
    // The repeat codes, in the decoder's order: an offset is a repeat only
    // where the block set it (0: an offset the block does not know).
    let mut repeats = [0u32; 3];
    let mut k = 0;
    while k < count {
        let (literal_bytes, _, which, _) = unpack_sequence(sequences[k]);
        let offset = geometry.distance(which) as u32 * VALUE_BYTES as u32;
        let r = repeats;
        let code = if literal_bytes > 0 {
            if offset == r[0] {
                1
            } else if offset == r[1] {
                repeats = [r[1], r[0], r[2]];
                2
            } else if offset == r[2] {
                repeats = [r[2], r[0], r[1]];
                3
            } else {
                repeats = [offset, r[0], r[1]];
                0
            }
        } else if offset == r[1] {
            repeats = [r[1], r[0], r[2]];
            1
        } else if offset == r[2] {
            repeats = [r[2], r[0], r[1]];
            2
        } else {
            repeats = [offset, r[0], r[1]];
            0
        };
        sequences[k] |= code << 28;
        k += 1;
    }
    // The bitstream, from the last sequence to the first.
    let mut bits = BitWriter { buffer: slot, at, held: 0, count: 0 };
    let codes = |s: u32| {
        let (literal_bytes, match_bytes, which, code) = unpack_sequence(s);
        let offset_value = if code == 0 { geometry.distance(which) as u32 * VALUE_BYTES as u32 + 3 } else { code };
        let ll = literal_length_code(literal_bytes);
        let ml = match_length_code(match_bytes);
        let of = (31 - offset_value.leading_zeros()) as usize;
        (literal_bytes, match_bytes, offset_value, ll, ml, of)
    };
    let extra_bits = |bits: &mut BitWriter<'_>, s: u32| {
        let (literal_bytes, match_bytes, offset_value, ll, ml, of) = codes(s);
        bits.add(literal_bytes - LITERAL_LENGTH_BASES[ll], LITERAL_LENGTH_EXTRA[ll] as u32);
        bits.flush();
        bits.add(match_bytes - MATCH_LENGTH_BASES[ml], MATCH_LENGTH_EXTRA[ml] as u32);
        bits.add(offset_value - (1 << of), of as u32);
    };
    let last = count - 1;
    let (_, _, _, ll, ml, of) = codes(sequences[last]);
    let mut ll_state = LITERAL_LENGTH_TABLE.first_state(ll);
    let mut of_state = OFFSET_TABLE.first_state(of);
    let mut ml_state = MATCH_LENGTH_TABLE.first_state(ml);
    extra_bits(&mut bits, sequences[last]);
    let mut k = last;
    while k > 0 {
        k -= 1;
        bits.flush();
        let (_, _, _, ll, ml, of) = codes(sequences[k]);
        of_state = OFFSET_TABLE.step_back(of_state, of, &mut bits);
        ml_state = MATCH_LENGTH_TABLE.step_back(ml_state, ml, &mut bits);
        ll_state = LITERAL_LENGTH_TABLE.step_back(ll_state, ll, &mut bits);
        extra_bits(&mut bits, sequences[k]);
    }
    bits.flush();
    MATCH_LENGTH_TABLE.write_state(ml_state, &mut bits);
    OFFSET_TABLE.write_state(of_state, &mut bits);
    LITERAL_LENGTH_TABLE.write_state(ll_state, &mut bits);
    bits.finish()
}

/// `label_frame_blocks`: each zstd block of a chunk's frame encoded
/// ([`encode_block`]) into its slot.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LabelFrameBlocksArgs {
    /// One uint32 label per voxel of the chunk, C order.
    pub labels: *const u32,
    /// The chunk's voxels and repeats.
    pub geometry: FrameGeometry,
    /// [`SLOT_BYTES`] per zstd block.
    pub slots: *mut u8,
    /// [`BLOCK_VOXELS`] u32s per zstd block (room for its sequences).
    pub sequences: *mut u32,
    /// One u32 per zstd block: the bytes written into its slot.
    pub sizes: *mut u32,
}

/// `gather_frame_blocks`: each zstd block's bytes copied from its slot to
/// its place in the frame.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GatherFrameBlocksArgs {
    /// [`SLOT_BYTES`] per zstd block.
    pub slots: *const u8,
    /// The bytes of each block's slot that it uses.
    pub sizes: *const u32,
    /// Where each block goes in `frame` (the exclusive sum of `sizes`).
    pub offsets: *const u64,
    /// The zstd blocks.
    pub blocks: u64,
    /// The blocks, one after the other (the sum of `sizes` bytes).
    pub frame: *mut u8,
}

impl_kernel_args!(
    LabelFrameBlocksArgs => LabelFrameBlocks { labels, geometry, slots, sequences, sizes },
    GatherFrameBlocksArgs => GatherFrameBlocks { slots, sizes, offsets, blocks, frame },
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_their_ranges() {
        for literals in 0..70_000u32 {
            let code = literal_length_code(literals);
            assert!(LITERAL_LENGTH_BASE[code] <= literals, "{literals}");
            assert!(literals - LITERAL_LENGTH_BASE[code] < 1 << LITERAL_LENGTH_BITS[code], "{literals}");
        }
        for length in 3..70_000u32 {
            let code = match_length_code(length);
            assert!(MATCH_LENGTH_BASE[code] <= length, "{length}");
            assert!(length - MATCH_LENGTH_BASE[code] < 1 << MATCH_LENGTH_BITS[code], "{length}");
        }
    }

    #[test]
    fn geometry_keeps_repeats_inside_the_window() {
        let g = FrameGeometry::of([256, 512, 512]);
        assert_eq!((g.voxels, g.row, g.plane), (256 * 512 * 512, 512, 512 * 512));
        assert_eq!(g.window_log(), 20);
        assert_eq!(g.blocks(), 256 * 512 * 512 / BLOCK_VOXELS);
        let far = FrameGeometry::of([2, 8192, 8192]);
        assert_eq!((far.row, far.plane), (8192, 0));
        let thin = FrameGeometry::of([3, 5, 1]);
        assert_eq!((thin.row, thin.plane, thin.window_log()), (0, 5, 17));
    }
}
