//! Tuning curves from `benches/tuning_curves.sh`: reads the tune reports
//! (`<workload tag>.<strategy>.json`, written by `tessel tune --report-json`) in a folder and
//! writes `curves.csv` (best latency after each round, per workload and strategy) and
//! `curves.svg`: per strategy, the geometric mean over workloads of the best throughput
//! found after N trials, relative to the best any strategy found for that workload.
//!
//!     cargo bench --bench plot_curves -- DIR

use plotters::prelude::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// (trials measured so far, best seconds so far) after each round.
type Curve = Vec<(usize, f64)>;

/// The curve of the first workload of a `--report-json` document.
fn curve(doc: &Value) -> Curve {
    let mut trials = 0;
    let mut out = Vec::new();
    for r in doc["workloads"][0]["rounds"]
        .as_array()
        .into_iter()
        .flatten()
    {
        trials += r["measured"].as_u64().unwrap_or(0) as usize;
        if let Some(b) = r["best_seconds"].as_f64() {
            out.push((trials, b));
        }
    }
    out
}

/// The best seconds of `c` after `n` trials.
fn best_at(c: &Curve, n: usize) -> Option<f64> {
    c.iter()
        .filter(|(t, _)| *t <= n)
        .map(|(_, b)| *b)
        .reduce(f64::min)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .ok_or("usage: cargo bench --bench plot_curves -- DIR")?;
    let dir = Path::new(&dir);
    // curves[workload][strategy]
    let mut curves: BTreeMap<String, BTreeMap<String, Curve>> = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let Some(stem) = name.strip_suffix(".json") else {
            continue;
        };
        let Some((workload, strategy)) = stem.rsplit_once('.') else {
            continue;
        };
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
        curves
            .entry(workload.to_string())
            .or_default()
            .insert(strategy.to_string(), curve(&report));
    }
    let mut csv = String::from("workload,strategy,trials,best_seconds\n");
    for (w, by) in &curves {
        for (s, c) in by {
            for (t, b) in c {
                writeln!(csv, "{w},{s},{t},{b:e}")?;
            }
        }
    }
    std::fs::write(dir.join("curves.csv"), csv)?;
    // Geomean over workloads of best-so-far / best of any strategy, per strategy.
    let max_trials = curves
        .values()
        .flat_map(|b| b.values())
        .filter_map(|c| c.last().map(|(t, _)| *t))
        .max()
        .unwrap_or(0);
    let strategies: Vec<String> = {
        let mut s: Vec<String> = curves.values().flat_map(|b| b.keys().cloned()).collect();
        s.sort();
        s.dedup();
        s
    };
    let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let mut table =
        String::from("| strategy | trials | geomean of best / best found |\n| --- | --- | --- |\n");
    for s in &strategies {
        let mut pts = Vec::new();
        for n in (1..=max_trials).step_by(max_trials.div_ceil(100).max(1)) {
            let mut logs = Vec::new();
            for by in curves.values() {
                let best = by
                    .values()
                    .filter_map(|c| best_at(c, usize::MAX))
                    .reduce(f64::min);
                if let (Some(c), Some(best)) = (by.get(s), best) {
                    if let Some(b) = best_at(c, n) {
                        logs.push((best / b).ln());
                    }
                }
            }
            if logs.len() == curves.len() && !logs.is_empty() {
                pts.push((
                    n as f64,
                    (logs.iter().sum::<f64>() / logs.len() as f64).exp(),
                ));
            }
        }
        for probe in [50, 100, 200, 500, 1000] {
            if let Some((_, y)) = pts.iter().rev().find(|(x, _)| *x <= probe as f64) {
                if probe <= max_trials {
                    writeln!(table, "| {s} | {probe} | {y:.3} |")?;
                }
            }
        }
        lines.push((s.clone(), pts));
    }
    print!("{table}");
    let svg = dir.join("curves.svg");
    let root = SVGBackend::new(&svg, (800, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("best so far, geomean over {} workloads", curves.len()),
            ("sans-serif", 20),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..max_trials.max(1) as f64, 0f64..1.05f64)?;
    chart
        .configure_mesh()
        .x_desc("trials measured")
        .y_desc("throughput / best found")
        .draw()?;
    for (i, (s, pts)) in lines.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?
            .label(s.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    println!(
        "wrote {} and {}",
        dir.join("curves.csv").display(),
        svg.display()
    );
    Ok(())
}
