//! The float32 scaling-domain half-step on Hopper's warpgroup products
//! (`ot_wgmma_scaling_f32`, `wgmma.mma_async`, sm_90a). The same sums as
//! `ot_wide_scaling_f32` (three TF32 products per step, "3xTF32", each
//! chunk's sums taken apart from the running ones), but the tensor cores
//! read both operands from shared memory by descriptors: the operands come
//! split into their TF32 planes in the canonical core-matrix order
//! (`PLANES_WGMMA_ROWS`, `PLANES_WGMMA_PAIRS`), so that staging a chunk
//! is one contiguous `cp.async` copy per operand, made while the previous
//! chunk's products run. Only the modules built for sm_90a hold the
//! kernel's body (`cargo xtask kernels` assembles the sm_90 cubin from
//! them); elsewhere it traps, and the host launches it only from that
//! cubin.

#[cfg(target_feature = "sm_90a")]
use crate::device::*;
#[cfg(target_feature = "sm_90a")]
use crate::transport::{new_scaling, put_planes, scaling_error};
use gpu_waterz_abi::transport::OtWgmmaScalingF32Args;
#[cfg(target_feature = "sm_90a")]
use gpu_waterz_abi::transport::{
    chunks_of_split, planes_offset, tile_of_block, wgmma_descriptor, PLANES_WGMMA_PAIRS, PLANES_WGMMA_ROWS,
    TRANSPORT_WGMMA_CHUNK, TRANSPORT_WGMMA_PAIRS, TRANSPORT_WGMMA_ROWS, TRANSPORT_WGMMA_SHARED_BYTES,
    TRANSPORT_WGMMA_STAGES, TRANSPORT_WGMMA_THREADS,
};

#[cfg(target_feature = "sm_90a")]
mod hopper {
    use super::*;

    /// Rows of the output tile, as an index type.
    const ROWS: usize = TRANSPORT_WGMMA_ROWS as usize;
    /// Pairs of the output tile.
    const PAIRS: usize = TRANSPORT_WGMMA_PAIRS as usize;
    /// Columns per staged chunk.
    const CHUNK: usize = TRANSPORT_WGMMA_CHUNK as usize;
    /// Threads of a block (one warpgroup).
    const THREADS: usize = TRANSPORT_WGMMA_THREADS as usize;
    /// Chunks in shared memory at once.
    const STAGES: usize = TRANSPORT_WGMMA_STAGES as usize;
    /// 32-bit values of one plane of staged matrix rows (big or small parts).
    const ROW_PLANE: usize = ROWS * CHUNK;
    /// 32-bit values of one plane of staged vectors.
    const PAIR_PLANE: usize = PAIRS * CHUNK;
    /// 32-bit values of one stage: rows big, rows small, vectors big,
    /// vectors small.
    const STAGE: usize = 2 * ROW_PLANE + 2 * PAIR_PLANE;
    /// 16-byte copies each thread makes of a chunk's rows (two planes).
    const ROW_COPIES: usize = 2 * ROW_PLANE / 4 / THREADS;
    /// 16-byte copies each thread makes of a chunk's vectors (two planes).
    const PAIR_COPIES: usize = 2 * PAIR_PLANE / 4 / THREADS;
    /// Accumulators per thread: the `m64n128` product's 64 × 128 outputs
    /// over 128 threads.
    const OUTPUTS: usize = ROWS * PAIRS / THREADS;
    const _: () = assert!(
        ROWS == 64
            && PAIRS == 128
            && CHUNK % 8 == 0
            && THREADS == 128
            && OUTPUTS == 64
            && STAGES == 2
            && ROW_COPIES * 4 * THREADS == 2 * ROW_PLANE
            && PAIR_COPIES * 4 * THREADS == 2 * PAIR_PLANE
            && TRANSPORT_WGMMA_SHARED_BYTES as usize == STAGES * STAGE * 4,
        "one warpgroup's m64n128 tile, whole copies per thread, two stages"
    );

    /// Makes this thread's shared-memory writes visible to the tensor
    /// cores' reads (the async proxy); a barrier must follow before they
    /// read.
    ///
    /// # Safety
    /// None beyond running on the device.
    #[inline(always)]
    unsafe fn fence_shared_for_async() {
        // SAFETY: a fence.
        unsafe { core::arch::asm!("fence.proxy.async.shared::cta;", options(nostack)) };
    }

