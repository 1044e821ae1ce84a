//! Symbolizing a profile: for each mapping whose locations have no lines, the caller's
//! [`SymbolFiles`] hands in its binary and debug file, or a Breakpad `.sym` file (core
//! does no I/O), each address is turned into the file's terms as pprof and perf do
//! (mapping start, limit and file offset, then the `PT_LOAD` segment holding that
//! offset; for a `.sym` file the module offset) and looked up; the location keeps its
//! address and mapping and gains lines, innermost inlined first. The kernel's mappings
//! (`[kernel.kallsyms]` and its modules) are named from kallsyms, whose addresses are
//! the kernel's own.

use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;

use super::{AddressLookup, BreakpadSymbols, KernelSymbols, ObjectFile, SymbolError, SymbolFile};
use crate::import::demangle::add_native_function;
use crate::model::{FunctionId, Line, LocationId, Mapping, MappingId, Profile, SourceFormat, StrId};

/// What a mapping needs: its binary first, then (when the binary has no DWARF) its
/// debug file, found by build id or by the binary's `.gnu_debuglink`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// The mapping's file as the profile names it (a path on the profiled host).
    pub file_name: String,
    /// Lowercase hex: the mapping's, else the binary's once it was found.
    pub build_id: Option<String>,
    /// The binary's `.gnu_debuglink`, when asking for its debug file.
    pub debug_link: Option<String>,
    pub role: Role,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    Binary,
    DebugFile,
    /// The kernel's symbols: a kallsyms file.
    Kernel,
}

/// The kernel's mapping as perf names it.
const KERNEL: &str = "[kernel.kallsyms]";
/// Where the kernel's half of the address space begins (x86-64, arm64 and the other
/// 64-bit ports put the kernel in the top half).
const KERNEL_HALF: u64 = 1 << 63;

/// A file the caller found for a [`Wanted`], parsed by the caller (from bytes or a
/// `ReadCache`) with [`SymbolFile::parse`].
pub struct Found {
    /// How the report names the file (a path, a debuginfod URL).
    pub path: String,
    pub file: Result<SymbolFile, SymbolError>,
}

/// Where symbol files come from: folders, debuginfod, dropped files, a store.
pub trait SymbolFiles {
    fn find(&mut self, wanted: &Wanted) -> Option<Found>;
}

/// What happened to one mapping.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MappingReport {
    pub file_name: String,
    pub build_id: Option<String>,
    pub outcome: Outcome,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Outcome {
    /// `locations` of the mapping gained lines, named from `file` (and `debug_file`).
    Symbolized { file: String, debug_file: Option<String>, locations: usize },
    /// No file was found; `build_id` is what was looked for.
    NotFound { build_id: Option<String> },
    /// `file` has build id `found`, not the `wanted` one, and was not used.
    BuildIdMismatch { file: String, wanted: String, found: String },
    /// `file` is kallsyms of another boot or kernel: its `_text` is not where the
    /// recording's kernel had it (a KASLR offset differs), so it was not used.
    OtherKernel { file: String, recorded_text: u64, file_text: u64 },
    /// `file` could not be read.
    Error {
        file: String,
        #[serde(serialize_with = "as_message")]
        error: SymbolError,
    },
}

fn as_message<S: serde::Serializer>(error: &SymbolError, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(error)
}

