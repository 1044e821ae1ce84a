//! Transforms that return a new profile (what a converted file or a merged range
//! carries, or what the page analyses), as opposed to reports about one: pprof's filters
//! and the Firefox Profiler's stack transforms.

use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};

use super::filters::Filters;
use super::frames::{package_of, CompiledFilters};
use super::labels::with_label_frames;
use crate::model::{Function, FunctionId, Line, Location, LocationId, SampleRef, StrId};
use crate::{Error, Profile, Result};

impl Profile {
    /// The profile with pprof's filters applied to its samples and locations, as `-output`
    /// writes it: the label frames of `tag_root`/`tag_leaf` added; samples that
    /// focus/ignore or tagfocus/tagignore drop removed; hidden lines removed from their
    /// locations, and a location left without lines removed from the stacks (a sample left
    /// without a stack goes too); labels whose keys `tag_show`/`tag_hide` leave out removed.
    pub fn filter(&self, filters: &Filters) -> Result<Profile> {
        Ok(self.filter_compiled(&filters.compile()?))
    }

    /// [`Profile::filter`] with filters compiled once (a prepared query's).
    pub fn filter_compiled(&self, compiled: &CompiledFilters) -> Profile {
        let profile = self;
        if *compiled.filters() == Filters::default() {
            return profile.clone();
        }
        let labelled = with_label_frames(profile, compiled.filters());
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
            if !tags.keeps(sample.view()) {
                return false;
            }
            sample.locations.retain(|l| !hidden[l.0 as usize]);
            sample.labels.retain(|l| compiled.tags.keys.shows(profile.str(l.key)));
            !sample.locations.is_empty()
        });
        out
    }
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

impl Profile {
    /// `profile` with `transforms` applied in order to every sample's stack.
    pub fn transform(&self, transforms: &[Transform]) -> Result<Profile> {
        let profile = self;
        for transform in transforms {
            transform.check()?;
        }
        let mut out = profile.clone();
        if transforms.is_empty() {
            return Ok(out);
        }
        let mut restacker = Restacker::new(&mut out, transforms);
        let steps: Vec<Step> = transforms.iter().filter_map(|transform| restacker.step(transform)).collect();
        let mut frames = Vec::new();
        // The samples' locations are `profile`'s; the locations made for new stacks are
        // added to `out` once all are written.
        out.retain_samples(|sample| {
            restacker.expand(profile, sample.view(), &mut frames);
            if !steps.iter().all(|step| step.apply(&mut frames)) {
                return false;
            }
            restacker.write_stack(profile, &frames, &mut sample.locations);
            true
        });
        out.locations.append(&mut restacker.new_locations);
        Ok(out)
    }
}

/// One frame of a stack: a line of a location (its innermost line is 0), or a location
/// without lines, and its name's key (see [`Restacker::names`]).
#[derive(Copy, Clone, Debug)]
struct Frame {
    location: LocationId,
    line: u32,
    key: u32,
}

/// A transform resolved against a profile: which name keys it matches.
enum Step {
    Merge(Vec<bool>),
    CollapseRecursion(Vec<bool>),
    CollapsePackage(Vec<bool>, Frame),
    Drop(Vec<bool>),
    /// The keys each function of the path may have (a name can have several functions).
    Focus(Vec<Vec<bool>>),
    Invert,
}

impl Step {
    /// Applies the step to a sample's frames (root first); false when the sample goes.
    fn apply(&self, frames: &mut Vec<Frame>) -> bool {
        let hit = |keys: &[bool], frame: &Frame| keys[frame.key as usize];
        match self {
            Step::Merge(keys) => frames.retain(|f| !hit(keys, f)),
            Step::CollapseRecursion(keys) => frames.dedup_by(|f, previous| hit(keys, f) && hit(keys, previous)),
            Step::CollapsePackage(keys, package) => {
                let mut previous_in_package = false;
                frames.retain_mut(|f| {
                    let in_package = hit(keys, f);
                    let keep = !(in_package && previous_in_package);
                    previous_in_package = in_package;
                    if in_package {
                        *f = *package;
                    }
                    keep
                });
            }
            Step::Drop(keys) => return !frames.iter().any(|f| hit(keys, f)),
            Step::Focus(path) => {
                let under = frames.len() >= path.len() && frames.iter().zip(path).all(|(f, keys)| hit(keys, f));
                if !under {
                    return false;
                }
                frames.drain(..path.len() - 1);
            }
            Step::Invert => frames.reverse(),
        }
        true
    }
}

/// Rewrites stacks frame by frame. Frames left as whole locations keep those locations
/// (and so their inlining); a line taken out of its location gets a location of its own.
struct Restacker {
    /// Names by key: keys below the number of functions are function ids (so a frame's
    /// key is its line's function), the others the names of locations without lines, as
    /// the reports name them.
    names: Vec<String>,
    /// Per location: the key of a location without lines.
    unsymbolized_keys: Vec<u32>,
    /// The frame standing for each collapsed package.
    packages: HashMap<String, Frame>,
    /// The one-line location made for a line of a location with several.
    single_lines: HashMap<(LocationId, u32), LocationId>,
    /// Locations made for the new stacks, which follow the profile's.
    new_locations: Vec<Location>,
    first_new_location: usize,
    next_location_id: u64,
}

