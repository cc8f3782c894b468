//! The kernel ABI against the committed PTX, without a GPU: the `Kernel`
//! enum names exactly the PTX's entry points, and each kernel declares one
//! parameter per field of its argument struct, of the field's size, in the
//! struct's order (names and types are checked when the kernels compile, by
//! `gpu_waterz_abi::kernel_params!`).

use gpu_waterz_abi::distance::*;
use gpu_waterz_abi::frames::*;
use gpu_waterz_abi::generate::*;
use gpu_waterz_abi::graph::*;
use gpu_waterz_abi::greyscale::*;
use gpu_waterz_abi::kernel::MAX_PARAMS;
use gpu_waterz_abi::morphology::*;
use gpu_waterz_abi::parhac::*;
use gpu_waterz_abi::primitives::*;
use gpu_waterz_abi::transport::*;
use gpu_waterz_abi::watershed::*;
use gpu_waterz_abi::{Kernel, KernelArgs, SumU32Args};
use gpu_waterz_runtime::KERNELS_PTX;

/// The parameter declarations of entry point `name`.
fn entry_params(name: &str) -> Vec<String> {
    let start = format!(".entry {name}(");
    let at = KERNELS_PTX.find(&start).unwrap_or_else(|| panic!("no entry point {name} in the PTX"));
    let rest = &KERNELS_PTX[at + start.len()..];
    let end = rest.find(')').expect("the parameter list ends");
    rest[..end].split(',').map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect()
}

/// The bytes a PTX parameter declaration takes: `.param .u64 ...` 8,
/// `.param .u32 ...` 4, `.param .align 8 .b8 name[N]` N.
fn param_bytes(declaration: &str) -> usize {
    if let Some(open) = declaration.rfind('[') {
        return declaration[open + 1..declaration.len() - 1].parse().unwrap();
    }
    let width = declaration.split_whitespace().nth(1).unwrap();
    match &width[2..] {
        "64" => 8,
        "32" => 4,
        "16" => 2,
        "8" => 1,
        other => panic!("unexpected parameter width {other} in {declaration}"),
    }
}

fn check<A: KernelArgs>(checked: &mut Vec<Kernel>) {
    let name = A::KERNEL.name();
    let mut sizes = [0; MAX_PARAMS];
    let n = A::param_sizes(&mut sizes);
    let declared: Vec<usize> = entry_params(name).iter().map(|p| param_bytes(p)).collect();
    assert_eq!(declared, sizes[..n], "{name}: one parameter per field, of its size, in order");
    checked.push(A::KERNEL);
}

#[test]
fn the_kernel_enum_names_exactly_the_entry_points_of_the_ptx() {
    let entries: Vec<&str> = KERNELS_PTX
        .lines()
        .filter_map(|l| l.trim().strip_prefix(".visible .entry "))
        .map(|l| l.split('(').next().unwrap())
        .collect();
    for kernel in Kernel::ALL {
        assert!(entries.contains(&kernel.name()), "{} is not in the PTX", kernel.name());
    }
    for entry in &entries {
        assert!(Kernel::ALL.iter().any(|k| k.name() == *entry), "the PTX entry {entry} is not in the Kernel enum");
    }
}

