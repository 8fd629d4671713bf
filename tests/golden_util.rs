//! Golden files with a bless switch: `TESSEL_BLESS=1 cargo test` rewrites them.

use std::path::PathBuf;

/// Compares `actual` with `tests/golden/NAME`, or rewrites the file when `TESSEL_BLESS`
/// is set.
pub fn check_golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("TESSEL_BLESS").is_some() {
        std::fs::write(&path, actual).expect("write golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing golden file {}: run `TESSEL_BLESS=1 cargo test` and review it",
            path.display()
        )
    });
    if expected != actual {
        let first = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from the output at line {} (expected {:?}, got {:?}); if the change is intended, run with TESSEL_BLESS=1 and review the diff",
            path.display(),
            first + 1,
            expected.lines().nth(first),
            actual.lines().nth(first)
        );
    }
}
