//! pprof protobuf (`profile.proto` from google/pprof), decoded by hand into the model
//! (the encoder is [`crate::export::pprof`]).

use rustc_hash::FxHashMap as HashMap;

use super::wire::{self, Fields, Value, WireError, WireType};
use crate::model::{
    Function, FunctionId, Label, LabelValue, Line, Location, LocationId, Mapping, MappingId, PartWriter, Profile,
    SampleSink, SampleSizes, Samples, SourceFormat, StrId, StringTable, Unwritten, ValueType,
};
use crate::{Error, Result};

mod stream;
pub use stream::IncrementalParse;

/// Whether `bytes` start with a tag `profile.proto`'s `Profile` message can have: one of
/// its fields 1..=15 with that field's wire type (length-delimited for messages, strings
/// and packed comments; varint for the numbers). Each such tag is one byte.
pub(crate) fn starts_like_profile(bytes: &[u8]) -> bool {
    let Some(&tag) = bytes.first() else { return false };
    let wire = WireType::of(u64::from(tag));
    match wire::field_number(u64::from(tag)) {
        1..=6 | 11 => wire == Some(WireType::LengthDelimited),
        13 => matches!(wire, Some(WireType::Varint | WireType::LengthDelimited)),
        7..=10 | 12 | 14 | 15 => wire == Some(WireType::Varint),
        _ => false,
    }
}

/// Decodes a pprof protobuf straight into the model: no intermediate structs for the
/// bulk (samples and locations), vectors sized from a first pass over the top-level
/// fields. Wire errors are explained by [`super::pprof_wire::locate_error`], which
/// names the offset and field; this decoder only has to notice them.
pub fn parse(bytes: &[u8], options: &super::ParseOptions, progress: super::Progress<'_>) -> Result<Profile> {
    parse_wire(bytes, options, progress).map_err(|failure| match failure {
        Failure::Model(e) => e,
        Failure::Wire(wire) => {
            let (offset, reason) =
                super::pprof_wire::locate_error(bytes).unwrap_or_else(|| (wire.offset, wire.kind.to_string()));
            Error::Protobuf { offset, reason }
        }
    })
}

/// Why decoding stopped: bytes that are not `profile.proto` on the wire, or a profile
/// the model cannot hold (a dangling id, a wrong number of values).
enum Failure {
    Wire(WireError),
    Model(Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Model(e)
    }
}

impl From<WireError> for Failure {
    fn from(e: WireError) -> Self {
        Failure::Wire(e)
    }
}

type Decoded<T> = std::result::Result<T, Failure>;

/// A scalar field's value: a varint, never a packed list or bytes.
fn scalar(fields: &Fields<'_>, value: &Value<'_>) -> Decoded<u64> {
    match value {
        Value::Varint(v) => Ok(*v),
        _ => Err(fields.unexpected("scalar field with the wrong wire type").into()),
    }
}

/// A message field's bytes.
fn message<'a>(fields: &Fields<'a>, value: &Value<'a>) -> Decoded<Fields<'a>> {
    match value {
        Value::Bytes(body) => Ok(fields.nested(body)),
        _ => Err(fields.unexpected("message field with the wrong wire type").into()),
    }
}

/// A repeated varint field, packed or not: calls `each` for every element.
#[inline]
fn repeated(fields: &Fields<'_>, value: &Value<'_>, each: impl FnMut(u64) -> Decoded<()>) -> Decoded<()> {
    match value {
        Value::Varint(v) => {
            let mut each = each;
            each(*v)
        }
        Value::Bytes(body) => fields.packed(body, Failure::Wire, each),
        Value::Fixed => Err(fields.unexpected("repeated varint field with a fixed-width value").into()),
    }
}

/// Elements in a repeated varint payload.
fn element_count(value: &Value<'_>) -> usize {
    match value {
        Value::Varint(_) => 1,
        Value::Bytes(body) => wire::packed_count(body),
        Value::Fixed => 0,
    }
}

/// A message whose fields 1..=N are all varints (`ValueType`, `Mapping`, `Function`,
/// `Line`, `Label`), merged into `into` as protobuf merges a repeated singular message.
fn scalars<const N: usize>(mut fields: Fields<'_>, into: &mut [u64; N]) -> Decoded<()> {
    while let Some(item) = fields.next() {
        let (field, value) = item?;
        if (1..=N as u32).contains(&field) {
            into[field as usize - 1] = scalar(&fields, &value)?;
        }
    }
    Ok(())
}