#[test]
fn every_kernel_declares_its_structs_fields_as_parameters() {
    let mut checked = Vec::new();
    let c = &mut checked;
    check::<SumU32Args>(c);
    check::<IotaU32Args>(c);
    check::<PackU32PairsArgs>(c);
    check::<CountU32PairsArgs>(c);
    check::<NarrowU64ToU32Args>(c);
    check::<OtPrepareF32Args>(c);
    check::<OtPrepareF64Args>(c);
    check::<OtCheckF32Args>(c);
    check::<OtCheckF64Args>(c);
    check::<OtPairStatsF32Args>(c);
    check::<OtPairStatsF64Args>(c);
    check::<OtFillF32Args>(c);
    check::<OtFillF64Args>(c);
    check::<OtPotentialsF32Args>(c);
    check::<OtPotentialsF64Args>(c);
    check::<OtTileScalingF32Args>(c);
    check::<OtTileScalingF64Args>(c);
    check::<OtTileLogF32Args>(c);
    check::<OtTileLogF64Args>(c);
    check::<OtTileCostF32Args>(c);
    check::<OtTileCostF64Args>(c);
    check::<OtFinishScalingF32Args>(c);
    check::<OtFinishScalingF64Args>(c);
    check::<OtFinishLogF32Args>(c);
    check::<OtFinishLogF64Args>(c);
    check::<OtFinishSumF32Args>(c);
    check::<OtFinishSumF64Args>(c);
    check::<OtRowsScalingF32Args>(c);
    check::<OtRowsScalingF64Args>(c);
    check::<OtRowsLogF32Args>(c);
    check::<OtRowsLogF64Args>(c);
    check::<ScanTileSumsArgs>(c);
    check::<ScanTilesArgs>(c);
    check::<ScanChunksU64Args>(c);
    check::<AddTileOffsetsU64Args>(c);
    check::<CountSetFlagsArgs>(c);
    check::<CompactTilesArgs>(c);
    check::<RadixHistogramArgs>(c);
    check::<RadixScatterArgs>(c);
    check::<RunHeadsArgs>(c);
    check::<CountValueRunsU32Args>(c);
    check::<EmitValueRunsU32Args>(c);
    check::<ExpandRunsU32Args>(c);
    check::<ReduceRunsArgs>(c);
    check::<ReduceRunsPackedArgs>(c);
    check::<WsMaskF32Args>(c);
    check::<WsMaskU8Args>(c);
    check::<WsCheckF32Args>(c);
    check::<WsCornerCountArgs>(c);
    check::<WsCornerCompactArgs>(c);
    check::<WsBfsInitArgs>(c);
    check::<WsBfsProposeArgs>(c);
    check::<WsBfsClaimArgs>(c);
    check::<WsBfsEmitArgs>(c);
    check::<WsPlateauDirectionArgs>(c);
    check::<UfTileLocalArgs>(c);
    check::<UfTileFacesArgs>(c);
    check::<WsFragmentCountArgs>(c);
    check::<WsFragmentNumberArgs>(c);
    check::<WsLabelsArgs>(c);
    check::<WsBlockPlateauInfoArgs>(c);
    check::<WsBlockOpenRootsArgs>(c);
    check::<WsBlockDirectionsArgs>(c);
    check::<WsBlockInsideEdgesArgs>(c);
    check::<RgTileEntriesArgs>(c);
    check::<PhResetEndpointsArgs>(c);
    check::<PhBestScoreArgs>(c);
    check::<PhBestKeyArgs>(c);
    check::<PhMatchMutualArgs>(c);
    check::<PhBestMeanArgs>(c);
    check::<PhEligibleArgs>(c);
    check::<PhPreferredKeyArgs>(c);
    check::<PhMatchPreferredArgs>(c);
    check::<PhHistoryArgs>(c);
    check::<PhRelabelInsertArgs>(c);
    check::<PhMatchContractArgs>(c);
    check::<PhResolveArgs>(c);
    check::<PhClearTableArgs>(c);
    check::<PhClassifyArgs>(c);
    check::<PhGatherEdgesArgs>(c);
    check::<PhLiveFlagsArgs>(c);
    check::<PhFindRootsArgs>(c);
    check::<PhSegmentArgs>(c);
    check::<PhSegmentU64Args>(c);
    check::<PhMarkEndpointsArgs>(c);
    check::<PhScatterIdsArgs>(c);
    check::<PhTranslateKeysArgs>(c);
    check::<PhCommitArgs>(c);
    check::<GreyRelaxArgs>(c);
    check::<GreyPrepareArgs>(c);
    check::<GreyDistanceInitArgs>(c);
    check::<GreyDescendArgs>(c);
    check::<GreyMinimumRootsArgs>(c);
    check::<GreyMinimumNumberArgs>(c);
    check::<GreyLinesArgs>(c);
    check::<EdtRowsArgs>(c);
    check::<EdtPassArgs>(c);
    check::<EdtLinesArgs>(c);
    check::<EdtIndicesArgs>(c);
    check::<EdtEnvelopeArgs>(c);
    check::<EdtChamferArgs>(c);
    check::<GreyFilterF32Args>(c);
    check::<GreyFilterF64Args>(c);
    check::<GreyLineF32Args>(c);
    check::<GreyLineF64Args>(c);
    check::<BinaryFilterArgs>(c);
    check::<GreyTileF32Args>(c);
    check::<GreyTileF64Args>(c);
    check::<BinaryTileArgs>(c);
    check::<BinaryBitsArgs>(c);
    check::<GreyBoxF32Args>(c);
    check::<GreyBoxF64Args>(c);
    check::<GreyPlusF32Args>(c);
    check::<GreyPlusF64Args>(c);
    check::<GreyWarpMinF32Args>(c);
    check::<GreyWarpMaxF32Args>(c);
    check::<GreyWarpMinF64Args>(c);
    check::<GreyWarpMaxF64Args>(c);
    check::<GreyWarpPlusMinF32Args>(c);
    check::<GreyWarpPlusMaxF32Args>(c);
    check::<GreyWarpFixedMinF32Args>(c);
    check::<GreyWarpFixedMaxF32Args>(c);
    check::<GreyWarpFixedMinF64Args>(c);
    check::<GreyWarpFixedMaxF64Args>(c);
    check::<GreyWarpFixedPlusMinF32Args>(c);
    check::<GreyWarpFixedPlusMaxF32Args>(c);
    check::<GreyFilterU8Args>(c);
    check::<GreyLineU8Args>(c);
    check::<GreyTileU8Args>(c);
    check::<GreyBoxU8Args>(c);
    check::<GreyPlusU8Args>(c);
    check::<GreyWarpMinU8Args>(c);
    check::<GreyWarpMaxU8Args>(c);
    check::<GreyWarpPlusMinU8Args>(c);
    check::<GreyWarpPlusMaxU8Args>(c);
    check::<GreyWarpFixedMinU8Args>(c);
    check::<GreyWarpFixedMaxU8Args>(c);
    check::<GreyWarpWideMinF32Args>(c);
    check::<GreyWarpWideMaxF32Args>(c);
    check::<GreyWarpWideMinU8Args>(c);
    check::<GreyWarpWideMaxU8Args>(c);
    check::<GreyWarpFixedPlusMinU8Args>(c);
    check::<GreyWarpFixedPlusMaxU8Args>(c);
    check::<FillHolesEdgesArgs>(c);
    check::<FillHolesReachArgs>(c);
    check::<FillHolesOutputArgs>(c);
    check::<OtWideScalingF32Args>(c);
    check::<OtWgmmaScalingF32Args>(c);
    check::<OtFinishWideScalingF32Args>(c);
    check::<OtSplitPlanesF32Args>(c);
    check::<OtPersistentScalingF32Args>(c);
    check::<OtPersistentScalingF64Args>(c);
    check::<OtResidentScalingF32Args>(c);
    check::<OtResidentScalingF64Args>(c);
    check::<GenImplicitLabelsArgs>(c);
    check::<GenBoundaryArgs>(c);
    check::<GenDilateArgs>(c);
    check::<GenInsideArgs>(c);
    check::<GenBoxBlurArgs>(c);
    check::<GenAddNoiseArgs>(c);
    check::<GenNoiseLatticeArgs>(c);
    check::<GenAffinitiesArgs>(c);
    check::<LabelFrameBlocksArgs>(c);
    check::<GatherFrameBlocksArgs>(c);
    check::<GatherRowsF32Args>(c);
    for kernel in Kernel::ALL {
        assert_eq!(checked.iter().filter(|k| *k == kernel).count(), 1, "{} checked once", kernel.name());
    }
}