    /// Orders this thread's register accesses before the warpgroup
    /// products that follow (`wgmma.fence`).
    ///
    /// # Safety
    /// Every thread of the warpgroup runs it together.
    #[inline(always)]
    unsafe fn wgmma_fence() {
        // SAFETY: the caller's.
        unsafe { core::arch::asm!("wgmma.fence.sync.aligned;", options(nostack)) };
    }

    /// Closes the group of warpgroup products issued since the last one
    /// (`wgmma.commit_group`).
    ///
    /// # Safety
    /// Every thread of the warpgroup runs it together.
    #[inline(always)]
    unsafe fn wgmma_commit() {
        // SAFETY: the caller's.
        unsafe { core::arch::asm!("wgmma.commit_group.sync.aligned;", options(nostack)) };
    }

    /// The shared-window address of the generic pointer `p` to shared
    /// memory.
    #[inline(always)]
    fn shared_address<T>(p: *const T) -> u32 {
        let out: u64;
        // SAFETY: an address conversion.
        unsafe {
            core::arch::asm!(
                "cvta.to.shared.u64 {o}, {p};",
                o = out(reg64) out,
                p = in(reg64) p as u64,
                options(pure, nomem, nostack)
            )
        };
        out as u32
    }

    /// `core::arch::asm!` with the 64 accumulators of `$acc` (a `[f32;
    /// 64]` place) as in-out operands `d0` to `d63` besides `$operands`;
    /// `$template`'s literals may name them all with
    /// [`accumulator_list!`].
    macro_rules! asm_with_accumulators {
        ($acc:ident, [$($template:expr),+ $(,)?], $($operands:tt)*) => {
            core::arch::asm!(
                $($template,)+
                d0 = inout(reg32) $acc[0],
                d1 = inout(reg32) $acc[1],
                d2 = inout(reg32) $acc[2],
                d3 = inout(reg32) $acc[3],
                d4 = inout(reg32) $acc[4],
                d5 = inout(reg32) $acc[5],
                d6 = inout(reg32) $acc[6],
                d7 = inout(reg32) $acc[7],
                d8 = inout(reg32) $acc[8],
                d9 = inout(reg32) $acc[9],
                d10 = inout(reg32) $acc[10],
                d11 = inout(reg32) $acc[11],
                d12 = inout(reg32) $acc[12],
                d13 = inout(reg32) $acc[13],
                d14 = inout(reg32) $acc[14],
                d15 = inout(reg32) $acc[15],
                d16 = inout(reg32) $acc[16],
                d17 = inout(reg32) $acc[17],
                d18 = inout(reg32) $acc[18],
                d19 = inout(reg32) $acc[19],
                d20 = inout(reg32) $acc[20],
                d21 = inout(reg32) $acc[21],
                d22 = inout(reg32) $acc[22],
                d23 = inout(reg32) $acc[23],
                d24 = inout(reg32) $acc[24],
                d25 = inout(reg32) $acc[25],
                d26 = inout(reg32) $acc[26],
                d27 = inout(reg32) $acc[27],
                d28 = inout(reg32) $acc[28],
                d29 = inout(reg32) $acc[29],
                d30 = inout(reg32) $acc[30],
                d31 = inout(reg32) $acc[31],
                d32 = inout(reg32) $acc[32],
                d33 = inout(reg32) $acc[33],
                d34 = inout(reg32) $acc[34],
                d35 = inout(reg32) $acc[35],
                d36 = inout(reg32) $acc[36],
                d37 = inout(reg32) $acc[37],
                d38 = inout(reg32) $acc[38],
                d39 = inout(reg32) $acc[39],
                d40 = inout(reg32) $acc[40],
                d41 = inout(reg32) $acc[41],
                d42 = inout(reg32) $acc[42],
                d43 = inout(reg32) $acc[43],
                d44 = inout(reg32) $acc[44],
                d45 = inout(reg32) $acc[45],
                d46 = inout(reg32) $acc[46],
                d47 = inout(reg32) $acc[47],
                d48 = inout(reg32) $acc[48],
                d49 = inout(reg32) $acc[49],
                d50 = inout(reg32) $acc[50],
                d51 = inout(reg32) $acc[51],
                d52 = inout(reg32) $acc[52],
                d53 = inout(reg32) $acc[53],
                d54 = inout(reg32) $acc[54],
                d55 = inout(reg32) $acc[55],
                d56 = inout(reg32) $acc[56],
                d57 = inout(reg32) $acc[57],
                d58 = inout(reg32) $acc[58],
                d59 = inout(reg32) $acc[59],
                d60 = inout(reg32) $acc[60],
                d61 = inout(reg32) $acc[61],
                d62 = inout(reg32) $acc[62],
                d63 = inout(reg32) $acc[63],
                $($operands)*
            )
        };
    }

