//! The SVG curves of `tessel report --out DIR`, drawn with `plotters` into strings: a
//! task's best latency so far over its trials, and the network's estimated latency over
//! the trials of all tasks. Latencies on a log axis, in microseconds.

use plotters::prelude::*;
use thiserror::Error;

/// A curve that could not be drawn.
#[derive(Debug, Error)]
#[error("drawing the curve of {what}: {message}")]
pub struct PlotError {
    pub what: String,
    pub message: String,
}

/// A task's tuning curve from its best-so-far after each trial (`None` before the first
/// success); `None` when no trial succeeded.
pub fn task_curve(label: &str, curve: &[Option<f64>]) -> Result<Option<String>, PlotError> {
    let points: Vec<(usize, f64)> = curve
        .iter()
        .enumerate()
        .filter_map(|(i, b)| b.map(|b| (i + 1, b)))
        .collect();
    if points.is_empty() {
        return Ok(None);
    }
    draw(label, "best latency so far", &points).map(Some)
}

/// The network's estimated latency after each trial (from when every task had a best).
pub fn network_curve(name: &str, points: &[(usize, f64)]) -> Result<Option<String>, PlotError> {
    if points.is_empty() {
        return Ok(None);
    }
    draw(name, "estimated network latency", points).map(Some)
}

fn draw(what: &str, y_desc: &str, points: &[(usize, f64)]) -> Result<String, PlotError> {
    let fail = |e: &dyn std::fmt::Display| PlotError {
        what: what.to_string(),
        message: e.to_string(),
    };
    let us: Vec<(f64, f64)> = points.iter().map(|(t, s)| (*t as f64, s * 1e6)).collect();
    let x_max = us.last().map_or(1.0, |p| p.0).max(2.0);
    let (lo, hi) = us
        .iter()
        .fold((f64::MAX, f64::MIN), |(l, h), p| (l.min(p.1), h.max(p.1)));
    let (lo, hi) = (lo / 1.2, hi * 1.2);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (720, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(what, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(1.0..x_max, (lo..hi).log_scale())
            .map_err(|e| fail(&e))?;
        chart
            .configure_mesh()
            .x_desc("trials")
            .y_desc(format!("{y_desc} (us)"))
            .draw()
            .map_err(|e| fail(&e))?;
        chart
            .draw_series(LineSeries::new(us, &BLUE))
            .map_err(|e| fail(&e))?;
        root.present().map_err(|e| fail(&e))?;
    }
    Ok(svg)
}
