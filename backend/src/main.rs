//! The `stacklens` binary: `serve` runs the web server; `open` (or `stacklens FILE…`)
//! serves the page with given profiles, as `go tool pprof -http` does; `top`, `diff`,
//! `list` and `goroutines` analyse profiles on the command line, and `gate` fails a CI
//! job on a regression. All analysis is stacklens-core.

mod api;
mod auth;
mod budget;
mod cli;
mod connections;
mod debuginfod;
mod gate;
mod hyper_errors;
mod intake;
mod lifetime;
mod merging;
mod open;
mod page;
mod querying;
mod records;
mod runs;
mod serve;
mod state;
mod store;
mod symbols;
mod targets;
mod text;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args = cli::Args::from_env();
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("stacklens: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