impl Profile {
    /// Per mapping whose file could name them (a file, or the kernel; not the vdso or
    /// anonymous memory), its locations without lines, in address order (so DWARF units
    /// and line tables are visited once each): what [`Profile::symbolize`] looks up, and
    /// what a caller that fetches files first needs files for.
    pub fn unnamed_locations(&self) -> Vec<(MappingId, Vec<usize>)> {
        let mut by_mapping: Vec<Vec<usize>> = vec![Vec::new(); self.mappings.len()];
        for (l, location) in self.locations.iter().enumerate().filter(|(_, l)| l.lines.is_empty()) {
            if let Some(m) = location.mapping {
                by_mapping[m.0 as usize].push(l);
            }
        }
        by_mapping
            .into_iter()
            .enumerate()
            .filter(|(m, wanting)| {
                let file_name = self.str(self.mappings[*m].filename);
                let file = !file_name.is_empty() && !file_name.starts_with('[');
                !wanting.is_empty() && (file || self.is_kernel_mapping(MappingId(*m as u32), wanting))
            })
            .map(|(m, mut wanting)| {
                wanting.sort_by_key(|&l| self.locations[l].address);
                (MappingId(m as u32), wanting)
            })
            .collect()
    }

    /// Whether mapping `m` is the kernel's: perf's `[kernel.kallsyms]`, or a module
    /// (`[ext4]`) whose unnamed `locations` all lie in the kernel's half.
    fn is_kernel_mapping(&self, m: MappingId, locations: &[usize]) -> bool {
        let name = self.str(self.mappings[m.0 as usize].filename);
        name == KERNEL
            || (name.starts_with('[')
                && name.ends_with(']')
                && locations.iter().all(|&l| self.locations[l].address >= KERNEL_HALF))
    }

    /// Names the addresses of every mapping whose locations have no lines, from the
    /// files `files` finds; one report per such mapping. A file that fails or does
    /// not match leaves its mapping as it was and the others go on.
    pub fn symbolize(&mut self, files: &mut dyn SymbolFiles) -> Vec<MappingReport> {
        let returns = mark_return_addresses(self);
        let mut functions: HashMap<(StrId, StrId), FunctionId> = HashMap::default();
        let mut reports = Vec::new();
        for (m, wanting) in self.unnamed_locations() {
            let m = m.0 as usize;
            let file_name = self.str(self.mappings[m].filename).to_owned();
            let build_id = Some(self.str(self.mappings[m].build_id).to_ascii_lowercase()).filter(|b| !b.is_empty());
            let kernel = self.is_kernel_mapping(MappingId(m as u32), &wanting);
            let mapping = self.mappings[m].clone();
            let opened = open_module(files, &file_name, build_id.clone(), kernel).and_then(|o| o.fits(&mapping));
            let outcome = match opened {
                Err(outcome) => outcome,
                Ok(module) => {
                    let mut named = 0;
                    for &l in &wanting {
                        let address = self.locations[l].address;
                        let Some(probe) = module.address(&mapping, address) else { continue };
                        let probe = if returns[l] { probe.saturating_sub(1) } else { probe };
                        let mut lines = Vec::new();
                        let looked_up = module.names().each_frame(probe, &mut |f| {
                            let file = f.file.unwrap_or_default();
                            let key = (self.strings.intern(f.name), self.strings.intern(file));
                            let function =
                                *functions.entry(key).or_insert_with(|| add_native_function(self, f.name, file, 0));
                            lines.push(Line { function, line: i64::from(f.line), column: 0 });
                        });
                        if looked_up.is_err() {
                            continue;
                        }
                        named += usize::from(!lines.is_empty());
                        let m = &mut self.mappings[m];
                        m.has_functions |= !lines.is_empty();
                        m.has_filenames |= lines
                            .iter()
                            .any(|l| !self.strings.get(self.functions[l.function.0 as usize].filename).is_empty());
                        m.has_line_numbers |= lines.iter().any(|l| l.line > 0);
                        m.has_inline_frames |= lines.len() > 1;
                        self.locations[l].lines = lines;
                    }
                    module.symbolized(named)
                }
            };
            reports.push(MappingReport { file_name, build_id, outcome });
        }
        reports
    }
}

/// What names a mapping's addresses: its binary and debug file, a `.sym` file, or the
/// kernel's kallsyms.
enum Opened {
    Object(Box<Module>),
    Breakpad { symbols: Box<BreakpadSymbols>, path: String },
    Kernel { symbols: Box<KernelSymbols>, path: String },
}