fn read_scalars<const N: usize>(fields: Fields<'_>) -> Decoded<[u64; N]> {
    let mut values = [0; N];
    scalars(fields, &mut values)?;
    Ok(values)
}

/// Fields 1..=10 of a `Mapping` and 1..=5 of a `Function`, before their string indices
/// are checked (the string table usually comes last).
type RawMapping = [u64; 10];
type RawFunction = [u64; 5];

/// Everything but the samples, as read in the first pass.
#[derive(Default)]
struct Head {
    sample_types: Vec<[u64; 2]>,
    period_type: Option<[u64; 2]>,
    scalars: [u64; 16],
    comments: Vec<u64>,
    mappings: Vec<RawMapping>,
    functions: Vec<RawFunction>,
    /// Locations as the model holds them, except that each line's function and each
    /// location's mapping are still pprof ids: `line_functions` (one per line, in order)
    /// and `location_mappings`.
    locations: Vec<Location>,
    line_functions: Vec<u64>,
    location_mappings: Vec<u64>,
    strings: Vec<String>,
}

/// How many of each top-level field the profile has, so every vector is allocated once,
/// and where each sample is, so samples can be decoded on several threads.
#[derive(Default)]
struct Counts {
    /// Offset of each sample field (its tag) in the input.
    samples: Vec<usize>,
    mappings: usize,
    locations: usize,
    functions: usize,
    strings: usize,
}

fn count(bytes: &[u8]) -> Decoded<Counts> {
    let mut counts = Counts::default();
    let mut fields = Fields::new(bytes, 0);
    loop {
        let at = fields.pos;
        let Some(item) = fields.next() else { break };
        match item?.0 {
            2 => counts.samples.push(at),
            3 => counts.mappings += 1,
            4 => counts.locations += 1,
            5 => counts.functions += 1,
            6 => counts.strings += 1,
            _ => {}
        }
    }
    Ok(counts)
}

fn parse_wire(bytes: &[u8], options: &super::ParseOptions, progress: super::Progress<'_>) -> Decoded<Profile> {
    let counts = count(bytes)?;
    let head = read_head(bytes, &counts)?;
    let (mut out, location_index) = convert_head(head)?;
    let at = &counts.samples;
    let shape = SampleShape { types: out.sample_types.len(), strings: out.strings.len(), location_index };
    // Samples are decoded on every core, each thread into its own stretch of the
    // samples' vectors, sized by a first pass.
    let chunks = crate::parallel::chunks(at, SAMPLES_PER_THREAD);
    let sizes = crate::parallel::each(chunks.clone(), |chunk| sample_sizes(bytes, chunk));
    // The samples are counted before their vectors are allocated.
    let (samples, frames) = sizes.iter().fold((0, 0), |(s, f), size| (s + size.samples, f + size.locations));
    super::Room::new(options).take_samples(samples as u64, frames as u64)?;
    let written = Samples::write_parts(&sizes, |writers| {
        let mut first = 0;
        let parts: Vec<_> = chunks
            .iter()
            .zip(writers)
            .map(|(&chunk, writer)| {
                first += chunk.len();
                (first - chunk.len(), chunk, writer)
            })
            .collect();
        let parts = match <[_; 1]>::try_from(parts) {
            Ok([(_, chunk, writer)]) => {
                let step = (at.len() / 100).max(1);
                return read_samples(bytes, chunk, 0, &shape, writer, &mut |i| {
                    if i % step == 0 {
                        progress(super::Stage::Decoding, i as f64 / at.len() as f64);
                    }
                });
            }
            Err(parts) => parts,
        };
        let results = crate::parallel::each(parts, |(first, chunk, writer)| {
            read_samples(bytes, chunk, first, &shape, writer, &mut |_| {})
        });
        // In order, so the first failing chunk's error (the first failing sample's, as on
        // one thread) is the one returned.
        results.into_iter().collect()
    });
    out.samples = written.map_err(|e| match e {
        Unwritten::Failed(failure) => failure,
        Unwritten::OutOfMemory(bytes) => Error::OutOfMemory { bytes }.into(),
        Unwritten::Incomplete => Error::Invalid("the samples changed size between two reads".into()).into(),
    })?;
    if has_no_fields(&out) {
        return Err(Error::UnknownFormat {
            hint: "no profile fields found (not a pprof protobuf, nor a known text format)".into(),
        }
        .into());
    }
    Ok(out)
}

