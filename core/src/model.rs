//! The one profile model every importer produces, shaped like pprof's `profile.proto`:
//! strings are interned in a [`StringTable`] and entities live in index arenas, so a
//! sample's stack is a slice of `u32` indices rather than a tree of pointers.

use rustc_hash::FxHashMap as HashMap;

mod samples;
pub use samples::{Iter as SamplesIter, SampleRef, Samples};
pub(crate) use samples::{PartWriter, SampleSink, SampleSizes, Unwritten};

/// Index of a string in [`Profile::strings`]. Index 0 is always the empty string.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StrId(pub u32);

/// Index into [`Profile::locations`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LocationId(pub u32);

/// Index into [`Profile::functions`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FunctionId(pub u32);

/// Index into [`Profile::mappings`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MappingId(pub u32);

/// Interned strings. The reverse index is built lazily, so importers that receive a ready
/// table (pprof protobuf) never pay for hashing strings nobody looks up.
#[derive(Clone, Debug)]
pub struct StringTable {
    strings: Vec<String>,
    index: Option<HashMap<String, StrId>>,
}

impl Default for StringTable {
    fn default() -> Self {
        Self { strings: vec![String::new()], index: None }
    }
}

impl StringTable {
    /// Takes a table as stored in a pprof file; guarantees index 0 is "".
    pub fn from_vec(mut strings: Vec<String>) -> Self {
        if strings.first().is_none_or(|s| !s.is_empty()) {
            strings.insert(0, String::new());
        }
        Self { strings, index: None }
    }

    pub fn get(&self, id: StrId) -> &str {
        self.strings.get(id.0 as usize).map_or("", String::as_str)
    }

    pub fn len(&self) -> usize {
        self.strings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.strings.len() <= 1
    }

    pub fn intern(&mut self, s: &str) -> StrId {
        let strings = &self.strings;
        let index = self.index.get_or_insert_with(|| {
            let mut map = HashMap::with_capacity_and_hasher(strings.len(), Default::default());
            for (i, s) in strings.iter().enumerate() {
                map.entry(s.clone()).or_insert(StrId(i as u32));
            }
            map
        });
        if let Some(&id) = index.get(s) {
            return id;
        }
        let id = StrId(self.strings.len() as u32);
        self.strings.push(s.to_owned());
        index.insert(s.to_owned(), id);
        id
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.strings.iter().map(String::as_str)
    }
}

/// A sample or period type, e.g. `cpu`/`nanoseconds`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct ValueType {
    pub kind: StrId,
    pub unit: StrId,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LabelValue {
    Str(StrId),
    Num { value: i64, unit: StrId },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Label {
    pub key: StrId,
    pub value: LabelValue,
}

/// A sample as built by importers; a profile holds its samples flat ([`Samples`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// Leaf first, as in pprof.
    pub locations: Vec<LocationId>,
    /// One value per entry of [`Profile::sample_types`].
    pub values: Vec<i64>,
    pub labels: Vec<Label>,
}

impl Sample {
    pub fn view(&self) -> SampleRef<'_> {
        SampleRef { locations: &self.locations, values: &self.values, labels: &self.labels }
    }
}

/// The stretch of time a sample stands for, in nanoseconds since the profile's time
/// origin (see [`Profile::sample_times`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SampleTime {
    pub start: i64,
    pub duration: i64,
}