impl Opened {
    /// Itself, unless it cannot name `mapping`: kallsyms whose `_text` is not where the
    /// recording placed it (perf.data keeps that as the kernel mapping's file offset).
    fn fits(self, mapping: &Mapping) -> Result<Self, Outcome> {
        if let Self::Kernel { symbols, path } = &self {
            let recorded = (mapping.memory_start != 0).then_some(mapping.file_offset);
            if let (Some(recorded_text), Some(file_text)) = (recorded, symbols.text_address()) {
                if recorded_text != file_text {
                    return Err(Outcome::OtherKernel { file: path.clone(), recorded_text, file_text });
                }
            }
        }
        Ok(self)
    }

    /// The address in the file's terms of a runtime `address` in `mapping`.
    fn address(&self, mapping: &Mapping, address: u64) -> Option<u64> {
        match self {
            Self::Object(module) => module.address(mapping, address),
            // Breakpad counts from the first loaded segment, where the file's start
            // loads: without the binary's segments, the module offset is taken to be the
            // file offset, as it is for code wherever the linker keeps code's file
            // offsets equal to its distance from that segment (GNU ld's layouts).
            Self::Breakpad { .. } => match in_file(mapping, address)? {
                InFile::Offset(offset) | InFile::Unplaced(offset) => Some(offset),
            },
            // The kernel's addresses are its own.
            Self::Kernel { .. } => Some(address),
        }
    }

    fn names(&self) -> &dyn AddressLookup {
        match self {
            Self::Object(module) => module.names(),
            Self::Breakpad { symbols, .. } => symbols.as_ref(),
            Self::Kernel { symbols, .. } => symbols.as_ref(),
        }
    }

    /// The report once `named` locations gained lines.
    fn symbolized(self, named: usize) -> Outcome {
        match self {
            Self::Object(module) => match *module {
                Module { binary: Some(_), binary_path, debug_path, .. } => {
                    Outcome::Symbolized { file: binary_path, debug_file: debug_path, locations: named }
                }
                Module { binary: None, debug_path, .. } => {
                    Outcome::Symbolized { file: debug_path.unwrap_or_default(), debug_file: None, locations: named }
                }
            },
            Self::Breakpad { path, .. } | Self::Kernel { path, .. } => {
                Outcome::Symbolized { file: path, debug_file: None, locations: named }
            }
        }
    }
}

/// Where a runtime address lies in its mapping's file.
enum InFile {
    /// At this file offset.
    Offset(u64),
    /// The mapping has no placement: the address is relative to the file already, as
    /// `perf script` prints them.
    Unplaced(u64),
}

fn in_file(mapping: &Mapping, address: u64) -> Option<InFile> {
    let no_placement = mapping.memory_start == 0
        && mapping.file_offset == 0
        && (mapping.memory_limit == 0 || mapping.memory_limit == u64::MAX);
    if no_placement {
        return Some(InFile::Unplaced(address));
    }
    if address < mapping.memory_start || (mapping.memory_limit != 0 && address >= mapping.memory_limit) {
        return None;
    }
    Some(InFile::Offset(address - mapping.memory_start + mapping.file_offset))
}

/// A mapping's binary and debug file, as far as they were found.
struct Module {
    binary: Option<ObjectFile>,
    binary_path: String,
    debug: Option<ObjectFile>,
    debug_path: Option<String>,
}

impl Module {
    /// The file that names addresses: the debug file, else the binary.
    fn names(&self) -> &ObjectFile {
        self.debug.as_ref().or(self.binary.as_ref()).expect("a module has a binary or a debug file")
    }

    /// The file whose segments say where file offsets load: the binary, as mapped;
    /// a debug file split off keeps its segments but not their file offsets.
    fn layout(&self) -> &ObjectFile {
        match (&self.binary, &self.debug) {
            (Some(b), _) if b.has_loaded_segments() => b,
            _ => self.names(),
        }
    }

