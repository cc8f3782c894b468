//! Helpers shared by the facade's integration tests.

use std::io::Write;
use std::path::PathBuf;

/// `../shared/data/<name>` (or `$GPU_WATERZ_DATA/<name>`), or `None` after a
/// visible `SKIPPED` line when it is absent.
pub fn data_file(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("GPU_WATERZ_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
    let path = dir.join(name);
    if path.exists() {
        Some(path)
    } else {
        let _ = writeln!(std::io::stderr(), "SKIPPED real-data test: {} is absent", path.display());
        None
    }
}
