//! `stacklens open`: profiles served to the page from this machine.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;

use stacklens_core::analysis::Prepared;
use stacklens_core::export::{export, ExportFormat};

use super::common::{parse, read, CliError};
use super::symbols::SymbolArgs;
use crate::open::{Opened, Source};

/// `open`: every source is read and parsed before the server starts, so a bad one is
/// reported at once; then the page is served with them until Ctrl-C.
/// With symbols given, each profile is symbolized and served as pprof.
pub(super) fn open(
    sources: &[OsString],
    listen: SocketAddr,
    no_browser: bool,
    dist: Option<PathBuf>,
    symbols: &SymbolArgs,
) -> Result<(), CliError> {
    let mut opened = Opened::default();
    for arg in sources {
        let source = Source::of(arg);
        let (input, bytes) = match source {
            Source::File(path) => (path.display().to_string(), read(path)?.into()),
            Source::Url(url) => {
                // A CPU profile takes its seconds= to answer.
                eprintln!("stacklens: fetching {url}");
                let bytes =
                    crate::open::fetch(url).map_err(|reason| CliError::Fetch { url: url.to_owned(), reason })?;
                (url.to_owned(), bytes)
            }
        };
        let mut profile = parse(&input, &bytes)?;
        let bytes = match symbols.apply(&mut profile) {
            true => export(&Prepared::whole(&profile)?, ExportFormat::Pprof)?.into(),
            false => bytes,
        };
        opened.push(source.name(), bytes);
    }
    let hash = opened.hash();
    let listening = move |address| {
        let url = crate::open::page_url(address, &hash);
        println!("stacklens: serving {} profile(s) until Ctrl-C at\n{url}", sources.len());
        if !no_browser && !crate::open::browse(&url) {
            eprintln!("stacklens: no browser found ($BROWSER, xdg-open or open): open the address above");
        }
    };
    let args = crate::serve::ServeArgs::in_memory(listen, dist);
    crate::serve::run(args, opened, listening).map_err(|e| CliError::Serve(e.to_string()))
}
