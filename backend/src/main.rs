//! The `stacklens` binary: `serve` runs the web server; `top`, `diff`, `list` and `goroutines`
//! analyse profiles on the command line (for CI jobs). All analysis is stacklens-core.

mod api;
mod auth;
mod budget;
mod cli;
mod hyper_errors;
mod intake;
mod records;
mod runs;
mod serve;
mod state;
mod store;
mod targets;
mod text;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Args::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("stacklens: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
