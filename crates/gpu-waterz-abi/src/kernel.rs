//! The kernels, named by an enum, and the trait that ties each kernel's
//! `#[repr(C)]` argument struct to its name.
//!
//! Every kernel of `kernels-rs` takes exactly one argument, a struct defined
//! in this crate (`SumU32Args`, `WsMaskF32Args`, ...), passed by value. The
//! host launches a kernel by handing that struct to the runtime, which finds
//! the kernel through [`KernelArgs::KERNEL`]: the argument list's order and
//! types are checked by the compiler on both sides, and no kernel is named by
//! a string outside this file.

/// Defines [`Kernel`] from `Variant => "ptx_name"` pairs.
macro_rules! kernels {
    ($($variant:ident => $name:literal,)*) => {
        /// Every kernel of `kernels-rs`, by the name of its PTX entry point.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u32)]
        #[non_exhaustive]
        pub enum Kernel {
            $(
                #[doc = concat!("The kernel `", $name, "`.")]
                $variant,
            )*
        }

        impl Kernel {
            /// Every kernel, in the order of their indices.
            pub const ALL: &'static [Kernel] = &[$(Kernel::$variant),*];

            /// The PTX entry point's name.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Kernel::$variant => $name,)*
                }
            }

            /// A dense index, `0..Kernel::ALL.len()`, for tables of loaded functions.
            pub const fn index(self) -> usize {
                self as usize
            }
        }
    };
}

