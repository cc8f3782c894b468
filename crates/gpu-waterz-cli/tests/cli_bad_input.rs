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
    let mut files: Vec<String> = std::fs::read_dir(&out)
        .map(|d| d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    files.sort();
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
    let (ok, stderr, _) = segment(
        &dir,
        &p,
        &["--thresholds", "0.5", "--backend", "cpu", "--arithmetic", "exact", "--quiet", "--overwrite"],
    );
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
    let (ok, stderr, _) = segment(&dir, &affs, &["--thresholds", "0.5", "--quiet", "--overwrite"]);
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

/// Names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// The output folder is transactional: a non-empty one is refused without
/// --overwrite; re-running with fewer thresholds leaves no stale files; a
/// run holding the folder keeps a second one out; a failed run keeps the
/// previous result.
#[test]
fn output_folders_hold_one_complete_result() {
    let dir = scratch("transactional");
    let affs = good_affs(&dir);
    let out = dir.join("out");
    let (ok, stderr, files) = segment(&dir, &affs, &["--thresholds", "0.1,0.3,0.5,0.7", "--quiet"]);
    assert!(ok, "{stderr}");
    assert_eq!(files.iter().filter(|f| f.starts_with("segmentation_")).count(), 4);
    // Non-empty without --overwrite: refused, the result untouched.
    let (ok, stderr, files) = segment(&dir, &affs, &["--thresholds", "0.5", "--quiet"]);
    assert!(!ok && stderr.contains("not empty") && stderr.contains("--overwrite"), "{stderr}");
    assert_eq!(files.len(), 5);
    // Fewer thresholds with --overwrite: exactly the new result.
    let (ok, stderr, files) = segment(&dir, &affs, &["--thresholds", "0.3,0.5", "--quiet", "--overwrite"]);
    assert!(ok, "{stderr}");
    assert_eq!(files, ["segmentation_0.npy", "segmentation_1.npy", "summary.json"]);
    // A failing run (its ground truth is missing) keeps the previous result.
    let gt = dir.join("missing.npy");
    let gt = gt.to_str().unwrap();
    let (ok, _, after) = segment(&dir, &affs, &["--thresholds", "0.1", "--ground-truth", gt, "--quiet", "--overwrite"]);
    assert!(!ok);
    assert_eq!(after, files);
    // Another live run holds the folder (this test process stands in for
    // it): refused, with the process named.
    std::fs::write(dir.join(".out.gpu-waterz-lock"), std::process::id().to_string()).unwrap();
    let (ok, stderr, after) = segment(&dir, &affs, &["--thresholds", "0.1", "--quiet", "--overwrite"]);
    assert!(!ok && stderr.contains(&format!("process {}", std::process::id())), "{stderr}");
    assert_eq!(after, files);
    std::fs::remove_file(dir.join(".out.gpu-waterz-lock")).unwrap();
    assert_eq!(names(&dir), ["affs.npy", "out"]);
    assert!(out.join("summary.json").exists());
}

/// Runs killed (SIGKILL) at several points leave either the previous
/// result or the new one, never a mix; the next run removes what they left
/// and puts a set-aside previous result back.
#[test]
fn killed_runs_never_leave_a_half_written_folder() {
    let dir = scratch("killed");
    let affs = dir.join("affs.npy");
    let gt = dir.join("gt.npy");
    let generated = Command::new(cli())
        .args(["generate", "--shape", "24,128,128", "--seed", "3", "--out-affinities"])
        .arg(&affs)
        .arg("--out-ground-truth")
        .arg(&gt)
        .output()
        .unwrap();
    assert!(generated.status.success(), "{}", String::from_utf8_lossy(&generated.stderr));
    let out = dir.join("out");
    let (ok, stderr, first) = segment(&dir, &affs, &["--thresholds", "0.3,0.5", "--backend", "cpu", "--quiet"]);
    assert!(ok, "{stderr}");
    let mut previous = std::fs::read(out.join("summary.json")).unwrap();
    for delay_ms in [0u64, 30, 100, 250, 500, 1000] {
        let mut child = Command::new(cli())
            .arg("segment")
            .arg("--affinities")
            .arg(&affs)
            .arg("--out-dir")
            .arg(&out)
            .args(["--thresholds", "0.1,0.3,0.5,0.7,0.9", "--backend", "cpu", "--merge-history", "--quiet"])
            .arg("--overwrite")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        let status = child.wait().unwrap();
        let now = names(&out);
        let summary = std::fs::read(out.join("summary.json")).unwrap();
        if status.success() {
            assert_eq!(now.iter().filter(|f| f.starts_with("segmentation_")).count(), 5, "{delay_ms} ms: {now:?}");
        } else if summary == previous {
            assert_eq!(now, first, "{delay_ms} ms: the previous result, whole");
        } else {
            assert_eq!(now.iter().filter(|f| f.starts_with("segmentation_")).count(), 5, "{delay_ms} ms: {now:?}");
        }
        // The next run cleans up whatever the killed one left beside it.
        let (ok, stderr, _) =
            segment(&dir, &affs, &["--thresholds", "0.3,0.5", "--backend", "cpu", "--quiet", "--overwrite"]);
        assert!(ok, "{delay_ms} ms: {stderr}");
        assert_eq!(names(&dir), ["affs.npy", "gt.npy", "out"], "{delay_ms} ms: leftovers");
        assert_eq!(names(&out), first);
        previous = std::fs::read(out.join("summary.json")).unwrap();
    }
}

/// `../shared/data/<name>` (or `$GPU_WATERZ_DATA/<name>`); a missing file
/// fails the test.
fn data_file(name: &str) -> PathBuf {
    let dir = std::env::var_os("GPU_WATERZ_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
    let path = dir.join(name);
    assert!(path.exists(), "{} is absent: the test needs ../shared/data", path.display());
    path
}

/// Messages that name the real problem: an HDF5 file without a dataset
/// lists its datasets; an empty volume says it is empty.
#[test]
fn messages_name_the_real_problem() {
    let dir = scratch("messages");
    let h5 = data_file("gala-em-train.h5");
    let (ok, stderr, _) = segment(&dir, &h5, &["--thresholds", "0.5"]);
    assert!(!ok, "{stderr}");
    assert!(stderr.contains("name a dataset as FILE:/DATASET"), "{stderr}");
    assert!(stderr.contains("gala-em-train.h5:/boundary_probability"), "{stderr}");
    assert!(!stderr.contains("NUMPY"), "not reported as a bad npy: {stderr}");
    let empty = dir.join("empty.npy");
    write_atomically(&empty, &npy_bytes_u64(&[0, 2, 2], &[])).unwrap();
    let e = empty.to_str().unwrap();
    let out = Command::new(cli()).args(["evaluate", "--segmentation", e, "--ground-truth", e]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("empty") && !stderr.contains("all are 0"), "{stderr}");
}

/// `--progress json` gives one JSON object per line for pipelines; `-vv`
/// shows the library's debug events.
#[test]
fn machine_readable_progress_and_log_levels() {
    let dir = scratch("progress");
    let affs = good_affs(&dir);
    let (ok, stderr, _) = segment(&dir, &affs, &["--thresholds", "0.3,0.5", "--progress", "json", "--backend", "cpu"]);
    assert!(ok, "{stderr}");
    let events: Vec<serde_json::Value> =
        stderr.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}"))).collect();
    let done: Vec<&str> =
        events.iter().filter(|e| e["event"] == "stage_done").filter_map(|e| e["stage"].as_str()).collect();
    assert!(done.contains(&"reading the affinities") && done.contains(&"threshold 2/2 (0.5)"), "{done:?}");
    assert!(events.iter().filter(|e| e["event"] == "stage_done").all(|e| e["seconds"].as_f64().is_some()));
    let out = Command::new(cli())
        .args(["-vv", "segment", "--affinities"])
        .arg(&affs)
        .arg("--out-dir")
        .arg(dir.join("verbose"))
        .args(["--thresholds", "0.5", "--backend", "cpu", "--quiet"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.contains("DEBUG"), "{stderr}");
}
