//! Transforms that return a new profile (what a converted file or a merged range
//! carries, or what the page analyses), as opposed to reports about one: pprof's filters
//! and the Firefox Profiler's stack transforms.

use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};

use super::labels::with_label_frames;
use super::summary::package_of;
use super::Filters;
use crate::model::{Function, FunctionId, Line, Location, LocationId, Sample, StrId};
use crate::{Error, Profile, Result};

/// The profile with pprof's filters applied to its samples and locations, as `-output`
/// writes it: the label frames of `tag_root`/`tag_leaf` added; samples that
/// focus/ignore or tagfocus/tagignore drop removed; hidden lines removed from their
/// locations, and a location left without lines removed from the stacks (a sample left
/// without a stack goes too); labels whose keys `tag_show`/`tag_hide` leave out removed.
pub fn filter(profile: &Profile, filters: &Filters) -> Result<Profile> {
    let compiled = filters.compile()?;
    if *filters == Filters::default() {
        return Ok(profile.clone());
    }
    let labelled = with_label_frames(profile, filters);
    let profile = &*labelled;
    let tags = compiled.tags.verdicts(profile);
    let mut out = profile.clone();
    let verdicts: Vec<Option<bool>> =
        profile.locations.iter().map(|location| compiled.location_verdict(profile, location)).collect();
    let mut hidden = vec![false; profile.locations.len()];
    for (i, (location, original)) in out.locations.iter_mut().zip(&profile.locations).enumerate() {
        if original.lines.is_empty() {
            hidden[i] = !compiled.keeps_unsymbolized(profile, original);
            continue;
        }
        let mut visible = compiled.visible_lines(profile, original);
        location.lines.retain(|_| visible.next().unwrap_or(false));
        hidden[i] = location.lines.is_empty();
    }
    out.retain_samples(|sample| {
        let verdict = |l: &LocationId| verdicts[l.0 as usize];
        if compiled.has_ignore() && sample.locations.iter().any(|l| verdict(l) == Some(false)) {
            return false;
        }
        if compiled.has_focus() && !sample.locations.iter().any(|l| verdict(l) == Some(true)) {
            return false;
        }
        if !tags.keeps(sample) {
            return false;
        }
        sample.locations.retain(|l| !hidden[l.0 as usize]);
        sample.labels.retain(|l| compiled.tags.keys.shows(profile.str(l.key)));
        !sample.locations.is_empty()
    });
    Ok(out)
}

/// A change to a profile's stacks before analysis, as the Firefox Profiler's transforms;
/// the page keeps the list in its URL ([`format_transforms`] writes it short). Functions
/// are named as at `functions` granularity: a function's name, or `[binary]` for a frame
/// without one. Samples keep their values and labels.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Transform {
    /// Removes the function's frames from stacks: its self value goes to its caller.
    MergeFunction { name: String },
    /// A run of the function calling itself directly becomes one frame.
    CollapseRecursion { name: String },
    /// A run of frames of one package ([`package_of`]) becomes one frame named after it.
    CollapsePackage { prefix: String },
    /// Drops the samples whose stack has the function.
    DropFunction { name: String },
    /// Keeps the samples whose stack starts with this path (root first), re-rooted at
    /// its last function.
    FocusSubtree { path: Vec<String> },
    /// Reverses every stack, so that the leaves are the roots (bottom-up).
    Invert,
}

/// `profile` with `transforms` applied in order to every sample's stack.
pub fn apply(profile: &Profile, transforms: &[Transform]) -> Result<Profile> {
    for transform in transforms {
        transform.check()?;
    }
    let mut out = profile.clone();
    if transforms.is_empty() {
        return Ok(out);
    }
    let samples = std::mem::take(&mut out.samples);
    let mut stacks = Restacker::new(&out);
    let mut frames = Vec::new();
    for mut sample in samples {
        stacks.expand(&out, &sample, &mut frames);
        if transforms.iter().all(|transform| stacks.transform(&mut out, transform, &mut frames)) {
            sample.locations = stacks.locations(&mut out, &frames);
            out.samples.push(sample);
        }
    }
    Ok(out)
}

/// One frame of a stack: a line of a location (its innermost line is 0), or a location
/// without lines.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
struct Frame {
    location: LocationId,
    line: u32,
}

/// Rewrites stacks frame by frame. Frames left as whole locations keep those locations
/// (and so their inlining); a line taken out of its location gets a location of its own.
struct Restacker {
    /// Names of the locations without lines, as the reports name them.
    unsymbolized: HashMap<LocationId, String>,
    /// The one-line location made for a line of a location with several.
    single_lines: HashMap<Frame, LocationId>,
    /// The frame standing for each collapsed package.
    packages: HashMap<String, Frame>,
    next_location_id: u64,
    next_function_id: u64,
}