kernels! {
    SumU32 => "sum_u32",
    IotaU32 => "iota_u32",
    PackU32Pairs => "pack_u32_pairs",
    CountU32Pairs => "count_u32_pairs",
    NarrowU64ToU32 => "narrow_u64_to_u32",
    OtPrepareF32 => "ot_prepare_f32",
    OtPrepareF64 => "ot_prepare_f64",
    OtCheckF32 => "ot_check_f32",
    OtCheckF64 => "ot_check_f64",
    OtPairStatsF32 => "ot_pair_stats_f32",
    OtPairStatsF64 => "ot_pair_stats_f64",
    OtFillF32 => "ot_fill_f32",
    OtFillF64 => "ot_fill_f64",
    OtPotentialsF32 => "ot_potentials_f32",
    OtPotentialsF64 => "ot_potentials_f64",
    OtTileScalingF32 => "ot_tile_scaling_f32",
    OtTileScalingF64 => "ot_tile_scaling_f64",
    OtWideScalingF32 => "ot_wide_scaling_f32",
    OtWgmmaScalingF32 => "ot_wgmma_scaling_f32",
    OtFinishWideScalingF32 => "ot_finish_wide_scaling_f32",
    OtSplitPlanesF32 => "ot_split_planes_f32",
    OtPersistentScalingF32 => "ot_persistent_scaling_f32",
    OtPersistentScalingF64 => "ot_persistent_scaling_f64",
    OtResidentScalingF32 => "ot_resident_scaling_f32",
    OtResidentScalingF64 => "ot_resident_scaling_f64",
    OtTileLogF32 => "ot_tile_log_f32",
    OtTileLogF64 => "ot_tile_log_f64",
    OtTileCostF32 => "ot_tile_cost_f32",
    OtTileCostF64 => "ot_tile_cost_f64",
    OtFinishScalingF32 => "ot_finish_scaling_f32",
    OtFinishScalingF64 => "ot_finish_scaling_f64",
    OtFinishLogF32 => "ot_finish_log_f32",
    OtFinishLogF64 => "ot_finish_log_f64",
    OtFinishSumF32 => "ot_finish_sum_f32",
    OtFinishSumF64 => "ot_finish_sum_f64",
    OtRowsScalingF32 => "ot_rows_scaling_f32",
    OtRowsScalingF64 => "ot_rows_scaling_f64",
    OtRowsLogF32 => "ot_rows_log_f32",
    OtRowsLogF64 => "ot_rows_log_f64",
    ScanTileSums => "scan_tile_sums",
    ScanTiles => "scan_tiles",
    ScanChunksU64 => "scan_chunks_u64",
    AddTileOffsetsU64 => "add_tile_offsets_u64",
    CountSetFlags => "count_set_flags",
    CompactTiles => "compact_tiles",
    RadixHistogram => "radix_histogram",
    RadixScatter => "radix_scatter",
    RunHeads => "run_heads",
    CountValueRunsU32 => "count_value_runs_u32",
    EmitValueRunsU32 => "emit_value_runs_u32",
    ExpandRunsU32 => "expand_runs_u32",
    ReduceRuns => "reduce_runs",
    WsMaskF32 => "ws_mask_f32",
    WsMaskU8 => "ws_mask_u8",
    WsCheckF32 => "ws_check_f32",
    WsCornerCount => "ws_corner_count",
    WsCornerCompact => "ws_corner_compact",
    WsBfsInit => "ws_bfs_init",
    WsBfsPropose => "ws_bfs_propose",
    WsBfsClaim => "ws_bfs_claim",
    WsBfsEmit => "ws_bfs_emit",
    WsPlateauDirection => "ws_plateau_direction",
    UfTileLocal => "uf_tile_local",
    UfTileFaces => "uf_tile_faces",
    WsFragmentCount => "ws_fragment_count",
    WsFragmentNumber => "ws_fragment_number",
    WsLabels => "ws_labels",
    WsBlockPlateauInfo => "ws_block_plateau_info",
    WsBlockOpenRoots => "ws_block_open_roots",
    WsBlockDirections => "ws_block_directions",
    WsBlockInsideEdges => "ws_block_inside_edges",
    RgTileEntries => "rg_tile_entries",
    ReduceRunsPacked => "reduce_runs_packed",
    PhResetEndpoints => "ph_reset_endpoints",
    PhBestScore => "ph_best_score",
    PhBestKey => "ph_best_key",
    PhMatchMutual => "ph_match_mutual",
    PhBestMean => "ph_best_mean",
    PhEligible => "ph_eligible",
    PhPreferredKey => "ph_preferred_key",
    PhMatchPreferred => "ph_match_preferred",
    PhHistory => "ph_history",
    PhRelabelInsert => "ph_relabel_insert",
    PhMatchContract => "ph_match_contract",
    PhResolve => "ph_resolve",
    PhClearTable => "ph_clear_table",
    PhClassify => "ph_classify",
    PhGatherEdges => "ph_gather_edges",
    PhLiveFlags => "ph_live_flags",
    PhFindRoots => "ph_find_roots",
    PhSegment => "ph_segment",
    PhSegmentU64 => "ph_segment_u64",
    PhMarkEndpoints => "ph_mark_endpoints",
    PhScatterIds => "ph_scatter_ids",
    PhTranslateKeys => "ph_translate_keys",
    PhCommit => "ph_commit",
    GreyRelax => "grey_relax",
    GreyPrepare => "grey_prepare",
    GreyDistanceInit => "grey_distance_init",
    GreyDescend => "grey_descend",
    GreyMinimumRoots => "grey_minimum_roots",
    GreyMinimumNumber => "grey_minimum_number",
    GreyLines => "grey_lines",
    EdtRows => "edt_rows",
    EdtPass => "edt_pass",
    EdtLines => "edt_lines",
    EdtIndices => "edt_indices",
    EdtEnvelope => "edt_envelope",
    EdtChamfer => "edt_chamfer",
    GreyFilterF32 => "grey_filter_f32",
    GreyFilterF64 => "grey_filter_f64",
    GreyLineF32 => "grey_line_f32",
    GreyLineF64 => "grey_line_f64",
    BinaryFilter => "binary_filter",
    GreyTileF32 => "grey_tile_f32",
    GreyTileF64 => "grey_tile_f64",
    BinaryTile => "binary_tile",
    BinaryBits => "binary_bits",
    GreyBoxF32 => "grey_box_f32",
    GreyBoxF64 => "grey_box_f64",
    GreyPlusF32 => "grey_plus_f32",
    GreyPlusF64 => "grey_plus_f64",
    GreyWarpMinF32 => "grey_warp_min_f32",
    GreyWarpMaxF32 => "grey_warp_max_f32",
    GreyWarpMinF64 => "grey_warp_min_f64",
    GreyWarpMaxF64 => "grey_warp_max_f64",
    GreyWarpPlusMinF32 => "grey_warp_plus_min_f32",
    GreyWarpPlusMaxF32 => "grey_warp_plus_max_f32",
    GreyWarpFixedMinF32 => "grey_warp_fixed_min_f32",
    GreyWarpFixedMaxF32 => "grey_warp_fixed_max_f32",
    GreyWarpFixedMinF64 => "grey_warp_fixed_min_f64",
    GreyWarpFixedMaxF64 => "grey_warp_fixed_max_f64",
    GreyWarpFixedPlusMinF32 => "grey_warp_fixed_plus_min_f32",
    GreyWarpFixedPlusMaxF32 => "grey_warp_fixed_plus_max_f32",
    GreyFilterU8 => "grey_filter_u8",
    GreyLineU8 => "grey_line_u8",
    GreyTileU8 => "grey_tile_u8",
    GreyBoxU8 => "grey_box_u8",
    GreyPlusU8 => "grey_plus_u8",
    GreyWarpMinU8 => "grey_warp_min_u8",
    GreyWarpMaxU8 => "grey_warp_max_u8",
    GreyWarpPlusMinU8 => "grey_warp_plus_min_u8",
    GreyWarpPlusMaxU8 => "grey_warp_plus_max_u8",
    GreyWarpFixedMinU8 => "grey_warp_fixed_min_u8",
    GreyWarpFixedMaxU8 => "grey_warp_fixed_max_u8",
    GreyWarpFixedPlusMinU8 => "grey_warp_fixed_plus_min_u8",
    GreyWarpFixedPlusMaxU8 => "grey_warp_fixed_plus_max_u8",
    GreyWarpWideMinF32 => "grey_warp_wide_min_f32",
    GreyWarpWideMaxF32 => "grey_warp_wide_max_f32",
    GreyWarpWideMinU8 => "grey_warp_wide_min_u8",
    GreyWarpWideMaxU8 => "grey_warp_wide_max_u8",
    FillHolesEdges => "fill_holes_edges",
    FillHolesReach => "fill_holes_reach",
    FillHolesOutput => "fill_holes_output",
    GenImplicitLabels => "gen_implicit_labels",
    GenBoundary => "gen_boundary",
    GenDilate => "gen_dilate",
    GenInside => "gen_inside",
    GenBoxBlur => "gen_box_blur",
    GenAddNoise => "gen_add_noise",
    GenNoiseLattice => "gen_noise_lattice",
    GenAffinities => "gen_affinities",
    LabelFrameBlocks => "label_frame_blocks",
    GatherFrameBlocks => "gather_frame_blocks",
    GatherRowsF32 => "gather_rows_f32",
}