    /// The virtual address in the file of a runtime `address` in `mapping`.
    fn address(&self, mapping: &Mapping, address: u64) -> Option<u64> {
        let layout = self.layout();
        match in_file(mapping, address)? {
            // A file offset when perf had no symbols for the file, the virtual address
            // when it had them for a fixed-address executable. Offsets of such a file
            // lie below its first loaded address, so the two do not meet.
            InFile::Unplaced(address) if layout.fixed_address() && layout.covers_address(address) => Some(address),
            InFile::Unplaced(offset) | InFile::Offset(offset) => layout.file_offset_to_address(offset),
        }
    }
}

/// Finds and checks the binary and debug file of one mapping (the kernel's: its
/// kallsyms); the outcome to report when nothing usable was found.
fn open_module(
    files: &mut dyn SymbolFiles,
    file_name: &str,
    build_id: Option<String>,
    kernel: bool,
) -> Result<Opened, Outcome> {
    let role = if kernel { Role::Kernel } else { Role::Binary };
    let mut wanted = Wanted { file_name: file_name.to_owned(), build_id, debug_link: None, role };
    if kernel {
        // kallsyms has no build id; `Opened::fits` checks where it places `_text`.
        return match files.find(&wanted).map(|found| checked(found, None)).transpose()? {
            Some((SymbolFile::Kernel(symbols), path)) => Ok(Opened::Kernel { symbols: Box::new(symbols), path }),
            Some((_, path)) => Err(Outcome::Error {
                file: path,
                error: SymbolError::Unrecognized("not kallsyms, which names the kernel's addresses".into()),
            }),
            None => Err(Outcome::NotFound { build_id: wanted.build_id }),
        };
    }
    let binary = files.find(&wanted).map(|found| checked(found, wanted.build_id.as_deref())).transpose()?;
    let (binary, binary_path) = match binary {
        Some((SymbolFile::Breakpad(symbols), path)) => {
            return Ok(Opened::Breakpad { symbols: Box::new(symbols), path })
        }
        Some((SymbolFile::Object(file), path)) => (Some(file), path),
        Some((SymbolFile::Kernel(_), path)) => return Err(kallsyms_for_a_file(path)),
        None => (None, String::new()),
    };
    if binary.as_ref().is_some_and(ObjectFile::has_dwarf) {
        return Ok(Opened::Object(Box::new(Module { binary, binary_path, debug: None, debug_path: None })));
    }
    if let Some(b) = &binary {
        wanted.build_id = wanted.build_id.or_else(|| b.build_id_hex());
        wanted.debug_link = b.debug_link().map(str::to_owned);
    }
    wanted.role = Role::DebugFile;
    let debug = match files.find(&wanted) {
        Some(found) => Some(checked(found, wanted.build_id.as_deref())?),
        None => None,
    };
    match (binary, debug) {
        (_, Some((SymbolFile::Breakpad(symbols), path))) => Ok(Opened::Breakpad { symbols: Box::new(symbols), path }),
        (binary, Some((SymbolFile::Object(debug), path))) => {
            Ok(Opened::Object(Box::new(Module { binary, binary_path, debug: Some(debug), debug_path: Some(path) })))
        }
        (Some(binary), None) if binary.has_symbols() => {
            Ok(Opened::Object(Box::new(Module { binary: Some(binary), binary_path, debug: None, debug_path: None })))
        }
        (_, Some((SymbolFile::Kernel(_), path))) => Err(kallsyms_for_a_file(path)),
        _ => Err(Outcome::NotFound { build_id: wanted.build_id }),
    }
}

/// What a kallsyms file found for a binary's mapping says.
fn kallsyms_for_a_file(path: String) -> Outcome {
    let error = SymbolError::Unrecognized("kallsyms names only the kernel's addresses".into());
    Outcome::Error { file: path, error }
}

