//! `--symbols PATH` and `--debuginfod URL` (and `$PPROF_BINARY_PATH`, `$DEBUGINFOD_URLS`):
//! where the command line finds the binaries, debug files and Breakpad `.sym` files that
//! name a profile's addresses. Files are read whole with plain reads (no mmap: no unsafe,
//! and one file at a time is held), a `.sym` file line by line; debuginfod answers are
//! cached on disk, misses for an hour.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use stacklens_core::symbols::{
    self, breakpad_id, BreakpadSymbols, Found, Role, SymbolError, SymbolFile, SymbolFiles, Wanted,
};
use stacklens_core::Profile;

use crate::debuginfod::{fetch, Bounds};
use crate::records::debuginfo::{Artifact, BuildId};

/// Where symbols come from, as flags shared by every command that reads profiles.
#[derive(clap::Args, Clone, Default)]
pub(crate) struct SymbolArgs {
    /// A binary, a debug file, a Breakpad `.sym` file, kallsyms (`/proc/kallsyms` or a
    /// copy of it, for the kernel's frames), or a folder searched by file name, build id
    /// (`.build-id/ab/cdef….debug`), debug link, `.sym` name (`NAME.sym`,
    /// `NAME/DEBUGID/NAME.sym`) and `kallsyms`; repeatable. `$PPROF_BINARY_PATH`
    /// (`:`-separated) is searched after these.
    #[arg(long = "symbols", value_name = "PATH")]
    symbols: Vec<PathBuf>,
    /// A debuginfod server to ask by build id; repeatable. `$DEBUGINFOD_URLS`
    /// (space-separated) is asked after these.
    #[arg(long = "debuginfod", value_name = "URL")]
    debuginfod: Vec<String>,
}

/// kallsyms' name in a folder, as `/proc/kallsyms` is copied.
const KALLSYMS: &str = "kallsyms";

/// How long a debuginfod server may take, how much it may send, and how long a miss
/// is remembered.
const DEBUGINFOD_TIMEOUT: Duration = Duration::from_secs(30);
const DEBUGINFOD_MAX_BYTES: usize = 4 << 30;
const MISS_KEPT: Duration = Duration::from_secs(3600);

impl SymbolArgs {
    /// Symbolizes `profile` when any source of symbols is given (flags or environment),
    /// printing each mapping's outcome to standard error; whether one was given.
    pub(crate) fn apply(&self, profile: &mut Profile) -> bool {
        let mut files = LocalFiles::new(self);
        if files.paths.is_empty() && files.servers.is_empty() {
            return false;
        }
        for report in profile.symbolize(&mut files) {
            eprintln!("stacklens: symbols: {}", super::common::for_terminal(&report.to_string()));
        }
        true
    }
}

/// Symbol files from folders and files on this machine, then debuginfod servers.
struct LocalFiles {
    paths: Vec<PathBuf>,
    servers: Vec<String>,
}

impl LocalFiles {
    fn new(args: &SymbolArgs) -> Self {
        let mut paths = args.symbols.clone();
        if let Some(env) = std::env::var_os("PPROF_BINARY_PATH") {
            paths.extend(std::env::split_paths(&env).filter(|p| !p.as_os_str().is_empty()));
        }
        let mut servers = args.debuginfod.clone();
        if let Ok(env) = std::env::var("DEBUGINFOD_URLS") {
            servers.extend(env.split_whitespace().map(str::to_owned));
        }
        Self { paths, servers }
    }

    /// Local candidates, in pprof's and gdb's order.
    fn candidates(&self, wanted: &Wanted) -> Vec<PathBuf> {
        let mapped = Path::new(&wanted.file_name);
        let base = mapped.file_name().map(PathBuf::from).unwrap_or_default();
        let id = wanted.build_id.as_deref().filter(|id| id.len() > 2);
        let mut out = Vec::new();
        for path in &self.paths {
            if !path.is_dir() {
                out.push(path.clone());
                continue;
            }
            match wanted.role {
                Role::Binary => {
                    if let Some(id) = id {
                        out.push(path.join(id).join(&base));
                    }
                    out.push(path.join(&base));
                    let sym = sym_name(&base);
                    if let Some(debug_id) = id.and_then(breakpad_id::bytes_of_hex).map(|b| breakpad_id::of_build_id(&b))
                    {
                        out.push(path.join(&base).join(debug_id).join(&sym));
                    }
                    out.push(path.join(sym));
                }
                Role::DebugFile => {
                    if let Some(id) = id {
                        out.push(path.join(format!(".build-id/{}/{}.debug", &id[..2], &id[2..])));
                        out.push(path.join(format!("{}/{}.debug", &id[..2], &id[2..])));
                    }
                    if let Some(link) = &wanted.debug_link {
                        out.extend([path.join(link), path.join(".debug").join(link)]);
                    }
                    out.push(dsym(path, &base));
                }
                Role::Kernel => out.push(path.join(KALLSYMS)),
            }
        }
        // The mapping's own file, where it still is (pprof's last resort), and gdb's
        // places for a debug link beside it.
        match wanted.role {
            Role::Binary => out.push(mapped.to_owned()),
            Role::DebugFile => {
                let dir = mapped.parent().unwrap_or(Path::new("/"));
                if let Some(link) = &wanted.debug_link {
                    let system = Path::new("/usr/lib/debug").join(dir.strip_prefix("/").unwrap_or(dir));
                    out.extend([dir.join(link), dir.join(".debug").join(link), system.join(link)]);
                }
                if let Some(id) = id {
                    out.push(PathBuf::from(format!("/usr/lib/debug/.build-id/{}/{}.debug", &id[..2], &id[2..])));
                }
                out.push(dsym(dir, &base));
            }
            Role::Kernel => {}
        }
        out
    }

