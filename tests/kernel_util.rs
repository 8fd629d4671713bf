//! Walking lowered kernels in tests.

use tessel::lower::{KStmt, Lowered};

/// Every statement of the kernels, depth first.
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