/// The most parameters a kernel takes.
pub const MAX_PARAMS: usize = 16;

/// A kernel's argument struct: `#[repr(C)]`, `Copy`, made of integers,
/// floats, raw device pointers and other such structs, one field per
/// parameter of the kernel, in the kernel's parameter order.
///
/// The kernel declares the fields as separate parameters (so that the
/// compiler knows its pointers address global memory and emits
/// `ld.global`/`st.global` for them, which it cannot for pointers inside a
/// by-value struct), and checks at compile time, with
/// [`kernel_params!`](crate::kernel_params), that its parameters are the
/// struct's fields with the same names, types and order. The host fills
/// the struct and the runtime passes each field, in order
/// ([`KernelArgs::param_pointers`]).
pub trait KernelArgs: Copy + 'static {
    /// The kernel that takes these arguments.
    const KERNEL: Kernel;

    /// Writes the address of each field, in declaration order, to `out`;
    /// returns how many there are. The addresses point into `self`.
    fn param_pointers(&mut self, out: &mut [*mut core::ffi::c_void; MAX_PARAMS]) -> usize;

    /// Writes the size of each field, in declaration order, to `out`;
    /// returns how many there are (for tests against the PTX).
    fn param_sizes(out: &mut [usize; MAX_PARAMS]) -> usize;
}

/// The size of the field that `field` projects to.
#[doc(hidden)]
pub fn field_size<T, F>(_field: fn(&T) -> &F) -> usize {
    core::mem::size_of::<F>()
}

/// Whether `offsets` increase strictly: the fields listed are in their
/// declaration order (in a `#[repr(C)]` struct, offsets follow it).
pub const fn fields_in_order(offsets: &[usize]) -> bool {
    let mut i = 1;
    while i < offsets.len() {
        if offsets[i] <= offsets[i - 1] {
            return false;
        }
        i += 1;
    }
    true
}

/// Implements [`KernelArgs`] for argument structs, listing each struct's
/// fields in order: `impl_kernel_args!(Args => Variant { field, ... }, ...)`.
/// A missing or misordered field is a compile-time error.
#[macro_export]
macro_rules! impl_kernel_args {
    ($($args:ident => $variant:ident { $($field:ident),* $(,)? }),* $(,)?) => {
        $(
            impl $crate::kernel::KernelArgs for $args {
                const KERNEL: $crate::kernel::Kernel = $crate::kernel::Kernel::$variant;

                fn param_pointers(
                    &mut self,
                    out: &mut [*mut core::ffi::c_void; $crate::kernel::MAX_PARAMS],
                ) -> usize {
                    // Every field, and no other (a pattern without `..`).
                    let $args { $($field),* } = self;
                    let fields = [$($field as *mut _ as *mut core::ffi::c_void),*];
                    out[..fields.len()].copy_from_slice(&fields);
                    fields.len()
                }

                fn param_sizes(out: &mut [usize; $crate::kernel::MAX_PARAMS]) -> usize {
                    let sizes = [$($crate::kernel::field_size(|a: &$args| &a.$field)),*];
                    out[..sizes.len()].copy_from_slice(&sizes);
                    sizes.len()
                }
            }
            const _: () = assert!(
                $crate::kernel::fields_in_order(&[$(core::mem::offset_of!($args, $field)),*]),
                concat!(stringify!($args), ": list the fields in declaration order"),
            );
        )*
    };
}

/// In a kernel: checks at compile time that its parameters are the fields
/// of its argument struct, with the same names and types
/// (`kernel_params!(Args { field, ... })` builds the struct from them) and
/// in the same order (the fields' offsets increase). The struct built is
/// discarded; the optimizer removes it.
#[macro_export]
macro_rules! kernel_params {
    ($args:ident { $($field:ident),* $(,)? }) => {
        let _ = $args { $($field),* };
        const _: () = assert!(
            $crate::kernel::fields_in_order(&[$(core::mem::offset_of!($args, $field)),*]),
            concat!(stringify!($args), ": the kernel's parameters are not in the struct's order"),
        );
    };
}

#[cfg(test)]
mod tests {
    use super::Kernel;

    #[test]
    fn names_are_unique_and_indices_dense() {
        for (i, k) in Kernel::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
            for other in &Kernel::ALL[..i] {
                assert_ne!(k.name(), other.name());
            }
        }
    }
}