    /// The accumulator operands of [`asm_with_accumulators!`] in order, as
    /// one template literal.
    macro_rules! accumulator_list {
        () => {
            "{d0}, {d1}, {d2}, {d3}, {d4}, {d5}, {d6}, {d7}, {d8}, {d9}, {d10}, {d11}, {d12}, {d13}, {d14}, {d15}, {d16}, {d17}, {d18}, {d19}, {d20}, {d21}, {d22}, {d23}, {d24}, {d25}, {d26}, {d27}, {d28}, {d29}, {d30}, {d31}, {d32}, {d33}, {d34}, {d35}, {d36}, {d37}, {d38}, {d39}, {d40}, {d41}, {d42}, {d43}, {d44}, {d45}, {d46}, {d47}, {d48}, {d49}, {d50}, {d51}, {d52}, {d53}, {d54}, {d55}, {d56}, {d57}, {d58}, {d59}, {d60}, {d61}, {d62}, {d63}"
        };
    }

    /// `acc (+)= a b` for one warpgroup: the `m64n128k8` product of the
    /// TF32 operands that the shared-memory descriptors `a` (64 rows × 8
    /// columns) and `b` (128 pairs × 8 columns) point at, float32
    /// accumulation, `acc` overwritten when `accumulate` is false. Issued, not
    /// waited for: `acc` holds the product only after [`wgmma_wait`].
    ///
    /// # Safety
    /// Every thread of the warpgroup runs it together, after [`wgmma_fence`],
    /// with the same descriptors of staged operands that no thread writes
    /// until [`wgmma_wait`].
    #[inline(always)]
    unsafe fn wgmma_tf32(acc: &mut [f32; 64], a: u64, b: u64, accumulate: bool) {
        // SAFETY: the caller's (a warpgroup-wide instruction).
        unsafe {
            asm_with_accumulators!(
                acc,
                [
                    "{{ .reg .pred p; setp.ne.u32 p, {scale}, 0;",
                    concat!("wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {{", accumulator_list!(), "}}, {a}, {b}, p, 1, 1; }}"),
                ],
                a = in(reg64) a,
                b = in(reg64) b,
                scale = in(reg32) accumulate as u32,
                options(nostack)
            )
        };
    }

    /// Waits for every warpgroup product this thread issued
    /// (`wgmma.wait_group 0`); `acc` passes through so that nothing reads
    /// it before the products are in.
    ///
    /// # Safety
    /// Every thread of the warpgroup runs it together.
    #[inline(always)]
    unsafe fn wgmma_wait(acc: &mut [f32; 64]) {
        // SAFETY: the caller's (a warpgroup-wide instruction).
        unsafe {
            asm_with_accumulators!(
                acc,
                [concat!("wgmma.wait_group.sync.aligned 0; // ", accumulator_list!())],
                options(nostack)
            )
        };
    }

