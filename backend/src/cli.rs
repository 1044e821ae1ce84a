//! Command-line parsing and the analysis subcommands.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use stacklens_core::analysis::diff::{diff, diff_top, DiffOptions};
use stacklens_core::analysis::frames::use_raw_names;
use stacklens_core::analysis::goroutines::{analyze, compare, GoroutineOptions};
use stacklens_core::analysis::graph::{call_graph, GraphOptions};
use stacklens_core::analysis::sanitize::SanitizeOptions;
use stacklens_core::analysis::source::{source, SourceOptions};
use stacklens_core::analysis::tags::label_summary;
use stacklens_core::analysis::top::{top, TopOptions};
use stacklens_core::analysis::{Filters, Granularity, Prepared, Query, SampleType};
use stacklens_core::export::{export, ExportFormat};
use stacklens_core::report::dot::dot;
use stacklens_core::report::list::list;
use stacklens_core::report::tags::tags;

use crate::open::Opened;

pub(crate) mod common;
mod compact;
mod open;
pub(crate) mod symbols;
use crate::text;
use common::{for_terminal, load_merged, print_json, read_source, write_output, CliError};
use symbols::SymbolArgs;

#[derive(Parser)]
#[command(
    name = "stacklens",
    // Says whether the page is built in (build.rs).
    version = env!("STACKLENS_VERSION"),
    about = "Profile analyzer: pprof-exact numbers, flame graphs, diffs and goroutine analysis",
    after_help = "`stacklens FILE|URL…` is short for `stacklens open FILE|URL…`."
)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

impl Args {
    /// The command line, where `stacklens FILE|URL…` means `stacklens open FILE|URL…`.
    pub fn from_env() -> Args {
        Args::parse_from(open_implied(std::env::args_os().collect()))
    }
}

/// `argv` with `open` inserted when its first argument is no subcommand or option but
/// a URL or a file: one that exists, or a name with a `.` or `/` (so a missing file is
/// reported as such). A mistyped subcommand stays clap's error.
fn open_implied(mut argv: Vec<OsString>) -> Vec<OsString> {
    let Some(first) = argv.get(1) else { return argv };
    let text = first.to_string_lossy();
    let command = Args::command();
    let subcommand = text == "help" || command.get_subcommands().any(|c| c.get_name() == text);
    let profile = crate::open::is_url(&text) || Path::new(first).exists() || text.contains(['.', '/']);
    if !subcommand && !text.starts_with('-') && profile {
        argv.insert(1, "open".into());
    }
    argv
}

#[derive(Copy, Clone, ValueEnum, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

#[derive(Copy, Clone, ValueEnum, PartialEq, Eq)]
pub enum GraphFormat {
    /// Graphviz DOT in the shape of `go tool pprof -dot` (`dot -Tsvg` draws it).
    Dot,
    Json,
}

/// What every analysis command asks of its profiles (core's [`Query`] as flags): the
/// sample type, the granularity and pprof's filters.
#[derive(clap::Args, Clone)]
struct QueryArgs {
    /// Sample type by name (alloc_space, delay, …) or index; default as pprof.
    #[arg(long)]
    sample_index: Option<String>,
    /// What a row or frame stands for: functions, filefunctions, lines or addresses.
    #[arg(long, default_value = "functions")]
    granularity: Granularity,
    /// Keep only samples with a frame matching this regex.
    #[arg(long)]
    focus: Option<String>,
    /// Drop samples with a frame matching this regex.
    #[arg(long)]
    ignore: Option<String>,
    /// Remove frames matching this regex from stacks.
    #[arg(long)]
    hide: Option<String>,
    /// Keep only frames matching this regex in stacks.
    #[arg(long)]
    show: Option<String>,
    /// Keep only samples with a matching label: KEY=REGEX[,REGEX…], a bare regex that
    /// matches KEY:VALUE, or a numeric range such as bytes=1kb:4kb, 64kb: or :1mb.
    #[arg(long)]
    tagfocus: Option<String>,
    /// Drop samples with a matching label (written as for --tagfocus).
    #[arg(long)]
    tagignore: Option<String>,
    /// Show only the label keys matching this regex in tag reports.
    #[arg(long)]
    tagshow: Option<String>,
    /// Leave the label keys matching this regex out of tag reports.
    #[arg(long)]
    taghide: Option<String>,
    /// Add frames for these label keys' values at the root of each stack (comma-separated; the first is outermost).
    #[arg(long, value_delimiter = ',')]
    tagroot: Vec<String>,
    /// Add frames for these label keys' values at the leaf of each stack (comma-separated; the last is innermost).
    #[arg(long, value_delimiter = ',')]
    tagleaf: Vec<String>,
}