    /// Whether a file given by name (not a folder) may be what is wanted.
    fn fits(path: &Path, file: &SymbolFile, wanted: &Wanted) -> bool {
        let same_id = wanted.build_id.is_some() && file.build_id_hex() == wanted.build_id;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let base = Path::new(&wanted.file_name).file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let sym = format!("{base}.sym");
        let same_name = match wanted.role {
            Role::Binary => base == name || sym == name,
            // Its debug link, or `NAME.debug` (`NAME.sym`) for a binary that was not found.
            Role::DebugFile => {
                let named =
                    wanted.debug_link.as_deref() == Some(name) || name == format!("{base}.debug") || sym == name;
                named && file.has_lines()
            }
            Role::Kernel => matches!(file, SymbolFile::Kernel(_)),
        };
        same_id || same_name
    }
}

impl SymbolFiles for LocalFiles {
    fn find(&mut self, wanted: &Wanted) -> Option<Found> {
        // The first file whose build id matches; failing that the first that fits,
        // so that a mismatch or a corrupt file is reported rather than passed over.
        let mut fallback = None;
        for path in self.candidates(wanted) {
            let Some(file) = read_symbol_file(&path) else { continue };
            let shown = path.display().to_string();
            let file = match file {
                Ok(file) => file,
                Err(error) => {
                    fallback.get_or_insert(Found { path: shown, file: Err(error) });
                    continue;
                }
            };
            let given = self.paths.contains(&path);
            if given && !Self::fits(&path, &file, wanted) {
                continue;
            }
            if wanted.role == Role::DebugFile && !file.has_symbols() {
                continue;
            }
            if wanted.build_id.is_none() || file.build_id_hex() == wanted.build_id {
                return Some(Found { path: shown, file: Ok(file) });
            }
            fallback.get_or_insert(Found { path: shown, file: Ok(file) });
        }
        if let Some(found) = wanted.build_id.as_deref().and_then(|id| self.fetch_from_servers(id, wanted.role)) {
            return Some(found);
        }
        fallback
    }
}

impl LocalFiles {
    /// The file with build id `id` from the first debuginfod server that has it.
    fn fetch_from_servers(&self, id: &str, role: Role) -> Option<Found> {
        let artifact = match role {
            Role::Binary => Artifact::Executable,
            Role::DebugFile => Artifact::Debuginfo,
            // debuginfod serves no kallsyms.
            Role::Kernel => return None,
        };
        let kind = artifact.name();
        let cache = cache_dir()?.join(id);
        let cached = cache.join(kind);
        let miss = cache.join(format!("{kind}.miss"));
        if let Ok(bytes) = read_whole(&cached) {
            return Some(Found { path: cached.display().to_string(), file: SymbolFile::from_bytes(bytes) });
        }
        let fresh_miss = std::fs::metadata(&miss)
            .and_then(|m| m.modified())
            .is_ok_and(|t| SystemTime::now().duration_since(t).is_ok_and(|age| age < MISS_KEPT));
        if fresh_miss {
            return None;
        }
        let build_id = BuildId::parse(id)?;
        let bounds = Bounds { timeout: DEBUGINFOD_TIMEOUT, limit: DEBUGINFOD_MAX_BYTES };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
        let http = reqwest::Client::new();
        for server in &self.servers {
            let fetched = runtime.block_on(fetch(&http, server, (&build_id, artifact), bounds, None));
            match fetched {
                Ok(Some((bytes, _))) => {
                    // The cache is a convenience: a failed write only costs a refetch.
                    let _ = std::fs::create_dir_all(&cache).and_then(|()| std::fs::write(&cached, &bytes));
                    let url = format!("{}/buildid/{id}/{artifact}", server.trim_end_matches('/'));
                    return Some(Found { path: url, file: SymbolFile::parse(&bytes[..]) });
                }
                Ok(None) => {}
                Err(reason) => eprintln!("stacklens: symbols: {reason}"),
            }
        }
        let _ = std::fs::create_dir_all(&cache).and_then(|()| std::fs::write(&miss, b""));
        None
    }
}

/// The symbol file at `path`, unless there is no file there: a Breakpad `.sym` file
/// read line by line (only its tables are held, never its text), any other read whole.
fn read_symbol_file(path: &Path) -> Option<Result<SymbolFile, SymbolError>> {
    let file = std::fs::File::open(path).ok().filter(|f| f.metadata().is_ok_and(|m| m.is_file()))?;
    match BreakpadSymbols::read(std::io::BufReader::new(file)) {
        Err(SymbolError::Unrecognized(_)) => Some(SymbolFile::from_bytes(read_whole(path).ok()?)),
        read => Some(read.map(SymbolFile::Breakpad)),
    }
}

/// The file at `path`, read once into memory that its DWARF is then read from in place.
fn read_whole(path: &Path) -> std::io::Result<Arc<[u8]>> {
    let file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    symbols::read_shared(file, len)
}

/// `NAME.sym`, a Breakpad symbol file's name for the module `NAME`.
fn sym_name(name: &Path) -> PathBuf {
    let mut sym = name.as_os_str().to_owned();
    sym.push(".sym");
    PathBuf::from(sym)
}

/// A Mach-O binary's dSYM bundle in `dir`: `NAME.dSYM/Contents/Resources/DWARF/NAME`
/// (its UUID is the build id the debug file is checked against).
fn dsym(dir: &Path, name: &Path) -> PathBuf {
    let mut bundle = name.as_os_str().to_owned();
    bundle.push(".dSYM");
    dir.join(bundle).join("Contents/Resources/DWARF").join(name)
}

/// `$XDG_CACHE_HOME/stacklens/debuginfod`, else `~/.cache/stacklens/debuginfod`.
fn cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
    Some(base.join("stacklens/debuginfod"))
}