    /// The warpgroup half-step (see `OtWgmmaScalingF32Args`): a block of
    /// one warpgroup owns 64 rows × 128 pairs; per chunk of 32 columns,
    /// four `k8` steps of three products (`small big`, `big small`, `big
    /// big`) into the chunk's sums, which float32 additions (to nearest)
    /// then carry (the tensor cores' own accumulation rounds towards zero).
    /// With one split the block updates its outputs and their planes
    /// itself; with more, each writes its partial sums and
    /// `ot_finish_wide_scaling_f32` updates.
    ///
    /// # Safety
    /// As the kernel's.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn wgmma_scaling(
        op: *const u32,
        n: u64,
        d: u64,
        x_in: *const u32,
        splits: u64,
        partial: *mut f32,
        marginal: *const f32,
        x_out: *mut f32,
        err: *mut f32,
        x_out_planes: *mut u32,
    ) {
        let chunks = d.div_ceil(CHUNK as u64);
        let (row_tile, pair_tile, split) =
            tile_of_block(block_idx_x() as u64, d.div_ceil(ROWS as u64), n.div_ceil(PAIRS as u64));
        let (first, end) = chunks_of_split(split, splits, chunks);
        let (i0, q0) = (row_tile * ROWS as u64, pair_tile * PAIRS as u64);
        let tid = thread_idx_x() as usize;
        let shared = dynamic_shared::<u32>();
        let base = shared_address(shared);
        // SAFETY: the planes hold every chunk of this block's row and pair
        // tiles (`planes_len`).
        let (rows_from, pairs_from) = unsafe {
            (
                op.add(planes_offset(row_tile, 0, chunks, PLANES_WGMMA_ROWS) as usize),
                x_in.add(planes_offset(pair_tile, 0, chunks, PLANES_WGMMA_PAIRS) as usize),
            )
        };
        // Starts copying chunk `chunk` (of the tiles) into stage `stage`:
        // the rows' two planes, then the vectors' two, 16 bytes per thread
        // at a time, consecutive threads consecutive pieces.
        let stage_copy = |chunk: u64, stage: usize| {
            let (rows_at, pairs_at) = (chunk as usize * 2 * ROW_PLANE, chunk as usize * 2 * PAIR_PLANE);
            // SAFETY: the stage's planes lie in the launch's shared memory,
            // the chunk's in the operands (above); every piece is 16 bytes
            // from a 16-byte aligned start.
            unsafe {
                let to = shared.add(stage * STAGE);
                for k in 0..ROW_COPIES {
                    let at = (k * THREADS + tid) * 4;
                    copy_async_16(to.add(at), rows_from.add(rows_at + at));
                }
                for k in 0..PAIR_COPIES {
                    let at = (k * THREADS + tid) * 4;
                    copy_async_16(to.add(2 * ROW_PLANE + at), pairs_from.add(pairs_at + at));
                }
            }
        };
        let mut acc = [0.0f32; OUTPUTS];
        if first < end {
            stage_copy(first, 0);
        }
        // SAFETY: a commit.
        unsafe { commit_copies() };
        for chunk in first..end {
            let stage = (chunk - first) as usize % STAGES;
            // This thread's copies of the chunk are in; the fence hands them
            // to the tensor cores' (asynchronous) proxy; the barrier waits
            // for every thread's, and for every thread to be done with the
            // other stage (its products were waited for), which the next
            // chunk's copies then fill.
            // SAFETY: every thread reaches them in the same iteration.
            unsafe {
                wait_copies::<0>();
                fence_shared_for_async();
                sync_threads();
            }
            if chunk + 1 < end {
                stage_copy(chunk + 1, (stage + 1) % STAGES);
            }
            // SAFETY: a commit.
            unsafe { commit_copies() };
            let at = base + (stage * STAGE * 4) as u32;
            let (rows_big, rows_small) = (at, at + (ROW_PLANE * 4) as u32);
            let (pairs_big, pairs_small) =
                (at + (2 * ROW_PLANE * 4) as u32, at + ((2 * ROW_PLANE + PAIR_PLANE) * 4) as u32);
            let mut part = [0.0f32; OUTPUTS];
            // SAFETY: the stage is complete (the barrier above) and no
            // thread writes it until every thread has waited for the
            // products below; every thread of the warpgroup issues the same
            // products.
            unsafe {
                wgmma_fence();
                for step in 0..CHUNK / 8 {
                    // Step `step` starts at core-matrix column 2 step.
                    let k = (step * 2 * 128) as u32;
                    let (a_big, a_small) = (wgmma_descriptor(rows_big + k), wgmma_descriptor(rows_small + k));
                    let (b_big, b_small) = (wgmma_descriptor(pairs_big + k), wgmma_descriptor(pairs_small + k));
                    wgmma_tf32(&mut part, a_small, b_big, step > 0);
                    wgmma_tf32(&mut part, a_big, b_small, true);
                    wgmma_tf32(&mut part, a_big, b_big, true);
                }
                wgmma_commit();
                wgmma_wait(&mut part);
            }
            unrolled!(k in [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63] => {
                acc[k] += part[k];
            });
        }
        // Output `k` of this thread, by the accumulators' layout: warp `w`
        // holds rows 16 w to 16 w + 15, lane `l` rows `l / 4` and `l / 4 +
        // 8` of them and pairs `2 (l % 4)` and `2 (l % 4) + 1` of each
        // 8-pair column block, four values per block in the order (row,
        // pair), (row, pair + 1), (row + 8, pair), (row + 8, pair + 1).
        let (warp, lane) = (tid / 32, tid % 32);
        let row = |k: usize| i0 + (16 * warp + lane / 4 + 8 * (k % 4 / 2)) as u64;
        let pair = |k: usize| q0 + (8 * (k / 4) + 2 * (lane % 4) + k % 2) as u64;
        if splits > 1 {
            unrolled!(k in [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63] => {
                let (i, q) = (row(k), pair(k));
                if i < d && q < n {
                    // SAFETY: split < splits, q < n, i < d: `partial` holds
                    // splits * n * d values.
                    unsafe { *partial.add(((split * n + q) * d + i) as usize) = acc[k] };
                }
            });
            return;
        }
        unrolled!(k in [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63] => {
            let (i, q) = (row(k), pair(k));
            if i < d && q < n {
                let at = (q * d + i) as usize;
                // SAFETY: inside the n * d vectors (and `err`, when not
                // null) and their planes.
                unsafe {
                    let wanted = *marginal.add(at);
                    if !err.is_null() {
                        *err.add(at) = scaling_error(*x_out.add(at), acc[k], wanted);
                    }
                    let value = new_scaling(wanted, acc[k]);
                    *x_out.add(at) = value;
                    put_planes(x_out_planes, q, i, d, value, PLANES_WGMMA_PAIRS);
                }
            }
        });
    }
}

