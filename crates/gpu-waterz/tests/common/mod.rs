//! Helpers shared by the facade's integration tests.

use std::path::PathBuf;

/// `../shared/data/<name>` (or `$GPU_WATERZ_DATA/<name>`). The data is part
/// of every developer's and CI's checkout, so a missing file fails the test
/// instead of letting it pass without testing.
pub fn data_file(name: &str) -> PathBuf {
    let dir = std::env::var_os("GPU_WATERZ_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is absent: the real-data tests need ../shared/data (or GPU_WATERZ_DATA naming a copy)",
        path.display()
    );
    path
}