/// The file of `found`, unless it failed to parse or has another build id than `wanted`.
fn checked(found: Found, wanted: Option<&str>) -> Result<(SymbolFile, String), Outcome> {
    let file = found.file.map_err(|error| Outcome::Error { file: found.path.clone(), error })?;
    // (wanted, found) in the file's terms: a `.sym` file names its module by debug id.
    let ids = match (&file, wanted) {
        (_, None) => None,
        (SymbolFile::Object(o), Some(wanted)) => o.build_id_hex().map(|id| (wanted.to_owned(), id)),
        (SymbolFile::Breakpad(b), Some(wanted)) => {
            b.debug_id_of_build_id(wanted).map(|id| (id, b.module().debug_id.clone()))
        }
        (SymbolFile::Kernel(_), Some(_)) => None,
    };
    if let Some((wanted, id)) = ids.filter(|(wanted, id)| wanted != id) {
        return Err(Outcome::BuildIdMismatch { file: found.path, wanted, found: id });
    }
    Ok((file, found.path))
}

/// Per location: whether its address is a return address, to look up at address − 1
/// (the call). Only perf's caller frames (`perf script`'s and perf.data's) are: gperftools' importer already
/// subtracted 1 (as pprof does), pprof's own profiles are taken as they are. A location
/// without lines that is both a leaf and a caller is split first: caller frames get a
/// twin at the same address, so each is named for what it is.
fn mark_return_addresses(p: &mut Profile) -> Vec<bool> {
    if !matches!(p.source, SourceFormat::PerfScript | SourceFormat::PerfData) {
        return vec![false; p.locations.len()];
    }
    let (mut leaves, mut callers) = (vec![false; p.locations.len()], vec![false; p.locations.len()]);
    for sample in p.samples.iter() {
        for (depth, l) in sample.locations.iter().enumerate() {
            let slot = if depth == 0 { &mut leaves } else { &mut callers };
            slot[l.0 as usize] = true;
        }
    }
    let mut twins: HashMap<LocationId, LocationId> = HashMap::default();
    for l in 0..p.locations.len() {
        if leaves[l] && callers[l] && p.locations[l].lines.is_empty() {
            let twin = LocationId(p.locations.len() as u32);
            let mut location = p.locations[l].clone();
            location.id = u64::from(twin.0) + 1;
            p.locations.push(location);
            twins.insert(LocationId(l as u32), twin);
        }
    }
    if !twins.is_empty() {
        p.retain_samples(|sample| {
            for l in sample.locations.iter_mut().skip(1) {
                *l = twins.get(l).copied().unwrap_or(*l);
            }
            true
        });
    }
    let mut returns: Vec<bool> = callers.iter().zip(&leaves).map(|(&c, &leaf)| c && !leaf).collect();
    returns.resize(p.locations.len(), true);
    returns
}

/// How the CLI and the page say what happened to a mapping.
impl std::fmt::Display for MappingReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = &self.file_name;
        match &self.outcome {
            Outcome::Symbolized { file, debug_file, locations } => {
                let debug = debug_file.as_ref().map(|d| format!(" and {d}")).unwrap_or_default();
                write!(f, "{name}: {locations} locations symbolized from {file}{debug}")
            }
            Outcome::NotFound { build_id } => {
                let id = build_id.as_deref().map(|id| format!(" (build id {id})")).unwrap_or_default();
                write!(f, "{name}: no symbol file found{id}")
            }
            Outcome::BuildIdMismatch { file, wanted, found } => {
                write!(f, "{name}: {file} has build id {found}, not {wanted}: not used")
            }
            Outcome::OtherKernel { file, recorded_text, file_text } => write!(
                f,
                "{name}: {file} places _text at {file_text:#x}, the recording at {recorded_text:#x} \
                 (another boot or kernel): not used"
            ),
            Outcome::Error { file, error } => write!(f, "{name}: {file}: {error}"),
        }
    }
}