impl Restacker {
    fn new(profile: &Profile) -> Self {
        let unsymbolized = (profile.locations.iter().enumerate())
            .filter(|(_, location)| location.lines.is_empty())
            .map(|(i, location)| (LocationId(i as u32), profile.unsymbolized_name(location)))
            .collect();
        let next_id = |ids: &mut dyn Iterator<Item = u64>| ids.max().map_or(1, |id| id.saturating_add(1));
        Self {
            unsymbolized,
            single_lines: HashMap::default(),
            packages: HashMap::default(),
            next_location_id: next_id(&mut profile.locations.iter().map(|l| l.id)),
            next_function_id: next_id(&mut profile.functions.iter().map(|f| f.id)),
        }
    }

    fn name<'a>(&'a self, profile: &'a Profile, frame: Frame) -> &'a str {
        match profile.location(frame.location).lines.get(frame.line as usize) {
            Some(line) => profile.line_function_name(line),
            None => self.unsymbolized.get(&frame.location).map_or("", String::as_str),
        }
    }

    fn in_package(&self, profile: &Profile, frame: Frame, prefix: &str) -> bool {
        package_of(self.name(profile, frame)) == prefix
    }

    /// A sample's frames, root first (a location's outermost line before its inlined ones).
    fn expand(&self, profile: &Profile, sample: &Sample, frames: &mut Vec<Frame>) {
        frames.clear();
        for &location in sample.locations.iter().rev() {
            let lines = profile.location(location).lines.len().max(1) as u32;
            frames.extend((0..lines).rev().map(|line| Frame { location, line }));
        }
    }

    /// Applies one transform to a sample's frames; false when the sample is dropped.
    fn transform(&mut self, profile: &mut Profile, transform: &Transform, frames: &mut Vec<Frame>) -> bool {
        match transform {
            Transform::MergeFunction { name } => frames.retain(|&f| self.name(profile, f) != name),
            Transform::CollapseRecursion { name } => {
                frames.dedup_by(|&mut f, &mut previous| {
                    self.name(profile, f) == name && self.name(profile, previous) == name
                });
            }
            Transform::CollapsePackage { prefix } => {
                if frames.iter().any(|&f| self.in_package(profile, f, prefix)) {
                    let package = self.package_frame(profile, prefix);
                    let mut previous_in_package = false;
                    frames.retain_mut(|f| {
                        let in_package = self.in_package(profile, *f, prefix);
                        let keep = !(in_package && previous_in_package);
                        previous_in_package = in_package;
                        if in_package {
                            *f = package;
                        }
                        keep
                    });
                }
            }
            Transform::DropFunction { name } => return !frames.iter().any(|&f| self.name(profile, f) == name),
            Transform::FocusSubtree { path } => {
                let under = frames.len() >= path.len()
                    && frames.iter().zip(path).all(|(&f, name)| self.name(profile, f) == name);
                if !under {
                    return false;
                }
                frames.drain(..path.len() - 1);
            }
            Transform::Invert => frames.reverse(),
        }
        true
    }

    /// The frame a collapsed package is shown as: a function named after it.
    fn package_frame(&mut self, profile: &mut Profile, prefix: &str) -> Frame {
        if let Some(&frame) = self.packages.get(prefix) {
            return frame;
        }
        let name = profile.strings.intern(prefix);
        let function = FunctionId(profile.functions.len() as u32);
        let id = take_id(&mut self.next_function_id);
        profile.functions.push(Function { id, name, system_name: name, filename: StrId(0), start_line: 0 });
        let line = Line { function, line: 0, column: 0 };
        let location = self.push_location(profile, Location { lines: vec![line], ..Location::default() });
        let frame = Frame { location, line: 0 };
        self.packages.insert(prefix.to_owned(), frame);
        frame
    }

    fn push_location(&mut self, profile: &mut Profile, location: Location) -> LocationId {
        let id = take_id(&mut self.next_location_id);
        profile.locations.push(Location { id, ..location });
        LocationId(profile.locations.len() as u32 - 1)
    }

    /// The stack of `frames` (root first) as locations, leaf first.
    fn locations(&mut self, profile: &mut Profile, frames: &[Frame]) -> Vec<LocationId> {
        let mut stack = Vec::with_capacity(frames.len());
        let mut rest = frames;
        while let Some(&leaf) = rest.last() {
            let lines = profile.location(leaf.location).lines.len();
            // A location's lines, innermost first, end `rest` in order: keep it whole.
            let whole = lines <= 1
                || (leaf.line == 0
                    && rest.len() >= lines
                    && (rest.iter().rev().take(lines).enumerate())
                        .all(|(i, f)| *f == Frame { location: leaf.location, line: i as u32 }));
            let taken = if whole { lines.max(1) } else { 1 };
            stack.push(if whole { leaf.location } else { self.single_line(profile, leaf) });
            rest = &rest[..rest.len() - taken];
        }
        stack
    }