impl SampleTime {
    pub fn end(&self) -> i64 {
        self.start.saturating_add(self.duration)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mapping {
    pub id: u64,
    pub memory_start: u64,
    pub memory_limit: u64,
    pub file_offset: u64,
    pub filename: StrId,
    pub build_id: StrId,
    pub has_functions: bool,
    pub has_filenames: bool,
    pub has_line_numbers: bool,
    pub has_inline_frames: bool,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub function: FunctionId,
    pub line: i64,
    pub column: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    pub id: u64,
    pub mapping: Option<MappingId>,
    pub address: u64,
    /// Innermost (inlined callee) first; the last line is the physical caller frame.
    pub lines: Vec<Line>,
    pub is_folded: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Function {
    pub id: u64,
    pub name: StrId,
    pub system_name: StrId,
    pub filename: StrId,
    pub start_line: i64,
}

/// Which importer produced a profile; also what [`crate::import::detect`] names a format
/// an importer reads (`import::Format::Of`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SourceFormat {
    Pprof,
    GoHeapText,
    GoContentionText,
    GoCountText,
    GoGoroutineDump,
    LegacyCpu,
    LegacyHeap,
    Contentionz,
    Threadz,
    JavaText,
    FirefoxProfiler,
    Folded,
    PerfScript,
    PerfData,
    Otlp,
    V8CpuProfile,
    V8HeapProfile,
    ChromeTrace,
    Speedscope,
    Callgrind,
    Pstats,
    Stackprof,
    Ghc,
    Pmcstat,
    Instruments,
    Safari,
    V8Log,
    Jfr,
    Dtrace,
    Vtune,
    VisualStudio,
    MacosSample,
    Dhat,
    Simpleperf,
    ArtTrace,
    Built,
}

impl SourceFormat {
    /// The format's name as people call it.
    pub fn label(self) -> &'static str {
        match self {
            SourceFormat::Pprof => "pprof",
            SourceFormat::GoHeapText => "Go heap profile (debug=1 text)",
            SourceFormat::GoContentionText => "Go contention profile (debug=1 text)",
            SourceFormat::GoCountText => "Go count profile (debug=1 text)",
            SourceFormat::GoGoroutineDump => "Go goroutine dump (debug=2)",
            SourceFormat::LegacyCpu => "gperftools CPU profile",
            SourceFormat::LegacyHeap => "gperftools heap profile",
            SourceFormat::Contentionz => "contentionz text",
            SourceFormat::Threadz => "threadz text",
            SourceFormat::JavaText => "Java legacy text profile",
            SourceFormat::FirefoxProfiler => "Firefox Profiler / samply JSON",
            SourceFormat::Folded => "folded stacks",
            SourceFormat::PerfScript => "Linux perf script",
            SourceFormat::PerfData => "Linux perf.data",
            SourceFormat::Otlp => "OpenTelemetry profiles (OTLP)",
            SourceFormat::V8CpuProfile => "V8 .cpuprofile",
            SourceFormat::V8HeapProfile => "V8 .heapprofile",
            SourceFormat::ChromeTrace => "Chrome trace",
            SourceFormat::Speedscope => "speedscope JSON",
            SourceFormat::Callgrind => "callgrind",
            SourceFormat::Pstats => "Python cProfile .pstats",
            SourceFormat::Stackprof => "Ruby stackprof",
            SourceFormat::Ghc => "GHC -pj profile",
            SourceFormat::Pmcstat => "FreeBSD pmcstat callgraph",
            SourceFormat::Instruments => "Xcode Instruments deep copy",
            SourceFormat::Safari => "Safari timeline recording",
            SourceFormat::V8Log => "V8 --prof tick log",
            SourceFormat::Jfr => "Java Flight Recorder",
            SourceFormat::Dtrace => "DTrace aggregated stacks",
            SourceFormat::Vtune => "Intel VTune CSV",
            SourceFormat::VisualStudio => "Visual Studio profiler CSV",
            SourceFormat::MacosSample => "macOS sample text",
            SourceFormat::Dhat => "valgrind DHAT",
            SourceFormat::Simpleperf => "Android simpleperf",
            SourceFormat::ArtTrace => "Android ART method trace",
            SourceFormat::Built => "built in stacklens",
        }
    }
}

/// `goroutine 17 [chan receive, 12 minutes, locked to thread]:` and what follows it,
/// from a Go `debug=2` dump.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Goroutine {
    pub id: u64,
    /// The bracketed status as Go prints it: a wait reason (`chan send`) or a status
    /// (`runnable`, `running`, `syscall`).
    pub state: StrId,
    pub wait_minutes: Option<u64>,
    pub locked_to_thread: bool,
    /// Leaf first; each location carries one line with the frame's function and file:line.
    pub stack: Vec<LocationId>,
    pub created_by: Option<CreatedBy>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreatedBy {
    pub location: LocationId,
    /// `created by f in goroutine N` (Go 1.21+); absent in older dumps.
    pub parent_goroutine: Option<u64>,
}

#[derive(Clone, Debug)]
pub struct Profile {
    pub strings: StringTable,
    pub sample_types: Vec<ValueType>,
    pub samples: Samples,
    /// When each sample was taken, for formats that record it: either empty, or one
    /// entry per sample (entry `i` is sample `i`'s). Times count from an origin the
    /// importer chooses (the recording's start where the format gives one, else its
    /// first sample) and never go back within a thread. Whatever removes or reorders
    /// samples keeps this in step ([`Profile::retain_samples`]); merging drops it
    /// (summed samples have no one time).
    pub sample_times: Vec<SampleTime>,
    pub mappings: Vec<Mapping>,
    pub locations: Vec<Location>,
    pub functions: Vec<Function>,
    pub drop_frames: StrId,
    pub keep_frames: StrId,
    pub time_nanos: i64,
    pub duration_nanos: i64,
    pub period_type: Option<ValueType>,
    pub period: i64,
    pub comments: Vec<StrId>,
    pub default_sample_type: StrId,
    pub doc_url: StrId,
    /// Per-goroutine records, present only for goroutine dumps.
    pub goroutines: Vec<Goroutine>,
    pub source: SourceFormat,
}

impl Profile {
    pub fn new(source: SourceFormat) -> Self {
        Self {
            strings: StringTable::default(),
            sample_types: Vec::new(),
            samples: Samples::new(),
            sample_times: Vec::new(),
            mappings: Vec::new(),
            locations: Vec::new(),
            functions: Vec::new(),
            drop_frames: StrId(0),
            keep_frames: StrId(0),
            time_nanos: 0,
            duration_nanos: 0,
            period_type: None,
            period: 0,
            comments: Vec::new(),
            default_sample_type: StrId(0),
            doc_url: StrId(0),
            goroutines: Vec::new(),
            source,
        }
    }

