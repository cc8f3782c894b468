//! Every bad input of `gpu-waterz segment` and `evaluate` gets a clear
//! error and a non-zero exit, never a panic, and leaves no output files.

use gpu_waterz_cli::io::{npy_bytes_u64, npy_header, write_atomically};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The CLI under test: `GPU_WATERZ_BIN` (set by the GPU test bundle, whose
/// binaries run away from the build tree), else the one cargo built.
fn cli() -> PathBuf {
    std::env::var_os("GPU_WATERZ_BIN").map(PathBuf::from).unwrap_or_else(|| env!("CARGO_BIN_EXE_gpu-waterz").into())
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpu-waterz-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A float32 .npy of the given shape and values.
fn write_f32(path: &Path, shape: &[usize], values: &[f32]) {
    let mut bytes = npy_header("<f4", shape);
    for v in values {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

fn good_affs(dir: &Path) -> PathBuf {
    let p = dir.join("affs.npy");
    let n = 3 * 2 * 3 * 4;
    write_f32(&p, &[3, 2, 3, 4], &(0..n).map(|i| (i % 10) as f32 / 10.0).collect::<Vec<_>>());
    p
}

fn segment(dir: &Path, affs: &Path, extra: &[&str]) -> (bool, String, Vec<String>) {
    let out = dir.join("out");
    let output = Command::new(cli())
        .arg("segment")
        .arg("--affinities")
        .arg(affs)
        .arg("--out-dir")
        .arg(&out)
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "the CLI panicked: {stderr}");
    let files = std::fs::read_dir(&out)
        .map(|d| d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    (output.status.success(), stderr, files)
}

fn expect_error(dir: &Path, affs: &Path, extra: &[&str], needle: &str) {
    let (ok, stderr, files) = segment(dir, affs, extra);
    assert!(!ok, "expected a failure with {needle:?}");
    assert!(stderr.contains(needle), "expected {needle:?} in: {stderr}");
    assert!(files.is_empty(), "no output may be left behind, found {files:?}");
}

#[test]
fn good_input_writes_segmentations_and_summary() {
    let dir = scratch("good");
    let affs = good_affs(&dir);
    let (ok, stderr, mut files) = segment(&dir, &affs, &["--thresholds", "0.1,0.5", "--merge-history"]);
    assert!(ok, "{stderr}");
    files.sort();
    assert_eq!(
        files,
        ["merge_history_0.json", "merge_history_1.json", "segmentation_0.npy", "segmentation_1.npy", "summary.json"]
    );
}

#[test]
fn bad_shapes_and_values() {
    let dir = scratch("shapes");
    let p = dir.join("bad.npy");
    write_f32(&p, &[3, 4, 5], &[0.5; 60]);
    expect_error(&dir, &p, &["--thresholds", "0.5"], "shape (3, z, y, x)");
    write_f32(&p, &[2, 2, 3, 4], &[0.5; 48]);
    expect_error(&dir, &p, &["--thresholds", "0.5"], "(3, z, y, x)");
    write_f32(&p, &[3, 0, 3, 4], &[]);
    expect_error(&dir, &p, &["--thresholds", "0.5"], "empty");
    let mut values = vec![0.5f32; 72];
    values[17] = f32::NAN;
    write_f32(&p, &[3, 2, 3, 4], &values);
    expect_error(&dir, &p, &["--thresholds", "0.5"], "NaN");
    values[17] = f32::INFINITY;
    write_f32(&p, &[3, 2, 3, 4], &values);
    expect_error(&dir, &p, &["--thresholds", "0.5"], "infinite");
}

/// waterz's input semantics: finite affinities outside [0, 1] (taken as
/// they are by the CPU backend in waterz's arithmetic, clamped with a
/// warning by exact statistics), any finite threshold, more than 3
/// channels (the first 3 used).
#[test]
fn waterz_inputs_outside_0_1_and_more_channels() {
    let dir = scratch("waterz-inputs");
    let p = dir.join("wide.npy");
    let mut values = vec![0.5f32; 96];
    values[17] = 1.0001676;
    values[40] = -0.25;
    write_f32(&p, &[4, 2, 3, 4], &values);
    let (ok, stderr, files) = segment(&dir, &p, &["--thresholds", "-1,0.5,100", "--backend", "cpu"]);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("4 channels; the first 3 are used"), "{stderr}");
    assert!(!stderr.contains("warning"), "waterz's arithmetic takes them as they are: {stderr}");
    assert_eq!(files.iter().filter(|f| f.starts_with("segmentation_")).count(), 3);
    let (ok, stderr, _) =
        segment(&dir, &p, &["--thresholds", "0.5", "--backend", "cpu", "--arithmetic", "exact", "--quiet"]);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("warning: 2 affinities lie outside [0, 1]"), "{stderr}");
}

#[test]
fn shape_mismatch_of_fragments_and_ground_truth() {
    let dir = scratch("mismatch");
    let affs = good_affs(&dir);
    let labels = dir.join("labels.npy");
    write_atomically(&labels, &npy_bytes_u64(&[2, 3, 5], &[1; 30])).unwrap();
    let l = labels.to_str().unwrap();
    expect_error(&dir, &affs, &["--thresholds", "0.5", "--fragments", l], "fragments must have the shape");
    expect_error(&dir, &affs, &["--thresholds", "0.5", "--ground-truth", l], "ground truth must have the shape");
}

#[test]
fn bad_thresholds() {
    let dir = scratch("thresholds");
    let affs = good_affs(&dir);
    expect_error(&dir, &affs, &["--thresholds", "0.5,0.1"], "ascending");
    expect_error(&dir, &affs, &["--thresholds", "0.5,0.5"], "twice");
    expect_error(&dir, &affs, &["--thresholds", "NaN"], "finite");
    expect_error(&dir, &affs, &["--thresholds", "inf"], "finite");
    expect_error(
        &dir,
        &affs,
        &["--thresholds", "0.5", "--aff-threshold-low", "0.9", "--aff-threshold-high", "0.1"],
        "smaller",
    );
    expect_error(&dir, &affs, &["--thresholds", "0.5", "--scoring", "OneMinus<Foo>"], "unsupported scoring function");
    expect_error(&dir, &affs, &["--thresholds", "0.5", "--epsilon=-1"], "epsilon");
}

#[test]
fn missing_truncated_and_wrong_dtype_files() {
    let dir = scratch("files");
    expect_error(&dir, &dir.join("nope.npy"), &["--thresholds", "0.5"], "cannot read");
    expect_error(&dir, &dir.join("nope.h5:/affs"), &["--thresholds", "0.5"], "cannot read");
    let affs = good_affs(&dir);
    let bytes = std::fs::read(&affs).unwrap();
    let truncated = dir.join("truncated.npy");
    std::fs::write(&truncated, &bytes[..bytes.len() - 10]).unwrap();
    expect_error(&dir, &truncated, &["--thresholds", "0.5"], "truncated");
    let labels = dir.join("labels.npy");
    write_atomically(&labels, &npy_bytes_u64(&[3, 2, 3, 4], &[1; 72])).unwrap();
    expect_error(&dir, &labels, &["--thresholds", "0.5"], "must be float32");
}

#[test]
fn evaluate_prints_waterz_keys_and_rejects_mismatches() {
    let dir = scratch("evaluate");
    let seg = dir.join("seg.npy");
    let gt = dir.join("gt.npy");
    write_atomically(&seg, &npy_bytes_u64(&[1, 2, 2], &[1, 1, 2, 2])).unwrap();
    write_atomically(&gt, &npy_bytes_u64(&[1, 2, 2], &[5, 5, 5, 5])).unwrap();
    let evaluate = || {
        let (s, g) = (seg.to_str().unwrap(), gt.to_str().unwrap());
        Command::new(cli()).args(["evaluate", "--segmentation", s, "--ground-truth", g]).output().unwrap()
    };
    let out = evaluate();
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!((json["voi_split"].as_f64().unwrap() - 1.0).abs() < 1e-12);
    assert_eq!(json["voi_merge"].as_f64().unwrap(), 0.0);
    assert_eq!(json["rand_split"].as_f64().unwrap(), 0.5);
    assert_eq!(json["rand_merge"].as_f64().unwrap(), 1.0);
    write_atomically(&gt, &npy_bytes_u64(&[2, 2, 1], &[5, 5, 5, 5])).unwrap();
    let out = evaluate();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("shape"));
}

#[test]
fn generate_rejects_bad_shapes_and_missing_labels() {
    let dir = scratch("generate");
    let run = |extra: &[&str]| {
        let out = Command::new(cli())
            .arg("generate")
            .arg("--out-affinities")
            .arg(dir.join("a.npy"))
            .arg("--out-ground-truth")
            .arg(dir.join("g.npy"))
            .args(extra)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!stderr.contains("panicked"), "{stderr}");
        (out.status.success(), stderr)
    };
    let (ok, e) = run(&["--shape", "4,5"]);
    assert!(!ok && e.contains("three sizes"), "{e}");
    let (ok, e) = run(&["--shape", "4,0,5"]);
    assert!(!ok && e.contains("no voxels"), "{e}");
    let (ok, e) = run(&["--shape", "4,5,6", "--labels", dir.join("missing.h5:/labels").to_str().unwrap()]);
    assert!(!ok && e.contains("cannot read"), "{e}");
    assert!(!dir.join("a.npy").exists() && !dir.join("g.npy").exists());
    let (ok, e) = run(&["--shape", "4,16,16", "--cells", "3"]);
    assert!(ok, "{e}");
    assert!(dir.join("a.npy").exists() && dir.join("g.npy").exists());
}