kernel! {
    /// The float32 scaling-domain half-step `x_out = marginal / (op x_in)`
    /// on the warpgroup products (sm_90a), both operands read as their
    /// TF32 planes; with one split the kernel updates `x_out` and its
    /// planes, with more it writes each split's partial sums for
    /// `ot_finish_wide_scaling_f32`. Built for any other target the kernel
    /// traps: the host launches it only from the sm_90a module.
    ///
    /// # Safety
    /// `op` holds `planes_len(d, d, PLANES_WGMMA_ROWS)` values, `x_in` and
    /// `x_out_planes` `planes_len(n, d, PLANES_WGMMA_PAIRS)`, every plane
    /// value outside the matrix or the vectors zero in `op` and `x_in`;
    /// `marginal` and `x_out` `n * d`, `err` `n * d` or is null, `partial`
    /// `splits * n * d` (written only with more than one split); `1 <=
    /// splits <= ceil(d / TRANSPORT_WGMMA_CHUNK)`; launched with
    /// `TRANSPORT_WGMMA_THREADS` threads, `TRANSPORT_WGMMA_SHARED_BYTES` of
    /// shared memory, and one block per (row tile of
    /// `TRANSPORT_WGMMA_ROWS`, pair tile of `TRANSPORT_WGMMA_PAIRS`,
    /// split), on a device of compute capability 9.0 from the module built
    /// for sm_90a.
    ///
    /// # Parameters
    /// - `op`: the Gibbs kernel's (or its transpose's) planes; `n`, `d`: pairs and bins;
    /// - `x_in`: the other side's scalings' planes; `splits`, `partial`: the partial sums;
    /// - `marginal`: this side's histograms; `x_out`: its scalings (read, then written);
    /// - `err`: errors or null; `x_out_planes`: the new scalings' planes.
    ///
    /// # Thread mapping
    /// A block (one warpgroup of 128 threads) per (64 rows, 128 pairs,
    /// split) (`tile_of_block`); thread `t` (warp `w = t / 32`, lane `l`)
    /// owns the 64 outputs of the `m64n128` accumulator layout: rows `16 w
    /// + l / 4` and `16 w + l / 4 + 8`, pairs `8 b + 2 (l % 4)` and `8 b +
    /// 2 (l % 4) + 1` for each of the 16 pair blocks `b`; every thread
    /// copies 16-byte pieces `k 128 + t` of each staged chunk.
    pub unsafe extern "ptx-kernel" fn ot_wgmma_scaling_f32(
        op: *const u32,
        n: u64,
        d: u64,
        x_in: *const u32,
        splits: u64,
        partial: *mut f32,
        marginal: *const f32,
        x_out: *mut f32,
        err: *mut f32,
        x_out_planes: *mut u32,
    ) as OtWgmmaScalingF32Args {
        #[cfg(target_feature = "sm_90a")]
        // SAFETY: the kernel's contract.
        unsafe {
            hopper::wgmma_scaling(op, n, d, x_in, splits, partial, marginal, x_out, err, x_out_planes)
        }
        #[cfg(not(target_feature = "sm_90a"))]
        {
            let _ = (op, n, d, x_in, splits, partial, marginal, x_out, err, x_out_planes);
            crate::device::trap()
        }
    }
}