/// Whether the bytes decoded to no profile at all (no sample types, samples or strings):
/// such bytes are not taken for pprof.
fn has_no_fields(profile: &Profile) -> bool {
    profile.sample_types.is_empty() && profile.samples.is_empty() && profile.strings.is_empty()
}

/// Fewest samples worth a thread of their own.
const SAMPLES_PER_THREAD: usize = 1 << 14;

/// What decoding a sample needs from the rest of the profile.
struct SampleShape {
    types: usize,
    strings: usize,
    location_index: IdIndex,
}

/// Decodes the samples whose fields start at `at`, the profile's samples from index
/// `first` on; calls `done` with each sample's index.
fn read_samples(
    bytes: &[u8],
    at: &[usize],
    first: usize,
    shape: &SampleShape,
    mut into: PartWriter<'_>,
    done: &mut dyn FnMut(usize),
) -> Decoded<()> {
    for (i, &at) in (first..).zip(at) {
        let mut fields = Fields { buf: bytes, pos: at, base: 0 };
        let Some(item) = fields.next() else { break };
        let (_, value) = item?;
        read_sample(message(&fields, &value)?, i, shape, &mut into)?;
        done(i);
    }
    Ok(())
}

/// How much room the samples at `at` take, so their vectors are allocated once (a
/// malformed sample ends the count: decoding it reports the error).
fn sample_sizes(bytes: &[u8], at: &[usize]) -> SampleSizes {
    let mut sizes = SampleSizes::default();
    for &at in at {
        let mut fields = Fields { buf: bytes, pos: at, base: 0 };
        let Some(Ok((_, value))) = fields.next() else { break };
        let Ok(mut sample) = message(&fields, &value) else { break };
        while let Some(Ok((field, value))) = sample.next() {
            match field {
                1 => sizes.locations += element_count(&value),
                // Counted, not taken from the sample types: a file's counts never ask for
                // more room than its bytes could fill.
                2 => sizes.values += element_count(&value),
                3 => sizes.labels += 1,
                _ => {}
            }
        }
        sizes.samples += 1;
    }
    sizes
}

fn read_head(bytes: &[u8], counts: &Counts) -> Decoded<Head> {
    let mut head = Head {
        mappings: Vec::with_capacity(counts.mappings),
        functions: Vec::with_capacity(counts.functions),
        locations: Vec::with_capacity(counts.locations),
        location_mappings: Vec::with_capacity(counts.locations),
        strings: Vec::with_capacity(counts.strings),
        ..Head::default()
    };
    let mut lines = Vec::new();
    let mut fields = Fields::new(bytes, 0);
    while let Some(item) = fields.next() {
        let (field, value) = item?;
        head.read_field(&fields, field, value, &mut lines)?;
    }
    Ok(head)
}

impl Head {
    /// Reads one top-level field of the profile, unless it is a sample (`fields` is where
    /// it was read, for nested offsets; `lines` is scratch space for [`read_location`]).
    fn read_field(&mut self, fields: &Fields<'_>, field: u32, value: Value<'_>, lines: &mut Vec<Line>) -> Decoded<()> {
        match field {
            1 => self.sample_types.push(read_scalars(message(fields, &value)?)?),
            2 => {}
            3 => self.mappings.push(read_scalars(message(fields, &value)?)?),
            4 => read_location(message(fields, &value)?, self, lines)?,
            5 => self.functions.push(read_scalars(message(fields, &value)?)?),
            6 => match value {
                Value::Bytes(b) => self.strings.push(match std::str::from_utf8(b) {
                    Ok(s) => s.to_owned(),
                    Err(_) => String::from_utf8_lossy(b).into_owned(),
                }),
                _ => return Err(fields.unexpected("string with the wrong wire type").into()),
            },
            11 => scalars(message(fields, &value)?, self.period_type.get_or_insert([0; 2]))?,
            13 => repeated(fields, &value, |c| {
                self.comments.push(c);
                Ok(())
            })?,
            7..=15 => self.scalars[field as usize] = scalar(fields, &value)?,
            _ => {}
        }
        Ok(())
    }
}