#[test]
fn quiet_or_not_a_terminal_keeps_stderr_empty() {
    let dir = scratch("quiet");
    let affs = good_affs(&dir);
    // Without a terminal only notes (such as which backend `auto` took)
    // reach stderr, no progress lines; with --quiet nothing does.
    let (ok, stderr, _) = segment(&dir, &affs, &["--thresholds", "0.5"]);
    assert!(ok, "{stderr}");
    assert!(stderr.lines().all(|l| l.starts_with("gpu-waterz: ") && !l.contains(" ...")), "{stderr:?}");
    let (ok, stderr, _) = segment(&dir, &affs, &["--thresholds", "0.5", "--quiet"]);
    assert!(ok, "{stderr}");
    assert!(stderr.is_empty(), "--quiet: {stderr:?}");
}

#[test]
fn demo_decodes_a_generated_volume_and_reports_voi() {
    let output = Command::new(cli()).args(["demo", "--shape", "8,48,48", "--thresholds", "0.3,0.5"]).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}{}", String::from_utf8_lossy(&output.stderr));
    assert!(text.contains("No GPU") || text.contains("GPU ("), "{text}");
    assert_eq!(text.matches("VOI split").count(), 2, "{text}");
    let bad = Command::new(cli()).args(["demo", "--shape", "0,4,4"]).output().unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no voxels"));
}
