//! Binaries, debug files and kallsyms dropped into the page: kept as the browser's blobs (never
//! copied whole, never uploaded), known by build id, debug link and name, and read in
//! slices when a profile's mapping needs them. Each profile is symbolized when it is
//! parsed, and again when a file arrives that its mappings lacked.

use std::cell::RefCell;
use std::ffi::OsStr;
use std::path::Path;

use stacklens_core::symbols::{Found, MappingReport, ReadCache, Role, SymbolError, SymbolFile, SymbolFiles, Wanted};
use stacklens_core::Profile;
use web_sys::Blob;

use super::protocol::{MappingStatus, SymbolFileInfo};
use super::reading::BlobSlices;

/// A dropped file and what names it.
struct Dropped {
    blob: Blob,
    info: SymbolFileInfo,
    /// The file as parsed when it was dropped, until the profiles open then have used
    /// it ([`forget_parsed`]): not parsed a second time for them, not held after.
    parsed: RefCell<Option<SymbolFile>>,
}

thread_local! {
    static DROPPED: RefCell<Vec<Dropped>> = const { RefCell::new(Vec::new()) };
}

/// Reads `blob` as a binary, debug file or `.sym` file, a slice at a time.
fn open(blob: &Blob) -> Result<SymbolFile, SymbolError> {
    let slices = BlobSlices::new(blob).map_err(SymbolError::Unrecognized)?;
    SymbolFile::parse(&ReadCache::new(slices))
}

/// Keeps a dropped binary or debug file for the profiles that need it.
pub fn add(name: &str, blob: &Blob) -> Result<SymbolFileInfo, String> {
    let file = open(blob).map_err(|e| format!("{name}: {e}"))?;
    let info = SymbolFileInfo {
        name: name.to_owned(),
        build_id: file.build_id_hex(),
        debug_link: file.debug_link().map(str::to_owned),
        has_code: file.has_code(),
        has_names: file.has_symbols(),
        kernel: matches!(file, SymbolFile::Kernel(_)),
    };
    let parsed = RefCell::new(Some(file));
    DROPPED.with(|d| d.borrow_mut().push(Dropped { blob: blob.clone(), info: info.clone(), parsed }));
    Ok(info)
}

/// Drops the files kept parsed since they were dropped: later profiles read them again.
pub fn forget_parsed() {
    DROPPED.with(|d| d.borrow().iter().for_each(|dropped| drop(dropped.parsed.take())));
}

/// The dropped files, as core's symbolizer asks for them.
struct DroppedFiles<'a>(&'a [Dropped]);

impl DroppedFiles<'_> {
    /// The file that answers `wanted`: by build id first (a binary for a binary, a debug
    /// file for a debug file, either else), then by the mapping's file name or the
    /// binary's debug link, as pprof and gdb look beside a binary.
    fn pick(&self, wanted: &Wanted) -> Option<&Dropped> {
        let by_id = |d: &&Dropped| wanted.build_id.is_some() && d.info.build_id == wanted.build_id;
        let code_wanted = wanted.role == Role::Binary;
        let by_name = |d: &&Dropped| match wanted.role {
            Role::Binary => Path::new(&wanted.file_name).file_name() == Some(OsStr::new(&d.info.name)),
            Role::DebugFile => wanted.debug_link.as_deref() == Some(d.info.name.as_str()),
            Role::Kernel => d.info.kernel,
        };
        let files = self.0.iter();
        files
            .clone()
            .filter(by_id)
            .find(|d| d.info.has_code == code_wanted)
            .or_else(|| files.clone().find(by_id))
            .or_else(|| {
                // Without a build id to check, a name is all there is (pprof's rule for
                // $PPROF_BINARY_PATH); with one, core refuses a file of another build.
                files.clone().find(by_name)
            })
    }
}

impl SymbolFiles for DroppedFiles<'_> {
    fn find(&mut self, wanted: &Wanted) -> Option<Found> {
        let dropped = self.pick(wanted)?;
        let file = dropped.parsed.take().map_or_else(|| open(&dropped.blob), Ok);
        Some(Found { path: dropped.info.name.clone(), file })
    }
}

/// Names what it can of `profile` with the dropped files; what happened to each
/// mapping that lacked names.
pub fn symbolize(profile: &mut Profile) -> Vec<MappingReport> {
    DROPPED.with(|d| {
        let dropped = d.borrow();
        if dropped.is_empty() {
            return Vec::new();
        }
        profile.symbolize(&mut DroppedFiles(&dropped))
    })
}

/// Each mapping of `profile` with its build id, how many of its locations have names,
/// and what the last symbolization said of it.
pub fn mapping_statuses(profile: &Profile, reports: &[MappingReport]) -> Vec<MappingStatus> {
    let mut counts = vec![(0usize, 0usize); profile.mappings.len()];
    for location in &profile.locations {
        if let Some(m) = location.mapping {
            let (all, named) = &mut counts[m.0 as usize];
            *all += 1;
            *named += usize::from(!location.lines.is_empty());
        }
    }
    profile
        .mappings
        .iter()
        .zip(counts)
        .filter(|(_, (all, _))| *all > 0)
        .map(|(m, (locations, named))| {
            let file = profile.str(m.filename).to_owned();
            let said = reports.iter().find(|r| r.file_name == file).map(ToString::to_string);
            MappingStatus { build_id: profile.str(m.build_id).to_owned(), file, locations, named, said }
        })
        .collect()
}
