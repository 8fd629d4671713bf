//! The text table `tessel report` prints without `--out` (and `tessel tune --network`
//! after tuning): a line per task, then the network's estimated total.

use super::Summary;
use std::fmt::Write;

/// A latency for people: microseconds below a millisecond, else milliseconds.
pub fn seconds(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.1} us", s * 1e6)
    } else {
        format!("{:.3} ms", s * 1e3)
    }
}

fn or_dash(x: Option<String>) -> String {
    x.unwrap_or_else(|| "-".into())
}

/// The table.
pub fn render(s: &Summary) -> String {
    let width = s
        .rows
        .iter()
        .map(|r| r.label.len())
        .chain([4])
        .max()
        .unwrap_or(4);
    let mut out = String::new();
    let _ = writeln!(out, "{} on {}", s.title, s.target);
    let _ = writeln!(
        out,
        "{:<width$}  {:>6}  {:>6}  {:>11}  {:>9}  {:>9}  {:>11}  {:>6}",
        "task", "weight", "trials", "best", "GFLOP/s", "vs vendor", "weighted", "share"
    );
    let total = s.estimated_seconds();
    for r in &s.rows {
        let share = match (r.weighted_seconds(), total) {
            (Some(w), Some(t)) if t > 0.0 => format!("{:.1}%", 100.0 * w / t),
            _ => "-".into(),
        };
        let _ = writeln!(
            out,
            "{:<width$}  {:>6}  {:>6}  {:>11}  {:>9}  {:>9}  {:>11}  {:>6}",
            r.label,
            r.weight,
            r.trials,
            or_dash(r.best_seconds.map(seconds)),
            or_dash(r.gflops().map(|g| format!("{g:.1}"))),
            or_dash(r.peer_ratio().map(|x| format!("{x:.2}x"))),
            or_dash(r.weighted_seconds().map(seconds)),
            share,
        );
    }
    if s.network {
        let _ = writeln!(
            out,
            "estimated network latency {} over {} trials (sum of weight x best){}",
            or_dash(total.map(seconds)),
            s.trials(),
            match (total, s.peer_seconds()) {
                (Some(t), Some(p)) => format!("; vendor libraries {} ({:.2}x)", seconds(p), p / t),
                _ => String::new(),
            }
        );
    }
    out
}
