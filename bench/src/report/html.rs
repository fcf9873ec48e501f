//! `dtp bench --report DIR`: `DIR/index.html` and one SVG per plot — per
//! workload the CPU per operation and the throughput of every side (the
//! floor, or the limit, marked), the latency percentiles of every side, and
//! the run-to-run spread of CPU per operation and throughput. No script:
//! the page opens from the file system in any browser.

use std::io;
use std::path::{Path, PathBuf};

use super::svg::{Bars, Strip, escape};
use super::table::{nanos, rate, si};
use super::{Figures, Report, WorkloadReport};

/// The side whose figures are drawn as the marker line.
const FLOOR: &str = "floor";

/// Writes the report into `dir` (created if needed); returns the files
/// written, `index.html` first.
pub fn write_report(report: &Report, dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut files = vec![dir.join("index.html")];
    let mut body = String::new();
    for w in &report.workloads {
        body.push_str(&format!("<h2>{}</h2>\n", escape(&w.name)));
        for (suffix, svg) in plots(report, w) {
            let name = format!("{}-{suffix}.svg", file_stem(&w.name));
            let path = dir.join(&name);
            std::fs::write(&path, svg)?;
            body.push_str(&format!(
                "<img src=\"{}\" alt=\"{} {suffix}\">\n",
                escape(&name),
                escape(&w.name)
            ));
            files.push(path);
        }
    }
    let failures = if report.failures.is_empty() {
        "<p>Nothing failed.</p>".to_owned()
    } else {
        let items: String = report
            .failures
            .iter()
            .map(|f| {
                format!(
                    "<li>{}{}{}: {}</li>\n",
                    f.run.map_or_else(String::new, |r| format!("run {r} · ")),
                    escape(&f.workload),
                    f.side
                        .as_ref()
                        .map_or_else(String::new, |s| format!(" · {}", escape(s))),
                    escape(&f.reason)
                )
            })
            .collect();
        format!("<ul class=\"fail\">\n{items}</ul>")
    };
    let notes: String = report
        .notes
        .iter()
        .map(|n| format!("<li>{}</li>\n", escape(n)))
        .collect();
    let page = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>dtp bench</title>\n<style>body{{font-family:sans-serif;max-width:980px;margin:2em auto}}\
         img{{display:block;margin:0.5em 0}}pre{{font-size:12px;overflow-x:auto}}.fail{{color:#a40000}}</style>\
         </head><body>\n<h1>dtp bench — backend {}, {} {}</h1>\n\
         <p>Every figure is the median over the runs that measured it; ratios are medians of per-run ratios (ours / peer). \
         CPU per operation is the server process's user + system time from the OS. The red dashed line is the floor \
         (raw io_uring, the least a server can do here) or the machine's limit.</p>\n\
         <h2>Table</h2>\n<pre>{}</pre>\n<h2>Failures</h2>\n{failures}\n<ul>\n{notes}</ul>\n{body}</body></html>\n",
        escape(&report.backend),
        report.runs.len(),
        if report.runs.len() == 1 {
            "run"
        } else {
            "runs"
        },
        escape(&report.to_string()),
    );
    std::fs::write(&files[0], page)?;
    Ok(files)
}

/// A workload name as a file name: letters, digits and `-` only.
fn file_stem(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

fn plots(report: &Report, w: &WorkloadReport) -> Vec<(&'static str, String)> {
    let sides: Vec<(&str, &Figures)> = w.sides().collect();
    let floor = sides.iter().find(|(n, _)| *n == FLOOR).map(|(_, f)| *f);
    let rows = |get: fn(&Figures) -> f64| -> Vec<(String, Vec<f64>)> {
        sides
            .iter()
            .map(|(n, f)| ((*n).to_owned(), vec![get(f)]))
            .collect()
    };
    let mut out = Vec::new();
    out.push((
        "cpu",
        Bars {
            title: &format!("{}: server CPU per operation (lower is better)", w.name),
            series: &[],
            rows: rows(|f| f.cpu_ns_per_op),
            format: nanos,
            marker: floor.map(|f| (FLOOR.to_owned(), f.cpu_ns_per_op)),
        }
        .render(),
    ));
    let by_bytes = w.ours.as_ref().is_some_and(|f| f.bytes_per_s > 0.0);
    let throughput = if by_bytes {
        let marker = match &w.limit {
            Some(l) => Some((l.name.clone(), l.bytes_per_s)),
            None => floor.map(|f| (FLOOR.to_owned(), f.bytes_per_s)),
        };
        Bars {
            title: &format!("{}: goodput (higher is better)", w.name),
            series: &[],
            rows: rows(|f| f.bytes_per_s),
            format: rate,
            marker,
        }
        .render()
    } else {
        Bars {
            title: &format!("{}: operations per second (higher is better)", w.name),
            series: &[],
            rows: rows(|f| f.ops_per_s),
            format: |v| format!("{}/s", si(v)),
            marker: floor.map(|f| (FLOOR.to_owned(), f.ops_per_s)),
        }
        .render()
    };
    out.push(("throughput", throughput));
    out.push((
        "latency",
        Bars {
            title: &format!("{}: latency percentiles (lower is better)", w.name),
            series: &["p50", "p99"],
            rows: sides
                .iter()
                .map(|(n, f)| ((*n).to_owned(), vec![f.p50_us, f.p99_us]))
                .collect(),
            format: |v| format!("{v:.0} µs"),
            marker: None,
        }
        .render(),
    ));
    let spread = |get: fn(&Figures) -> f64| -> Vec<(String, Vec<f64>, f64)> {
        sides
            .iter()
            .map(|(n, f)| {
                let per_run: Vec<f64> = report
                    .runs
                    .iter()
                    .filter_map(|r| r.workloads.iter().find(|x| x.name == w.name))
                    .filter_map(|x| x.side(n))
                    .map(get)
                    .collect();
                ((*n).to_owned(), per_run, get(f))
            })
            .collect()
    };
    out.push((
        "spread-cpu",
        Strip {
            title: &format!("{}: CPU per operation, every run (bar: median)", w.name),
            rows: spread(|f| f.cpu_ns_per_op),
            format: nanos,
        }
        .render(),
    ));
    out.push((
        "spread-throughput",
        Strip {
            title: &format!("{}: operations per second, every run (bar: median)", w.name),
            rows: spread(|f| f.ops_per_s),
            format: |v| format!("{}/s", si(v)),
        }
        .render(),
    ));
    out
}