    pub fn str(&self, id: StrId) -> &str {
        self.strings.get(id)
    }

    pub fn location(&self, id: LocationId) -> &Location {
        &self.locations[id.0 as usize]
    }

    pub fn function(&self, id: FunctionId) -> &Function {
        &self.functions[id.0 as usize]
    }

    pub fn mapping(&self, id: MappingId) -> &Mapping {
        &self.mappings[id.0 as usize]
    }

    pub fn sample_type_name(&self, index: usize) -> &str {
        self.sample_types.get(index).map_or("", |t| self.str(t.kind))
    }

    pub fn sample_type_unit(&self, index: usize) -> &str {
        self.sample_types.get(index).map_or("", |t| self.str(t.unit))
    }

    /// pprof's default: `default_sample_type` when it names a type, else the last type.
    pub fn default_sample_index(&self) -> usize {
        let wanted = self.str(self.default_sample_type);
        if !wanted.is_empty() {
            if let Some(i) = self.sample_types.iter().position(|t| self.str(t.kind) == wanted) {
                return i;
            }
        }
        self.sample_types.len().saturating_sub(1)
    }

    /// Whether the samples have times (see [`Profile::sample_times`]).
    pub fn has_sample_times(&self) -> bool {
        !self.samples.is_empty() && self.sample_times.len() == self.samples.len()
    }

    /// Keeps the samples for which `keep` says so (it may also edit them), and their
    /// times. Times that were out of step with the samples are dropped.
    pub fn retain_samples(&mut self, mut keep: impl FnMut(&mut Sample) -> bool) {
        let mut times = std::mem::take(&mut self.sample_times).into_iter();
        let in_step = times.len() == self.samples.len();
        let mut kept_times = Vec::with_capacity(times.len());
        // `retain` visits every sample once, in order.
        self.samples.retain(|sample| {
            let time = times.next();
            let kept = keep(sample);
            if kept {
                kept_times.extend(time);
            }
            kept
        });
        if in_step {
            self.sample_times = kept_times;
        }
    }

    /// Sum of `|value|` over samples for one sample type, pprof's "total".
    pub fn total(&self, sample_index: usize) -> i64 {
        self.samples
            .iter()
            .map(|s| s.values.get(sample_index).copied().unwrap_or(0).saturating_abs())
            .fold(0i64, i64::saturating_add)
    }

    /// The display name of the `n`th line of a location: its function, or failing that
    /// the mapping's file base name in brackets, or `<unknown>` (pprof's rules).
    pub fn line_function_name(&self, line: &Line) -> &str {
        self.str(self.function(line.function).name)
    }

    /// pprof's label for a location that has no function information.
    pub fn unsymbolized_name(&self, location: &Location) -> String {
        match location.mapping.map(|m| self.str(self.mapping(m).filename)) {
            Some(file) if !file.is_empty() => {
                let base = file.rsplit(['/', '\\']).next().unwrap_or(file);
                format!("[{base}]")
            }
            _ => "<unknown>".to_owned(),
        }
    }

    /// Adds a function, interning its strings.
    pub fn add_function(&mut self, name: &str, system_name: &str, filename: &str, start_line: i64) -> FunctionId {
        let id = FunctionId(self.functions.len() as u32);
        let function = Function {
            id: u64::from(id.0) + 1,
            name: self.strings.intern(name),
            system_name: self.strings.intern(system_name),
            filename: self.strings.intern(filename),
            start_line,
        };
        self.functions.push(function);
        id
    }

    /// Adds a location; pprof ids are 1-based positions for locations we build.
    pub fn add_location(&mut self, address: u64, lines: Vec<Line>) -> LocationId {
        let id = LocationId(self.locations.len() as u32);
        self.locations.push(Location { id: u64::from(id.0) + 1, mapping: None, address, lines, is_folded: false });
        id
    }

    /// Adds a mapping known only by its file (a module or shared object that frames
    /// name), whose frames have functions.
    pub fn add_module_mapping(&mut self, filename: &str) -> MappingId {
        let id = MappingId(self.mappings.len() as u32);
        let filename = self.strings.intern(filename);
        self.mappings.push(Mapping { id: u64::from(id.0) + 1, filename, has_functions: true, ..Mapping::default() });
        id
    }

    pub fn value_type(&mut self, kind: &str, unit: &str) -> ValueType {
        ValueType { kind: self.strings.intern(kind), unit: self.strings.intern(unit) }
    }
}