impl QueryArgs {
    fn query(&self) -> Query {
        let filters = Filters {
            focus: self.focus.clone(),
            ignore: self.ignore.clone(),
            hide: self.hide.clone(),
            show: self.show.clone(),
            tag_focus: self.tagfocus.clone(),
            tag_ignore: self.tagignore.clone(),
            tag_show: self.tagshow.clone(),
            tag_hide: self.taghide.clone(),
            tag_root: self.tagroot.clone(),
            tag_leaf: self.tagleaf.clone(),
        };
        let sample = SampleType::parse(self.sample_index.as_deref().unwrap_or_default());
        Query { sample, granularity: self.granularity, filters, ..Query::default() }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Serve the page and the API.
    Serve(crate::serve::ServeArgs),
    /// Open profiles in the page, served from memory on this machine, like `go tool pprof -http`.
    Open {
        /// Profiles: files, or http(s) URLs fetched once at start, within their seconds= and
        /// 30 s (http://host:6060/debug/pprof/profile?seconds=5).
        #[arg(required = true, value_name = "FILE|URL")]
        sources: Vec<OsString>,
        /// Address to listen on (port 0: a free one).
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
        /// Print the page's address but start no browser.
        #[arg(long)]
        no_browser: bool,
        /// The built page (Trunk's output) [default: the page built into this binary, else ./dist].
        #[arg(long)]
        dist: Option<PathBuf>,
        #[command(flatten)]
        symbols: SymbolArgs,
    },
    /// Top functions by flat (or cum) value, like `go tool pprof -top`.
    Top {
        /// Profiles ("-" reads standard input); several are merged as `go tool pprof A B…` merges them (the same sample
        /// types, values of equal samples summed).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Show the difference against this base profile, several merged (pprof -diff_base). It takes
        /// the names up to the next option: put FILE before it, or end the list with --.
        #[arg(long, num_args = 1.., value_name = "BASE")]
        diff_base: Vec<PathBuf>,
        #[command(flatten)]
        query: QueryArgs,
        #[command(flatten)]
        symbols: SymbolArgs,
        /// Show at most N rows (all by default).
        #[arg(long)]
        nodecount: Option<usize>,
        /// Drop rows whose |cum| is below this share of the total (pprof uses 0.005).
        #[arg(long, default_value_t = 0.0)]
        nodefraction: f64,
        /// Sort by cumulative value.
        #[arg(long)]
        cum: bool,
        /// Name functions by their raw symbols (mangled, as the binary has them).
        #[arg(long)]
        raw_names: bool,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// Source lines of the functions REGEX matches with their values, like `go tool pprof -list`.
    List {
        regex: String,
        /// Profiles; several are merged as `go tool pprof A B…` merges them (the same sample
        /// types, values of equal samples summed).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Folders (`:`-separated) to look for source files in, as pprof's -source_path;
        /// the current folder by default. A file is also looked for under shorter ends of its name.
        #[arg(long)]
        source_dir: Option<String>,
        /// Prefixes (`:`-separated) to remove from the profile's file names, as pprof's -trim_path.
        #[arg(long, default_value = "")]
        trim_path: String,
        #[command(flatten)]
        query: QueryArgs,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// The call graph, pruned like `go tool pprof -dot`.
    Graph {
        /// Profiles; several are merged as `go tool pprof A B…` merges them (the same sample
        /// types, values of equal samples summed).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        #[command(flatten)]
        query: QueryArgs,
        /// Keep only the samples through this node (a function, at the default granularity).
        #[arg(long)]
        focus_node: Option<String>,
        /// Show at most N nodes (0 for all).
        #[arg(long, default_value_t = 80)]
        nodecount: usize,
        /// Drop nodes whose |cum| is below this share of the total.
        #[arg(long, default_value_t = 0.005)]
        nodefraction: f64,
        /// Drop edges whose |weight| is below this share of the total.
        #[arg(long, default_value_t = 0.001)]
        edgefraction: f64,
        #[arg(long, value_enum, default_value = "dot")]
        format: GraphFormat,
    },
    /// Regressions and improvements between two profiles of the same type.
    ///
    /// `diff BASE NEW`, or `diff --base FILE… --new FILE…` for several runs a side, each side
    /// merged as `go tool pprof A B…` merges them.
    Diff {
        /// The base profile.
        base: Option<PathBuf>,
        /// The new profile, compared with the base.
        new: Option<PathBuf>,
        /// The base runs, merged (instead of BASE NEW, with --new).
        #[arg(long = "base", num_args = 1.., value_name = "FILE")]
        base_runs: Vec<PathBuf>,
        /// The new runs, merged (instead of BASE NEW, with --base).
        #[arg(long = "new", num_args = 1.., value_name = "FILE")]
        new_runs: Vec<PathBuf>,
        #[command(flatten)]
        query: QueryArgs,
        #[command(flatten)]
        symbols: SymbolArgs,
        /// Scale the new profile to the base's total before subtracting (pprof -normalize).
        #[arg(long)]
        normalize: bool,
        /// Changes below this % of the base total count as unchanged.
        #[arg(long, default_value_t = 1.0)]
        noise_threshold: f64,
        /// Exit with status 1 when a function's self (flat) value grew by more than this % of the base total.
        #[arg(long)]
        fail_on_regression: Option<f64>,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// Write a profile (several are merged, as pprof does) as pprof, folded stacks, speedscope JSON, or a standalone SVG or HTML flame graph.
    Convert {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Where to write ("-" for standard output).
        #[arg(short, long)]
        output: PathBuf,
        /// The output format; by default from OUTPUT's name (.pb.gz, .folded, .speedscope.json, .svg, .html).
        #[arg(long)]
        to: Option<ExportFormat>,
        /// The sample type folded stacks carry, and that pprof and speedscope open first.
        #[command(flatten)]
        query: QueryArgs,
        #[command(flatten)]
        symbols: SymbolArgs,
        /// How frames are named in folded and speedscope output.
        /// Name functions by their raw symbols (mangled, as the binary has them).
        #[arg(long)]
        raw_names: bool,
    },
    /// Run one compaction pass over a server's store and exit, as each server replica does
    /// every minute: every closed hour of every service's profiles gets its block, and
    /// hours that changed get theirs again. Safe beside running servers.
    Compact {
        /// The store, as `serve --store` takes it (file://, s3://, gs://, az://, a folder).
        #[arg(long, default_value = "./data")]
        store: String,
        /// Memory for parsing and merging at once, e.g. 2GiB (default: a quarter of RAM).
        #[arg(long, value_parser = crate::serve::parse_size)]
        memory_budget: Option<usize>,
    },
    /// Make every closed hour's block of a server's store again from the raw profiles
    /// still kept (after an upgrade, or to repair), then exit.
    Reindex {
        /// The store, as `serve --store` takes it.
        #[arg(long, default_value = "./data")]
        store: String,
        /// Memory for parsing and merging at once, e.g. 2GiB (default: a quarter of RAM).
        #[arg(long, value_parser = crate::serve::parse_size)]
        memory_budget: Option<usize>,
    },
    /// Name a profile's addresses from binaries, debug files and debuginfod, and write it
    /// as pprof; each mapping's outcome is printed to standard error.
    Symbolize {
        /// The profile ("-" reads standard input).
        input: PathBuf,
        /// Where to write the symbolized pprof ("-" for standard output).
        #[arg(short, long)]
        output: PathBuf,
        #[command(flatten)]
        symbols: SymbolArgs,
    },
    /// Write a copy of a profile without what it gives away, for sharing: file paths,
    /// build ids, comments, labels, function names. Totals and stacks stay the same.
    Sanitize {
        input: PathBuf,
        /// Where to write the sanitized pprof ("-" for standard output).
        #[arg(short, long)]
        output: PathBuf,
        /// What to remove, comma-separated: paths (or basenames), buildids, comments,
        /// labels (all) or labels=KEY,KEY…
        #[arg(long, default_value = "")]
        strip: String,
        /// Function names this regex matches become redacted-HASH (the same name, the same hash).
        #[arg(long, value_name = "REGEX")]
        redact: Option<String>,
    },
    /// Label keys with each value's total and share, like `go tool pprof -tags`.
    Tags {
        /// Profiles; several are merged as `go tool pprof A B…` merges them (the same sample
        /// types, values of equal samples summed).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        #[command(flatten)]
        query: QueryArgs,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// Fail a CI job on a regression: each function's and package's share of the total,
    /// over several runs a side, tested for a change beyond run-to-run noise.
    ///
    /// Exit status 1 when a function or package regressed: its median share grew by at
    /// least the minimum effect with a Mann–Whitney p-value at most alpha across runs and,
    /// when samples are counted, a sampling p-value at most alpha on the pooled samples,
    /// both Holm-corrected over the names tested (see --config). Exit status 6 when the
    /// runs are too few for a regression to survive that correction, or to reach alpha at
    /// all (the message says how many are needed). Give 10 runs a side (at the default
    /// alpha, 0.01), base and change captured alternately.
    Gate(crate::gate::GateArgs),
    /// Goroutine counts by state, grouped stacks, blocked goroutines and growth.
    Goroutines {
        /// Goroutine dumps or profiles; several are merged (their goroutines counted together).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// A later snapshot, several merged: report new stacks and growth. It takes the names up to
        /// the next option: put FILE before it, or end the list with --.
        #[arg(long, num_args = 1.., value_name = "LATER")]
        compare: Vec<PathBuf>,
        /// Keep only groups whose frames, state or creator contain this text.
        #[arg(long)]
        filter: Option<String>,
        /// Show at most N groups.
        #[arg(long)]
        max_stacks: Option<usize>,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
}

/// `diff`'s two sides: `BASE NEW`, or `--base FILE… --new FILE…`.
fn diff_sides(
    base: Option<PathBuf>,
    new: Option<PathBuf>,
    base_runs: Vec<PathBuf>,
    new_runs: Vec<PathBuf>,
) -> Result<(Vec<PathBuf>, Vec<PathBuf>), CliError> {
    let runs = !base_runs.is_empty() || !new_runs.is_empty();
    match (base, new) {
        (Some(base), Some(new)) if !runs => Ok((vec![base], vec![new])),
        (None, None) if !base_runs.is_empty() && !new_runs.is_empty() => Ok((base_runs, new_runs)),
        (Some(_), _) if runs => Err(CliError::Usage(
            "diff takes BASE NEW or --base FILE… --new FILE…, not both (options that take several files \
             take the names up to the next option)"
                .into(),
        )),
        _ => Err(CliError::Usage(
            "diff needs two sides: BASE NEW, or --base FILE… --new FILE… (several runs a side, merged)".into(),
        )),
    }
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    match args.command {
        Command::Serve(serve) => {
            crate::serve::run(serve, Opened::default(), |_| ()).map_err(|e| CliError::Serve(e.to_string()))?
        }
        Command::Open { sources, listen, no_browser, dist, symbols } => {
            open::open(&sources, listen, no_browser, dist, &symbols)?
        }
        Command::Gate(gate) => return crate::gate::run(gate),
        Command::Top { files, diff_base, query, symbols, nodecount, nodefraction, cum, raw_names, format } => {
            let load = |files: &[PathBuf]| {
                let mut profile = load_merged(files)?;
                symbols.apply(&mut profile);
                if raw_names {
                    use_raw_names(&mut profile);
                }
                Ok::<_, CliError>(profile)
            };
            let (profile, query) = (load(&files)?, query.query());
            let options = TopOptions { cum, node_count: nodecount, node_fraction: nodefraction };
            let report = if diff_base.is_empty() {
                top(&query.prepare(&profile)?, &options)?
            } else {
                let base = load(&diff_base)?;
                let (base, compare) = query.prepare_pair(&base, &profile)?;
                diff_top(&base, &compare, &options)?
            };
            match format {
                Format::Json => print_json(&report),
                Format::Text => print!("{}", for_terminal(&text::top(&report))),
            }
        }
        Command::List { regex, files, source_dir, trim_path, query, format } => {
            let options = SourceOptions {
                functions: regex,
                trim_path: trim_path.clone(),
                source_path: source_dir.clone().unwrap_or_default(),
            };
            let report = source(&query.query().prepare(&*load_merged(&files)?)?, &options)?;
            match format {
                Format::Json => print_json(&report),
                Format::Text => {
                    // pprof looks in the current folder when given none.
                    let search = match source_dir.filter(|dir| !dir.is_empty()) {
                        Some(dir) => dir,
                        None => std::env::current_dir()
                            .map_err(|source| CliError::Read { path: ".".into(), source })?
                            .to_string_lossy()
                            .into_owned(),
                    };
                    let text = list(&report, |name| read_source(name, &search, &trim_path));
                    print!("{}", for_terminal(&text));
                }
            }
        }
        Command::Graph { files, query, focus_node, nodecount, nodefraction, edgefraction, format } => {
            let profile = load_merged(&files)?;
            let options = GraphOptions {
                node_fraction: nodefraction,
                edge_fraction: edgefraction,
                node_count: Some(nodecount),
                focus_node,
            };
            let graph = call_graph(&query.query().prepare(&profile)?, &options)?;
            match format {
                GraphFormat::Json => print_json(&graph),
                GraphFormat::Dot => print!("{}", for_terminal(&dot(&profile, &graph))),
            }
        }
        Command::Diff {
            base,
            new,
            base_runs,
            new_runs,
            query,
            symbols,
            normalize,
            noise_threshold,
            fail_on_regression,
            format,
        } => {
            let (base, new) = diff_sides(base, new, base_runs, new_runs)?;
            let options = DiffOptions { normalize, noise_threshold_pct: noise_threshold, ..DiffOptions::default() };
            let (mut base, mut new) = (load_merged(&base)?, load_merged(&new)?);
            symbols.apply(&mut base);
            symbols.apply(&mut new);
            let (base, new) = query.query().prepare_pair(&base, &new)?;
            let report = diff(&base, &new, &options)?;
            match format {
                Format::Json => print_json(&report),
                Format::Text => print!("{}", for_terminal(&text::diff(&report))),
            }
            if let Some(limit) = fail_on_regression {
                if let Some(worst) = report.regressions.iter().find(|r| r.flat_delta_pct > limit) {
                    eprintln!(
                        "stacklens: regression: {} grew by {:.2}% of the base total (limit {limit}%)",
                        for_terminal(&worst.name),
                        worst.flat_delta_pct
                    );
                    return Ok(ExitCode::from(1));
                }
            }
        }
        Command::Convert { files, output, to, query, symbols, raw_names } => {
            let format = match to.or_else(|| ExportFormat::from_file_name(&output.to_string_lossy())) {
                Some(format) => format,
                None => {
                    return Err(CliError::Usage(format!(
                        "cannot tell the output format from '{}': name it .pb.gz, .folded, .speedscope.json, .svg or .html, or pass --to",
                        output.display()
                    )))
                }
            };
            let mut profile = load_merged(&files)?;
            symbols.apply(&mut profile);
            if raw_names {
                use_raw_names(&mut profile);
            }
            write_output(&output, &export(&query.query().prepare(&profile)?, format)?)?;
        }
        Command::Compact { store, memory_budget } => compact::compact(&store, memory_budget, false)?,
        Command::Reindex { store, memory_budget } => compact::compact(&store, memory_budget, true)?,
        Command::Symbolize { input, output, symbols } => {
            let mut profile = load_merged(std::slice::from_ref(&input))?;
            symbols.apply(&mut profile);
            write_output(&output, &export(&Prepared::whole(&profile)?, ExportFormat::Pprof)?)?;
        }
        Command::Sanitize { input, output, strip, redact } => {
            let options = SanitizeOptions { redact, ..SanitizeOptions::strip(&strip).map_err(CliError::Usage)? };
            if !options.removes_anything() {
                return Err(CliError::Usage("nothing to remove: pass --strip or --redact".into()));
            }
            let clean = load_merged(std::slice::from_ref(&input))?.sanitize(&options)?;
            write_output(&output, &export(&Prepared::whole(&clean)?, ExportFormat::Pprof)?)?;
        }
        Command::Tags { files, query, format } => {
            let summary = label_summary(&query.query().prepare(&*load_merged(&files)?)?)?;
            match format {
                Format::Json => print_json(&summary),
                Format::Text => print!("{}", for_terminal(&tags(&summary))),
            }
        }
        Command::Goroutines { files, compare: later, filter, max_stacks, format } => {
            let profile = load_merged(&files)?;
            let report = analyze(&profile, &GoroutineOptions { filter, max_stacks })?;
            let comparison = if later.is_empty() { None } else { Some(compare(&profile, &*load_merged(&later)?)?) };
            match format {
                Format::Json => {
                    let mut value = serde_json::to_value(&report).expect("reports serialize");
                    if let (Some(c), Some(obj)) = (&comparison, value.as_object_mut()) {
                        let c = serde_json::to_value(c).expect("reports serialize");
                        for key in [
                            "newStacks",
                            "growthCount",
                            "goroutineGrowthRate",
                            "grownStacks",
                            "baseCount",
                            "compareCount",
                        ] {
                            obj.insert(key.to_owned(), c[key].clone());
                        }
                    }
                    print_json(&value);
                }
                Format::Text => print!("{}", for_terminal(&text::goroutines(&report, comparison.as_ref()))),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