impl Restacker {
    /// Adds to `profile` a function for each package `transforms` collapse (that the
    /// profile has), with a location for it, then names every frame key.
    fn new(profile: &mut Profile, transforms: &[Transform]) -> Self {
        let next_id = |ids: &mut dyn Iterator<Item = u64>| ids.max().map_or(1, |id| id.saturating_add(1));
        let mut next_function_id = next_id(&mut profile.functions.iter().map(|f| f.id));
        let mut restacker = Restacker {
            names: Vec::new(),
            unsymbolized_keys: vec![u32::MAX; profile.locations.len()],
            packages: HashMap::default(),
            single_lines: HashMap::default(),
            new_locations: Vec::new(),
            first_new_location: profile.locations.len(),
            next_location_id: next_id(&mut profile.locations.iter().map(|l| l.id)),
        };
        for transform in transforms {
            let Transform::CollapsePackage { prefix } = transform else { continue };
            let present = profile.functions.iter().any(|f| package_of(profile.str(f.name)) == prefix);
            if !present || restacker.packages.contains_key(prefix) {
                continue;
            }
            let name = profile.strings.intern(prefix);
            let function = FunctionId(profile.functions.len() as u32);
            let id = take_id(&mut next_function_id);
            profile.functions.push(Function { id, name, system_name: name, filename: StrId(0), start_line: 0 });
            let line = Line { function, line: 0, column: 0 };
            let location = restacker.push_location(Location { lines: vec![line], ..Location::default() });
            restacker.packages.insert(prefix.clone(), Frame { location, line: 0, key: function.0 });
        }
        restacker.names = profile.functions.iter().map(|f| profile.str(f.name).to_owned()).collect();
        let mut unsymbolized: HashMap<String, u32> = HashMap::default();
        for (i, location) in profile.locations.iter().enumerate().filter(|(_, l)| l.lines.is_empty()) {
            let name = profile.unsymbolized_name(location);
            let next = restacker.names.len() as u32;
            restacker.unsymbolized_keys[i] = *unsymbolized.entry(name).or_insert_with_key(|name| {
                restacker.names.push(name.clone());
                next
            });
        }
        restacker
    }

    /// Which keys have a name `matches` accepts.
    fn keys(&self, matches: impl Fn(&str) -> bool) -> Vec<bool> {
        self.names.iter().map(|name| matches(name)).collect()
    }

    /// The transform as a step, or `None` when it changes nothing: a package the profile
    /// does not have.
    fn step(&self, transform: &Transform) -> Option<Step> {
        let named = |wanted: &str| self.keys(|name| name == wanted);
        Some(match transform {
            Transform::MergeFunction { name } => Step::Merge(named(name)),
            Transform::CollapseRecursion { name } => Step::CollapseRecursion(named(name)),
            Transform::CollapsePackage { prefix } => {
                Step::CollapsePackage(self.keys(|name| package_of(name) == prefix), *self.packages.get(prefix)?)
            }
            Transform::DropFunction { name } => Step::Drop(named(name)),
            Transform::FocusSubtree { path } => Step::Focus(path.iter().map(|name| named(name)).collect()),
            Transform::Invert => Step::Invert,
        })
    }

    /// A sample's frames, root first (a location's outermost line before its inlined ones).
    fn expand(&self, profile: &Profile, sample: SampleRef<'_>, frames: &mut Vec<Frame>) {
        frames.clear();
        for &location in sample.locations.iter().rev() {
            let lines = &profile.location(location).lines;
            if lines.is_empty() {
                frames.push(Frame { location, line: 0, key: self.unsymbolized_keys[location.0 as usize] });
            }
            let frame = |(line, l): (usize, &Line)| Frame { location, line: line as u32, key: l.function.0 };
            frames.extend(lines.iter().enumerate().rev().map(frame));
        }
    }

    fn push_location(&mut self, location: Location) -> LocationId {
        let id = take_id(&mut self.next_location_id);
        self.new_locations.push(Location { id, ..location });
        LocationId((self.first_new_location + self.new_locations.len() - 1) as u32)
    }

    fn location<'a>(&'a self, profile: &'a Profile, id: LocationId) -> &'a Location {
        match (id.0 as usize).checked_sub(self.first_new_location) {
            Some(new) => &self.new_locations[new],
            None => profile.location(id),
        }
    }

    /// Writes the stack of `frames` (root first) as locations, leaf first, into `stack`.
    fn write_stack(&mut self, profile: &Profile, frames: &[Frame], stack: &mut Vec<LocationId>) {
        stack.clear();
        let mut rest = frames;
        while let Some(&leaf) = rest.last() {
            let lines = self.location(profile, leaf.location).lines.len();
            // A location's lines, innermost first, end `rest` in order: keep it whole.
            let whole = lines <= 1
                || (leaf.line == 0
                    && rest.len() >= lines
                    && (rest.iter().rev().take(lines).enumerate())
                        .all(|(i, f)| f.location == leaf.location && f.line == i as u32));
            let taken = if whole { lines.max(1) } else { 1 };
            stack.push(if whole { leaf.location } else { self.single_line(profile, leaf) });
            rest = &rest[..rest.len() - taken];
        }
    }

    /// A location of one line of a location of `profile` with several.
    fn single_line(&mut self, profile: &Profile, frame: Frame) -> LocationId {
        if let Some(&location) = self.single_lines.get(&(frame.location, frame.line)) {
            return location;
        }
        let original = profile.location(frame.location);
        let line = original.lines[frame.line as usize];
        let location = Location { lines: vec![line], ..original.clone() };
        let location = self.push_location(location);
        self.single_lines.insert((frame.location, frame.line), location);
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
