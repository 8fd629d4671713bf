//! Walking lowered kernels in tests, and whether NVRTC tests run here.

use tessel::lower::{KStmt, Lowered};

/// Every statement of the kernels, depth first.
#[allow(dead_code)] // not every test crate that compiles kernels walks them
pub fn statements(l: &Lowered) -> Vec<KStmt> {
    fn go(body: &[KStmt], out: &mut Vec<KStmt>) {
        for s in body {
            out.push(s.clone());
            match s {
                KStmt::For { body, .. } | KStmt::If { then: body, .. } => go(body, out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    for k in &l.kernels {
        go(&k.body, &mut out);
    }
    out
}

/// Whether NVRTC tests run here (panics when NVRTC is missing and not explicitly skipped).
#[allow(dead_code)] // not every test crate that walks kernels compiles them
pub fn nvrtc() -> bool {
    if std::env::var("TESSEL_NO_NVRTC").as_deref() == Ok("1") {
        println!("NVRTC skipped (TESSEL_NO_NVRTC=1)");
        return false;
    }
    if let Err(msg) = tessel::measure::cuda::nvrtc_available() {
        panic!("{msg} (CI installs it through .ci/test; set TESSEL_NO_NVRTC=1 to skip)");
    }
    true
}
