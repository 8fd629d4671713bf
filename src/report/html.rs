//! The `index.html` of `tessel report --out DIR`: the table, the network's estimated
//! latency against the vendor libraries', and the SVG curves beside it.

use super::table::seconds;
use super::Summary;
use std::fmt::Write;

/// The file name of task `i`'s curve.
pub fn task_plot_name(i: usize) -> String {
    format!("task{:02}.svg", i + 1)
}

/// The file name of the network's estimated-latency curve.
pub const NETWORK_PLOT: &str = "network.svg";

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn cell(x: Option<String>) -> String {
    format!("<td>{}</td>", x.unwrap_or_else(|| "-".into()))
}

/// The page; `plots` says which curves were written (tasks without a trial have none).
pub fn render(s: &Summary, task_plots: &[bool], network_plot: bool) -> String {
    let mut h = String::new();
    let title = escape(&format!("{} on {}", s.title, s.target));
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title>\n<style>\
         body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}\
         td:first-child{{text-align:left;font-family:monospace;white-space:pre}}\
         </style></head><body>\n<h1>{title}</h1>\n"
    );
    if s.network {
        let total = s.estimated_seconds();
        let _ = write!(
            h,
            "<p>Estimated network latency (sum of weight x best latency): <b>{}</b> over {} trials.",
            total.map_or("- (a task has no measured latency)".into(), seconds),
            s.trials()
        );
        if let (Some(t), Some(p)) = (total, s.peer_seconds()) {
            let _ = write!(h, " Vendor libraries: {} ({:.2}x).", seconds(p), p / t);
        }
        h += "</p>\n";
        if network_plot {
            let _ = writeln!(
                h,
                "<p><img src=\"{NETWORK_PLOT}\" alt=\"estimated network latency\"></p>"
            );
        }
    }
    h += "<table>\n<tr><th>task</th><th>weight</th><th>trials</th><th>best</th><th>GFLOP/s</th>\
          <th>vendor</th><th>vs vendor</th><th>weighted</th><th>curve</th></tr>\n";
    for (i, r) in s.rows.iter().enumerate() {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td>",
            escape(&r.label),
            r.weight,
            r.trials
        );
        h += &cell(r.best_seconds.map(seconds));
        h += &cell(r.gflops().map(|g| format!("{g:.1}")));
        h += &cell(r.peer_seconds.map(seconds));
        h += &cell(r.peer_ratio().map(|x| format!("{x:.2}x")));
        h += &cell(r.weighted_seconds().map(seconds));
        if task_plots.get(i).copied().unwrap_or(false) {
            let _ = write!(h, "<td><a href=\"{0}\">{0}</a></td>", task_plot_name(i));
        } else {
            h += "<td>-</td>";
        }
        h += "</tr>\n";
    }
    h += "</table>\n";
    for (i, r) in s.rows.iter().enumerate() {
        if task_plots.get(i).copied().unwrap_or(false) {
            let _ = writeln!(
                h,
                "<h3>{}</h3><img src=\"{}\" alt=\"tuning curve\">",
                escape(&r.label),
                task_plot_name(i)
            );
        }
    }
    h += "</body></html>\n";
    h
}