/// `lines` is scratch space: each location's lines are then allocated at their exact
/// count (growing a vector line by line left room for 4 in most, 14 MB on cpu.large).
fn read_location(mut fields: Fields<'_>, head: &mut Head, lines: &mut Vec<Line>) -> Decoded<()> {
    let mut location = Location::default();
    let mut mapping = 0;
    lines.clear();
    while let Some(item) = fields.next() {
        let (field, value) = item?;
        match field {
            1 => location.id = scalar(&fields, &value)?,
            2 => mapping = scalar(&fields, &value)?,
            3 => location.address = scalar(&fields, &value)?,
            4 => {
                let [function, line, column] = read_scalars(message(&fields, &value)?)?;
                // A line without a function carries no name; pprof shows such frames by
                // address, which is what a location without lines gets here too.
                if function != 0 {
                    head.line_functions.push(function);
                    lines.push(Line { function: FunctionId(0), line: line as i64, column: column as i64 });
                }
            }
            5 => location.is_folded = scalar(&fields, &value)? != 0,
            _ => {}
        }
    }
    location.lines = lines.to_vec();
    head.locations.push(location);
    head.location_mappings.push(mapping);
    Ok(())
}

/// Maps a pprof id (arbitrary u64) to an arena index. Dense 1..=n ids, the common case,
/// need no hash map.
enum IdIndex {
    Dense(usize),
    Sparse(HashMap<u64, u32>),
    /// Not known yet (samples decoded before the locations arrived, see [`stream`]): an
    /// id that fits is kept as it is, to be mapped once the locations are read.
    Deferred,
}

impl IdIndex {
    fn new(ids: impl ExactSizeIterator<Item = u64> + Clone, kind: &'static str) -> Result<Self> {
        if let Some(pos) = ids.clone().position(|id| id == 0) {
            return Err(Error::Invalid(format!("{kind} #{pos} has the reserved id 0")));
        }
        let n = ids.len();
        if ids.clone().enumerate().all(|(i, id)| id == i as u64 + 1) {
            return Ok(IdIndex::Dense(n));
        }
        // Later duplicates win, as in pprof.
        Ok(IdIndex::Sparse(ids.enumerate().map(|(i, id)| (id, i as u32)).collect()))
    }

    #[inline]
    fn get(&self, id: u64) -> Option<u32> {
        match self {
            IdIndex::Dense(n) => (id >= 1 && id <= *n as u64).then(|| (id - 1) as u32),
            IdIndex::Sparse(map) => map.get(&id).copied(),
            IdIndex::Deferred => u32::try_from(id).ok(),
        }
    }
}

struct Strings {
    len: usize,
}

impl Strings {
    /// `index` as the wire carries it: a negative int64 is a huge u64, out of range too.
    fn get(&self, index: u64, what: impl FnOnce() -> String) -> Result<StrId> {
        if index < self.len as u64 {
            Ok(StrId(index as u32))
        } else {
            Err(Error::DanglingReference { what: what(), target: "string", id: index })
        }
    }
}

