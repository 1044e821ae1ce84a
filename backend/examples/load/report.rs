//! A run's results: the processes it watches and where its results go, what it measured
//! (as `--json` writes it), and the Markdown table made from several runs.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::client::Phase;
use crate::storm::Storm;

/// The processes a run watches, and where its results go.
#[derive(clap::Args)]
pub struct Reporting {
    /// The server's pid, to read its peak RSS (VmHWM) from /proc.
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// The object store's pid (SeaweedFS on this machine), to count its CPU too.
    #[arg(long)]
    pub store_pid: Option<u32>,
    /// The column's name in the table.
    #[arg(long, default_value = "server")]
    pub label: String,
    /// Also write the results here (for `table`).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Serialize, Deserialize, Default)]
pub struct Report {
    pub label: String,
    pub url: String,
    pub clients: usize,
    pub large_clients: usize,
    /// `/proc/loadavg` before the run.
    pub load_before: String,
    pub phases: Vec<Phase>,
    pub storm: Option<Storm>,
    /// The server's VmHWM after the throughput phases, and after the storm.
    pub peak_rss_mib_phases: Option<f64>,
    pub peak_rss_mib_end: Option<f64>,
}

impl Report {
    /// A report on a run against `url` by `clients` clients, with the load average now.
    pub fn new(reporting: &Reporting, url: &str, clients: usize) -> Report {
        Report {
            label: reporting.label.clone(),
            url: url.to_owned(),
            clients,
            load_before: std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_owned(),
            ..Report::default()
        }
    }
}

pub fn ms(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.2} s", v / 1000.0)
    } else if v < 10.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.0} ms")
    }
}

pub fn cell(p: &Phase) -> String {
    let rate = if p.per_second >= 100.0 { format!("{:.0}", p.per_second) } else { format!("{:.1}", p.per_second) };
    let store = p.store_cpu_ms_per_ok.map(|c| format!(" + store {}", ms(c))).unwrap_or_default();
    let cpu =
        p.server_cpu_ms_per_ok.map(|c| format!(" · CPU per request: server {}{store}", ms(c))).unwrap_or_default();
    format!("{rate}/s · p50 {} · p99 {}{cpu} ({} ok)", ms(p.p50_ms), ms(p.p99_ms), p.ok)
}

pub fn table(reports: &[Report]) -> String {
    let mut out = String::new();
    let header: Vec<&str> = reports.iter().map(|r| r.label.as_str()).collect();
    out.push_str(&format!("| 127.0.0.1 | {} |\n", header.join(" | ")));
    out.push_str(&format!("| --- |{}\n", " --- |".repeat(reports.len())));
    let Some(first) = reports.first() else { return out };
    let phase_of = |r: &Report, name: &str| r.phases.iter().find(|p| p.name == name).map(cell).unwrap_or("—".into());
    let title = |p: &Phase| match p.name.as_str() {
        "small uploads" => format!("uploads/s, small (19 KB `cpu.pb.gz`, distinct), {} clients", p.clients),
        "large uploads" => format!("uploads/s, large (14 MB `cpu.large.pb.gz`, distinct), {} clients", p.clients),
        "raw GETs" => format!("raw GETs/s (small, bytes checked), {} clients", p.clients),
        "diffs" => format!("analysis calls/s (`POST /api/v1/profiling/diff`, two cpu sessions), {} clients", p.clients),
        other => format!("{other}, {} clients", p.clients),
    };
    for p in &first.phases {
        let (name, title) = (&p.name, title(p));
        let cells: Vec<String> = reports.iter().map(|r| phase_of(r, name)).collect();
        out.push_str(&format!("| {title} | {} |\n", cells.join(" | ")));
    }
    let errors: Vec<String> = reports
        .iter()
        .map(|r| {
            let all: Vec<String> = r
                .phases
                .iter()
                .flat_map(|p| p.errors.iter().map(move |(k, n)| format!("{}: {k} ×{n}", p.name)))
                .collect();
            if all.is_empty() {
                "none".into()
            } else {
                all.join(", ")
            }
        })
        .collect();
    out.push_str(&format!("| errors | {} |\n", errors.join(" | ")));
    let rss: Vec<String> = reports
        .iter()
        .map(|r| match (r.peak_rss_mib_phases, r.peak_rss_mib_end) {
            (Some(a), Some(b)) => format!("{a:.0} MiB after the phases, {b:.0} MiB at the end"),
            _ => "—".into(),
        })
        .collect();
    out.push_str(&format!("| server peak RSS (VmHWM) | {} |\n", rss.join(" | ")));
    if reports.iter().all(|r| r.storm.is_none()) {
        return out;
    }
    let storms: Vec<String> = reports
        .iter()
        .map(|r| match &r.storm {
            Some(s) => {
                let errors = if s.errors.is_empty() { String::new() } else { format!("; errors {:?}", s.errors) };
                let store = s.store_cpu_ms_per_upload.map(|c| format!(" + store {}", ms(c))).unwrap_or_default();
                let cpu = s
                    .server_cpu_ms_per_upload
                    .map(|c| format!("; CPU per upload: server {}{store}", ms(c)))
                    .unwrap_or_default();
                format!(
                    "**{} acknowledged / {} read back identical** ({} distinct ids, {} listed); all answered in {:.1} s \
                     (p50 {}, p99 {}){cpu}{errors}",
                    s.acknowledged,
                    s.identical,
                    s.distinct_ids,
                    s.listed,
                    s.upload_wall_seconds,
                    ms(s.p50_ms),
                    ms(s.p99_ms)
                )
            }
            None => "—".into(),
        })
        .collect();
    let count = reports.iter().find_map(|r| r.storm.as_ref().map(|s| s.count)).unwrap_or(0);
    let count = if count >= 1000 { format!("{},{:03}", count / 1000, count % 1000) } else { count.to_string() };
    out.push_str(&format!("| {count} concurrent uploads of distinct profiles | {} |\n", storms.join(" | ")));
    out
}