    fn single_line(&mut self, profile: &mut Profile, frame: Frame) -> LocationId {
        if let Some(&location) = self.single_lines.get(&frame) {
            return location;
        }
        let original = profile.location(frame.location);
        let line = original.lines[frame.line as usize];
        let location = Location { lines: vec![line], ..original.clone() };
        let location = self.push_location(profile, location);
        self.single_lines.insert(frame, location);
        location
    }
}

/// A new pprof id: the next one after every id the profile had.
fn take_id(next: &mut u64) -> u64 {
    let id = *next;
    *next = next.saturating_add(1);
    id
}

impl Transform {
    /// A transform that names nothing would change nothing: a mangled URL.
    fn check(&self) -> Result<()> {
        let empty = match self {
            Transform::MergeFunction { name }
            | Transform::CollapseRecursion { name }
            | Transform::DropFunction { name } => name.is_empty(),
            Transform::CollapsePackage { prefix } => prefix.is_empty(),
            Transform::FocusSubtree { path } => path.is_empty() || path.iter().any(String::is_empty),
            Transform::Invert => false,
        };
        match empty {
            true => Err(Error::InvalidTransform { text: self.to_string(), reason: "it names no function".to_owned() }),
            false => Ok(()),
        }
    }
}

/// Separates transforms in their short form, and the functions of a focused path.
const LIST_SEPARATOR: char = '~';
const PATH_SEPARATOR: char = ';';

/// The short form: `mf:NAME`, `cr:NAME`, `cp:PREFIX`, `df:NAME`, `fs:ROOT;…;NAME`, `inv`,
/// names percent-encoded where they hold a character not safe in a URL or a separator.
impl std::fmt::Display for Transform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transform::MergeFunction { name } => write!(f, "mf:{}", Encoded(name)),
            Transform::CollapseRecursion { name } => write!(f, "cr:{}", Encoded(name)),
            Transform::CollapsePackage { prefix } => write!(f, "cp:{}", Encoded(prefix)),
            Transform::DropFunction { name } => write!(f, "df:{}", Encoded(name)),
            Transform::FocusSubtree { path } => {
                f.write_str("fs:")?;
                for (i, name) in path.iter().enumerate() {
                    if i > 0 {
                        write!(f, "{PATH_SEPARATOR}")?;
                    }
                    write!(f, "{}", Encoded(name))?;
                }
                Ok(())
            }
            Transform::Invert => f.write_str("inv"),
        }
    }
}

impl std::str::FromStr for Transform {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        let invalid = |reason: &str| Error::InvalidTransform { text: text.to_owned(), reason: reason.to_owned() };
        let (code, argument) = text.split_once(':').unwrap_or((text, ""));
        let name = || decode(argument).ok_or_else(|| invalid("a name is not valid percent-encoded UTF-8"));
        let transform = match code {
            "mf" => Transform::MergeFunction { name: name()? },
            "cr" => Transform::CollapseRecursion { name: name()? },
            "cp" => Transform::CollapsePackage { prefix: name()? },
            "df" => Transform::DropFunction { name: name()? },
            "fs" => Transform::FocusSubtree {
                path: argument
                    .split(PATH_SEPARATOR)
                    .map(|name| decode(name).ok_or_else(|| invalid("a name is not valid percent-encoded UTF-8")))
                    .collect::<Result<_>>()?,
            },
            "inv" if argument.is_empty() && !text.contains(':') => Transform::Invert,
            _ => return Err(invalid("expected mf:, cr:, cp:, df:, fs: or inv")),
        };
        transform.check()?;
        Ok(transform)
    }
}

/// Transforms in their short form, joined by `~` (`mf:runtime.mcall~inv`).
pub fn format_transforms(transforms: &[Transform]) -> String {
    let parts: Vec<String> = transforms.iter().map(Transform::to_string).collect();
    parts.join(&LIST_SEPARATOR.to_string())
}

/// Reads [`format_transforms`]' text; "" is no transform.
pub fn parse_transforms(text: &str) -> Result<Vec<Transform>> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    text.split(LIST_SEPARATOR).map(str::parse).collect()
}

/// A name with every byte outside a URL-safe set percent-encoded.
struct Encoded<'a>(&'a str);

impl std::fmt::Display for Encoded<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for c in self.0.chars() {
            if c.is_ascii_alphanumeric() || "-._*()/:,!$'@".contains(c) {
                write!(f, "{c}")?;
            } else {
                let mut bytes = [0; 4];
                for byte in c.encode_utf8(&mut bytes).bytes() {
                    write!(f, "%{byte:02X}")?;
                }
            }
        }
        Ok(())
    }
}

fn decode(text: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            let hex = tail.get(..2).and_then(|h| std::str::from_utf8(h).ok())?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(byte);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}