/// Checks and converts everything but the samples; returns the location id index the
/// samples need.
fn convert_head(head: Head) -> Result<(Profile, IdIndex)> {
    let Head {
        sample_types,
        period_type,
        scalars,
        comments,
        mappings,
        functions,
        mut locations,
        line_functions,
        location_mappings,
        strings,
    } = head;
    if strings.first().is_some_and(|s| !s.is_empty()) {
        return Err(Error::Invalid("string table does not start with the empty string".into()));
    }
    let st = Strings { len: strings.len().max(1) };
    let mut out = Profile::new(SourceFormat::Pprof);
    out.strings = StringTable::from_vec(strings);

    let value_type = |vt: &[u64; 2], what: &str| -> Result<ValueType> {
        Ok(ValueType {
            kind: st.get(vt[0], || format!("{what} type"))?,
            unit: st.get(vt[1], || format!("{what} unit"))?,
        })
    };
    out.sample_types = sample_types
        .iter()
        .enumerate()
        .map(|(i, vt)| value_type(vt, &format!("sample_type #{i}")))
        .collect::<Result<_>>()?;
    out.period_type = period_type.as_ref().map(|vt| value_type(vt, "period_type")).transpose()?;
    out.drop_frames = st.get(scalars[7], || "drop_frames".into())?;
    out.keep_frames = st.get(scalars[8], || "keep_frames".into())?;
    out.time_nanos = scalars[9] as i64;
    out.duration_nanos = scalars[10] as i64;
    out.period = scalars[12] as i64;
    out.default_sample_type = st.get(scalars[14], || "default_sample_type".into())?;
    out.doc_url = st.get(scalars[15], || "doc_url".into())?;
    out.comments = comments.iter().map(|&c| st.get(c, || "comment".into())).collect::<Result<_>>()?;

    let mapping_index = IdIndex::new(mappings.iter().map(|m| m[0]), "mapping")?;
    out.mappings = mappings
        .iter()
        .map(
            |&[id, memory_start, memory_limit, file_offset, filename, build_id, functions, filenames, lines, inlines]| {
                Ok(Mapping {
                    id,
                    memory_start,
                    memory_limit,
                    file_offset,
                    filename: st.get(filename, || format!("mapping {id} filename"))?,
                    build_id: st.get(build_id, || format!("mapping {id} build_id"))?,
                    has_functions: functions != 0,
                    has_filenames: filenames != 0,
                    has_line_numbers: lines != 0,
                    has_inline_frames: inlines != 0,
                })
            },
        )
        .collect::<Result<_>>()?;

    let function_index = IdIndex::new(functions.iter().map(|f| f[0]), "function")?;
    out.functions = functions
        .iter()
        .map(|&[id, name, system_name, filename, start_line]| {
            Ok(Function {
                id,
                name: st.get(name, || format!("function {id} name"))?,
                system_name: st.get(system_name, || format!("function {id} system_name"))?,
                filename: st.get(filename, || format!("function {id} filename"))?,
                start_line: start_line as i64,
            })
        })
        .collect::<Result<_>>()?;

    let location_index = IdIndex::new(locations.iter().map(|l| l.id), "location")?;
    let mut raw_functions = line_functions.into_iter();
    for (location, raw_mapping) in locations.iter_mut().zip(location_mappings) {
        let dangling = |target, id| Error::DanglingReference { what: format!("location {}", location.id), target, id };
        location.mapping = match raw_mapping {
            0 => None,
            id => Some(MappingId(mapping_index.get(id).ok_or_else(|| dangling("mapping", id))?)),
        };
        for (line, id) in location.lines.iter_mut().zip(raw_functions.by_ref()) {
            line.function = FunctionId(function_index.get(id).ok_or_else(|| dangling("function", id))?);
        }
    }
    out.locations = locations;
    Ok((out, location_index))
}

/// Writes sample `i` to `into`.
fn read_sample(mut fields: Fields<'_>, i: usize, shape: &SampleShape, into: &mut impl SampleSink) -> Decoded<()> {
    let (n_types, location_index) = (shape.types, &shape.location_index);
    let overflow =
        |what: &str| -> Failure { Error::Invalid(format!("sample #{i} has more {what} than counted")).into() };
    let mut values = 0;
    while let Some(item) = fields.next() {
        let (field, value) = item?;
        match field {
            1 => repeated(&fields, &value, |id| {
                let index = location_index.get(id).ok_or_else(|| Error::DanglingReference {
                    what: format!("sample #{i}"),
                    target: "location",
                    id,
                })?;
                into.push_location(LocationId(index)).then_some(()).ok_or_else(|| overflow("locations"))
            })?,
            2 => repeated(&fields, &value, |v| {
                // Counted before written: a sample with too many values must not spill
                // into the next one's room.
                values += 1;
                if values > n_types || into.push_value(v as i64) {
                    Ok(())
                } else {
                    Err(overflow("values"))
                }
            })?,
            3 => {
                let label = read_label(message(&fields, &value)?, i, shape.strings)?;
                into.push_label(label).then_some(()).ok_or_else(|| overflow("labels"))?;
            }
            _ => {}
        }
    }
    if values != n_types {
        return Err(Error::Invalid(format!(
            "sample #{i} has {values} values but the profile has {n_types} sample types"
        ))
        .into());
    }
    into.end_sample().then_some(()).ok_or_else(|| overflow("samples"))
}

fn read_label(fields: Fields<'_>, i: usize, strings: usize) -> Decoded<Label> {
    let [key, str, num, num_unit] = read_scalars(fields)?;
    let st = Strings { len: strings };
    let key = st.get(key, || format!("sample #{i} label key"))?;
    let value = if str != 0 {
        LabelValue::Str(st.get(str, || format!("sample #{i} label value"))?)
    } else {
        LabelValue::Num { value: num as i64, unit: st.get(num_unit, || format!("sample #{i} label unit"))? }
    };
    Ok(Label { key, value })
}
