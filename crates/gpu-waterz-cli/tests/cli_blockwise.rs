//! `gpu-waterz blockwise` against `gpu-waterz segment` on the same volume:
//! the same fragments and segmentations, from generated blocks and from a
//! zarr array read by regions; bad settings are errors that leave nothing.

use gpu_waterz_cli::io::{read_npy, read_zarr, Volume};
use ndarray::ArrayD;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

/// The CLI under test: `GPU_WATERZ_BIN` (set by the GPU test bundle), else
/// the one cargo built.
fn cli() -> PathBuf {
    std::env::var_os("GPU_WATERZ_BIN").map(PathBuf::from).unwrap_or_else(|| env!("CARGO_BIN_EXE_gpu-waterz").into())
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpu-waterz-blockwise-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(args: &[&str]) -> (bool, String) {
    let output = Command::new(cli()).args(args).output().unwrap();
    (output.status.success(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// `gpu-waterz blockwise` of `source` in blocks of `block` into `out`, at
/// the thresholds 0.2 and 0.5.
/// `blockwise` of `source` in blocks of `block` into `out`, with the
/// fragments, at the thresholds of [`segment`].
fn blockwise(source: &[&str], block: &str, out: &Path) -> (bool, String) {
    let rest = ["--block", block, "--thresholds", "0.2,0.5", "--write-fragments", "--out", out.to_str().unwrap()];
    run(&[&["blockwise"], source, &rest[..]].concat())
}

fn labels(root: &Path, array: &str) -> ArrayD<u64> {
    read_zarr(root, array).unwrap().into_labels(array).unwrap()
}

/// The generated volume decoded whole by `segment` (CPU) into `seg.zarr`.
fn whole(dir: &Path) -> PathBuf {
    let (affs, truth, seg) = (dir.join("affs.npy"), dir.join("truth.npy"), dir.join("seg.zarr"));
    let (ok, err) = run(&[
        "generate",
        "--implicit",
        "--shape",
        "20,34,30",
        "--cell",
        "12,10,10",
        "--seed",
        "3",
        "--out-affinities",
        affs.to_str().unwrap(),
        "--out-ground-truth",
        truth.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    segment(&affs, &seg);
    seg
}

/// `segment` (CPU, with the fragments, uint64) of `affs` into `out`, at
/// the thresholds of [`blockwise`].
fn segment(affs: &Path, out: &Path) {
    let (affs, out) = (affs.to_str().unwrap(), out.to_str().unwrap());
    let settings = ["--thresholds", "0.2,0.5", "--backend", "cpu", "--write-fragments", "--label-type", "uint64"];
    let (ok, err) = run(&[&["segment", "--affinities", affs], &settings[..], &["--out", out]].concat());
    assert!(ok, "{err}");
}

fn assert_same(blockwise: &Path, whole: &Path) {
    for array in ["/fragments", "/segmentation_0", "/segmentation_1"] {
        assert_eq!(labels(blockwise, array), labels(whole, array), "{array}");
    }
}

#[test]
fn generated_blocks_equal_the_whole_volume() {
    let dir = scratch("implicit");
    let seg = whole(&dir);
    for block in ["7,9,11", "20,34,30", "3,40,5"] {
        let out = dir.join(format!("bw-{}.zarr", block.replace(',', "-")));
        let (ok, err) = blockwise(&["--implicit", "20,34,30", "--cell", "12,10,10", "--seed", "3"], block, &out);
        assert!(ok, "blocks of {block}: {err}");
        assert_same(&out, &seg);
    }
    // Without --write-fragments: the same segmentations, no fragments array.
    let out = dir.join("bw-no-fragments.zarr");
    let (ok, err) = run(&[
        "blockwise",
        "--implicit",
        "20,34,30",
        "--cell",
        "12,10,10",
        "--seed",
        "3",
        "--block",
        "7,9,11",
        "--thresholds",
        "0.2,0.5",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(!out.join("fragments").exists() && out.join("segmentation_1").exists());
    for array in ["/segmentation_0", "/segmentation_1"] {
        assert_eq!(labels(&out, array), labels(&seg, array), "{array}");
    }
    // uint32 where the labels fit (the default), uint64 on request: the
    // same labels.
    let data_type = |root: &Path, array: &str| {
        let metadata: serde_json::Value =
            serde_json::from_slice(&std::fs::read(root.join(array).join("zarr.json")).unwrap()).unwrap();
        metadata["data_type"].as_str().unwrap().to_string()
    };
    let default = dir.join("bw-7-9-11.zarr");
    for array in ["fragments", "segmentation_0", "segmentation_1"] {
        assert_eq!(data_type(&default, array), "uint32", "{array}");
    }
    let wide = dir.join("bw-uint64.zarr");
    let source = ["--implicit", "20,34,30", "--cell", "12,10,10", "--seed", "3", "--label-type", "uint64"];
    let (ok, err) = blockwise(&source, "7,9,11", &wide);
    assert!(ok, "{err}");
    for array in ["fragments", "segmentation_0", "segmentation_1"] {
        assert_eq!(data_type(&wide, array), "uint64", "{array}");
    }
    assert_same(&wide, &seg);
    // Each segmentation encoded from its own runs (`--compact-chunks`)
    // instead of the fragments' chunks relabelled: the same labels, fewer
    // bytes.
    let compact = dir.join("bw-compact.zarr");
    let source = ["--implicit", "20,34,30", "--cell", "12,10,10", "--seed", "3", "--compact-chunks"];
    let (ok, err) = blockwise(&source, "7,9,11", &compact);
    assert!(ok, "{err}");
    assert_same(&compact, &seg);
    let bytes = |root: &Path| -> u64 {
        let chunks = std::fs::read_dir(root.join("segmentation_0").join("c")).unwrap();
        walk_bytes(chunks.map(|e| e.unwrap().path()).collect())
    };
    assert!(bytes(&compact) < bytes(&default), "{} against {} bytes", bytes(&compact), bytes(&default));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The bytes of the files under `paths`.
fn walk_bytes(paths: Vec<PathBuf>) -> u64 {
    paths
        .into_iter()
        .map(|p| {
            if p.is_dir() {
                walk_bytes(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()).collect())
            } else {
                std::fs::metadata(&p).unwrap().len()
            }
        })
        .sum()
}

#[test]
fn zarr_arrays_hdf5_datasets_and_npy_files_read_by_regions_equal_the_whole_volume() {
    let dir = scratch("zarr");
    let seg = whole(&dir);
    // The same affinities as a chunked zarr array (chunks unlike the blocks).
    let Volume::F32(affs) = read_npy(&dir.join("affs.npy")).unwrap() else { panic!("float32 affinities") };
    let root = dir.join("affs.zarr");
    let store = Arc::new(zarrs::filesystem::FilesystemStore::new(&root).unwrap());
    let shape: Vec<u64> = affs.shape().iter().map(|&n| n as u64).collect();
    let array = zarrs::array::ArrayBuilder::new(
        shape,
        vec![3, 8, 8, 8],
        zarrs::array::data_type::float32(),
        zarrs::array::FillValue::from(0f32),
    )
    .build(store, "/affs")
    .unwrap();
    array.store_metadata().unwrap();
    array.store_array_subset(&array.subset_all(), affs.as_standard_layout().as_slice().unwrap()).unwrap();
    let out = dir.join("bw.zarr");
    let spec = format!("{}/affs", root.display());
    let (ok, err) = blockwise(&["--affinities", &spec], "6,13,9", &out);
    assert!(ok, "{err}");
    assert_same(&out, &seg);
    // The .npy file itself, read row by row, and as uint8 (k/255) against
    // segment of the same uint8 file.
    let out = dir.join("bw-npy.zarr");
    let (ok, err) = blockwise(&["--affinities", dir.join("affs.npy").to_str().unwrap()], "5,8,16", &out);
    assert!(ok, "{err}");
    assert_same(&out, &seg);
    // A chunked HDF5 dataset (deflate; chunks unlike the blocks), read by
    // regions.
    let h5 = dir.join("affs.h5");
    let mut builder = hdf5_pure::FileBuilder::new();
    let flat: Vec<f32> = affs.iter().copied().collect();
    let shape: Vec<u64> = affs.shape().iter().map(|&n| n as u64).collect();
    builder.create_dataset("affs").with_f32_data(&flat).with_shape(&shape).with_chunks(&[3, 8, 8, 8]).with_deflate(4);
    builder.write(&h5).unwrap();
    let out = dir.join("bw-h5.zarr");
    let (ok, err) = blockwise(&["--affinities", &format!("{}:affs", h5.display())], "6,13,9", &out);
    assert!(ok, "{err}");
    assert_same(&out, &seg);
    let quantized = gpu_waterz_cli::generate::quantize(&affs.into_dimensionality().unwrap());
    let u8_path = dir.join("affs-u8.npy");
    gpu_waterz_cli::io::write_npy(&u8_path, &quantized.view()).unwrap();
    let seg_u8 = dir.join("seg-u8.zarr");
    segment(&u8_path, &seg_u8);
    let u8_s = u8_path.to_str().unwrap();
    let out = dir.join("bw-u8.zarr");
    let (ok, err) = blockwise(&["--affinities", u8_s], "7,7,7", &out);
    assert!(ok, "{err}");
    assert_same(&out, &seg_u8);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_settings_are_errors_that_leave_no_output() {
    let dir = scratch("bad");
    let out = dir.join("out.zarr");
    let out_s = out.to_str().unwrap();
    let h5 = dir.join("out.h5");
    let h5_s = h5.to_str().unwrap();
    let implicit = ["blockwise", "--implicit", "10,10,10", "--cell", "6,6,6"];
    let cases: [(&[&str], &str); 5] = [
        (&["--block", "0,4,4", "--thresholds", "0.5", "--out", out_s], "block"),
        (&["--block", "4,4", "--thresholds", "0.5", "--out", out_s], "--block takes three"),
        (&["--block", "4,4,4", "--thresholds", "0.5,0.1", "--out", out_s], "ascending"),
        (&["--block", "4,4,4", "--thresholds", "0.5", "--out", h5_s], "zarr group"),
        (
            &[
                "--block",
                "4,4,4",
                "--thresholds",
                "0.5",
                "--out",
                out_s,
                "--aff-threshold-low",
                "0.9",
                "--aff-threshold-high",
                "0.1",
            ],
            "low",
        ),
    ];
    for (extra, expected) in cases {
        let (ok, err) = run(&[&implicit[..], extra].concat());
        assert!(!ok, "{extra:?} passed");
        assert!(err.contains(expected), "{extra:?}: {err}");
        assert!(!err.contains("panicked"), "{extra:?}: {err}");
        assert!(!out.exists() && !h5.exists(), "{extra:?} left an output");
    }
    // Inputs that are not affinities, or not read by regions.
    let npy = dir.join("a.npy");
    std::fs::write(&npy, b"not an npy file").unwrap();
    let labels = dir.join("labels.npy");
    gpu_waterz_cli::io::write_npy(&labels, &ndarray::Array4::<u64>::zeros((3, 4, 4, 4)).view()).unwrap();
    let h5 = format!("{}:/affs", dir.join("a.h5").display());
    // A contiguous (not chunked) HDF5 dataset is not read by regions.
    let contiguous = dir.join("contiguous.h5");
    let mut builder = hdf5_pure::FileBuilder::new();
    builder.create_dataset("affs").with_f32_data(&[0.5; 3 * 64]).with_shape(&[3, 4, 4, 4]);
    builder.write(&contiguous).unwrap();
    let contiguous = format!("{}:affs", contiguous.display());
    let inputs = [
        (npy.to_str().unwrap(), "NUMPY"),
        (labels.to_str().unwrap(), "float32 or uint8"),
        (&h5, "no file"),
        (&contiguous, "chunked"),
    ];
    for (input, expected) in inputs {
        let (ok, err) = blockwise(&["--affinities", input], "4,4,4", &out);
        assert!(!ok && err.contains(expected), "{input}: {err}");
        assert!(!err.contains("panicked"), "{input}: {err}");
        assert!(!out.exists(), "{input} left an output");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `segment --max-gpu-bytes` below the volume's need decodes in blocks: the
/// same arrays as `segment` of the whole volume, in float32 and in uint8
/// (whose ties make plateaus that cross many blocks).
#[test]
fn segment_under_a_memory_cap_decodes_in_blocks_and_equals_the_whole_volume() {
    let dir = scratch("cap");
    let seg = whole(&dir);
    let Volume::F32(affs) = read_npy(&dir.join("affs.npy")).unwrap() else { panic!("float32 affinities") };
    let quantized = gpu_waterz_cli::generate::quantize(&affs.into_dimensionality().unwrap());
    let u8_path = dir.join("affs-u8.npy");
    gpu_waterz_cli::io::write_npy(&u8_path, &quantized.view()).unwrap();
    let seg_u8 = dir.join("seg-u8.zarr");
    segment(&u8_path, &seg_u8);
    // 30 bytes per voxel in float32 (12 of affinities, 18 of work), 21 in
    // uint8: blocks of 6 (with the halo, two voxels on each side, 10 per
    // axis) and of 7.
    for (affs, cap, whole, block) in
        [(dir.join("affs.npy"), "30k", &seg, [6, 6, 6]), (u8_path.clone(), "28Ki", &seg_u8, [7, 7, 7])]
    {
        let out = dir.join(format!("capped-{cap}.zarr"));
        let settings = ["--thresholds", "0.2,0.5", "--backend", "cpu", "--write-fragments", "--label-type", "uint64"];
        let (affs_s, out_s) = (affs.to_str().unwrap(), out.to_str().unwrap());
        let args = [&["segment", "--affinities", affs_s, "--max-gpu-bytes", cap], &settings[..], &["--out", out_s]];
        let output = Command::new(cli()).args(args.concat()).output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(summary["blockwise"]["block_shape"], serde_json::json!(block), "{summary}");
        assert!(summary["blockwise"]["open_voxels"].as_u64().unwrap() > 0, "{summary}");
        assert_same(&out, whole);
    }
    // A cap the whole volume fits decodes it whole, as without one.
    let out = dir.join("uncapped.zarr");
    let (ok, err) = run(&[
        "segment",
        "--affinities",
        dir.join("affs.npy").to_str().unwrap(),
        "--max-gpu-bytes",
        "1Gi",
        "--thresholds",
        "0.2,0.5",
        "--backend",
        "cpu",
        "--write-fragments",
        "--label-type",
        "uint64",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert_same(&out, &seg);
    // What blocks cannot do, and caps that are no byte count or too small:
    // errors that leave no output.
    let affs_s = dir.join("affs.npy");
    let truth = dir.join("truth.npy");
    let cases: [(&[&str], &str); 5] = [
        (&["--max-gpu-bytes", "100"], "not even a block of one voxel"),
        (&["--max-gpu-bytes", "12Q"], "not a byte count"),
        (&["--max-gpu-bytes", "30k", "--merge-history"], "--merge-history is not available"),
        (&["--max-gpu-bytes", "30k", "--ground-truth", truth.to_str().unwrap()], "--ground-truth is not available"),
        (&["--max-gpu-bytes", "30k", "--scoring", "max"], "mean affinity only"),
    ];
    let out = dir.join("bad.zarr");
    for (extra, expected) in cases {
        let base = ["segment", "--affinities", affs_s.to_str().unwrap(), "--thresholds", "0.5", "--backend", "cpu"];
        let (ok, err) = run(&[&base[..], extra, &["--out", out.to_str().unwrap()]].concat());
        assert!(!ok && err.contains(expected), "{extra:?}: {err}");
        assert!(!err.contains("panicked"), "{extra:?}: {err}");
        assert!(!out.exists(), "{extra:?} left an output");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
