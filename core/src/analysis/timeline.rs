//! Views over sample times (see [`Profile::sample_times`]): the span they cover, the
//! profile of a time range (which every other view then reads), the stack chart
//! (Firefox Profiler's "Stack Chart", speedscope's "Time Order": one box per run of
//! samples that share a frame and its callers) and the activity histogram drawn above it.
//!
//! Samples are drawn in lanes, one per thread: a lane is the samples whose labels name
//! the same place (string labels and numeric labels without a unit, e.g. `thread`, or
//! perf's `comm`, `pid` and `tid`; a per-sample `timestamp` in nanoseconds is not one).
//! Importers give each thread's samples spans that do not overlap, so boxes of one lane
//! and depth never overlap either.

use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};

use super::frames::FrameTable;
use super::query::Prepared;
use crate::model::{Label, LabelValue, Profile, SampleRef, SampleTime, StrId};
use crate::{Error, Result};

/// The first start and the last end of the samples' times, `None` without times.
pub fn time_range(profile: &Profile) -> Option<(i64, i64)> {
    if !profile.has_sample_times() {
        return None;
    }
    let start = profile.sample_times.iter().map(|t| t.start).min()?;
    let end = profile.sample_times.iter().map(SampleTime::end).max()?;
    Some((start, end))
}

impl Profile {
    /// The profile with only the samples that start in `[from, to)` (with their times), its
    /// duration that of the range it covers.
    pub fn restrict(&self, from: i64, to: i64) -> Result<Profile> {
        let profile = self;
        let (start, end) = checked_range(profile)?;
        if from >= to {
            return Err(Error::Invalid(format!("the time range [{from}, {to}) is empty")));
        }
        let mut out = profile.clone();
        let mut times = profile.sample_times.iter();
        out.retain_samples(|_| times.next().is_some_and(|t| (from..to).contains(&t.start)));
        out.duration_nanos = to.min(end).saturating_sub(from.max(start)).max(0);
        Ok(out)
    }
}

fn checked_range(profile: &Profile) -> Result<(i64, i64)> {
    time_range(profile).ok_or_else(|| {
        Error::NoSampleTimes(format!("its format ({:?}) does not say when samples were taken", profile.source))
    })
}

/// Which samples a timeline view shows, and where.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TimelineOptions {
    /// The window, in the samples' time (nanoseconds); the profile's range when absent.
    pub start: Option<i64>,
    pub end: Option<i64>,
}

/// The size of the stack chart on screen.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ChartViewport {
    pub width_px: f64,
    /// Boxes narrower than this are left out (their time stays in their caller's box),
    /// and gaps narrower than this between samples are closed.
    pub min_width_px: f64,
    /// Frames deeper than this (0 is the outermost frame) are not drawn.
    pub max_depth: u32,
}

impl Default for ChartViewport {
    fn default() -> Self {
        Self { width_px: 1000.0, min_width_px: 0.5, max_depth: u32::MAX }
    }
}

/// One box of the stack chart: a frame through consecutive samples of a lane.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StackBox {
    /// Index into [`StackChart::lanes`].
    pub lane: u32,
    /// 0 for the outermost frame.
    pub depth: u32,
    pub start: i64,
    pub end: i64,
    /// Index into [`StackChart::names`].
    pub name: u32,
}

/// A thread's row group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lane {
    pub name: String,
    /// Rows it needs: its deepest stack in the whole profile (up to the viewport's
    /// `max_depth`), so lanes keep their heights while the window moves.
    pub depth: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StackChart {
    /// The window drawn.
    pub start: i64,
    pub end: i64,
    pub names: Vec<String>,
    /// The source file of each name's function ("" when unknown).
    pub files: Vec<String>,
    pub lanes: Vec<Lane>,
    /// Sorted by lane, depth and start.
    pub boxes: Vec<StackBox>,
}

/// Total value per equal stretch of the window, for the track above the stack chart.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Histogram {
    pub start: i64,
    pub end: i64,
    pub sample_type: String,
    pub unit: String,
    /// A sample's value is shared among the buckets its span covers, in proportion.
    pub values: Vec<f64>,
}

/// The samples a view draws: kept by the filters, with a value, overlapping the window.
struct Selection<'a> {
    profile: &'a Profile,
    table: FrameTable<'a>,
    index: usize,
    start: i64,
    end: i64,
}

impl<'a> Selection<'a> {
    /// Samples whose value of the prepared type is 0 are left out (as in the call tree).
    fn new(prepared: &'a Prepared, options: &TimelineOptions) -> Result<Self> {
        let (profile, index) = (prepared.profile(), prepared.sample_index);
        let (first, last) = checked_range(profile)?;
        let table = prepared.frames()?;
        let (start, end) = (options.start.unwrap_or(first), options.end.unwrap_or(last));
        if start >= end {
            return Err(Error::Invalid(format!("the time window [{start}, {end}) is empty")));
        }
        Ok(Self { profile, table, index, start, end })
    }

    fn value(&self, sample: SampleRef<'_>) -> i64 {
        sample.values.get(self.index).copied().unwrap_or(0)
    }

    /// Samples with a value that the filters keep (as the filters see them, with their
    /// label frames), with their times.
    fn kept(&self) -> impl Iterator<Item = (usize, SampleRef<'_>, SampleTime)> + '_ {
        self.table
            .profile()
            .samples
            .iter()
            .zip(&self.profile.sample_times)
            .enumerate()
            .filter(|&(_, (s, _))| self.value(s) != 0 && self.table.keeps(s))
            .map(|(i, (s, &t))| (i, s, t))
    }

    /// The window's length in nanoseconds.
    fn span(&self) -> f64 {
        self.end as f64 - self.start as f64
    }

    fn overlaps(&self, t: SampleTime) -> bool {
        t.duration > 0 && t.start < self.end && t.end() > self.start
    }
}

/// The stack chart of the window (see the module documentation).
pub fn stack_chart(prepared: &Prepared, options: &TimelineOptions, viewport: &ChartViewport) -> Result<StackChart> {
    let selection = Selection::new(prepared, options)?;
    let profile = prepared.profile();
    let table = &selection.table;
    let ns_per_px = selection.span() / viewport.width_px.max(1.0);
    let min_ns = viewport.min_width_px.max(0.0) * ns_per_px;
    let max_rows = viewport.max_depth.saturating_add(1) as usize;

    let mut lanes = Lanes::default();
    // (lane, start, end, sample) of the samples in the window.
    let mut drawn: Vec<(u32, i64, i64, usize)> = Vec::new();
    for (i, sample, time) in selection.kept() {
        let lane = lanes.of(profile, sample.labels);
        let mut depth = 0;
        table.walk_root_first(sample, |_, _| depth += 1);
        let rows = &mut lanes.list[lane as usize].depth;
        *rows = (*rows).max(depth.min(max_rows) as u32);
        if selection.overlaps(time) {
            drawn.push((lane, time.start, time.end(), i));
        }
    }
    drawn.sort_unstable();

    let mut chart = ChartBuilder { selection: &selection, min_ns, names: Names::new(table), boxes: Vec::new() };
    let mut open: Vec<OpenBox> = Vec::new();
    let mut frames: Vec<u32> = Vec::new();
    let mut lane_of_open = u32::MAX;
    for &(lane, start, end, i) in &drawn {
        frames.clear();
        table.walk_root_first(profile.samples.sample(i), |node, _| frames.push(node));
        frames.truncate(max_rows);
        // A box goes on while its frame and all its callers' do, without a visible gap.
        let follows =
            lane == lane_of_open && open.first().is_some_and(|b| start.saturating_sub(b.end) as f64 <= min_ns);
        let same = if follows { open.iter().zip(&frames).take_while(|(b, &f)| b.node == f).count() } else { 0 };
        for (depth, closed) in open.drain(same..).enumerate() {
            chart.close(lane_of_open, (same + depth) as u32, closed);
        }
        for b in &mut open {
            b.end = b.end.max(end);
        }
        open.extend(frames[same..].iter().map(|&node| OpenBox { node, start, end }));
        lane_of_open = lane;
    }
    for (depth, closed) in open.drain(..).enumerate() {
        chart.close(lane_of_open, depth as u32, closed);
    }
    let ChartBuilder { names, mut boxes, .. } = chart;
    boxes.sort_unstable_by_key(|b| (b.lane, b.depth, b.start));
    Ok(StackChart {
        start: selection.start,
        end: selection.end,
        names: names.names,
        files: names.files,
        lanes: lanes.list,
        boxes,
    })
}

/// A box whose samples may go on.
struct OpenBox {
    node: u32,
    start: i64,
    end: i64,
}

struct ChartBuilder<'s, 'p> {
    selection: &'s Selection<'p>,
    min_ns: f64,
    names: Names,
    boxes: Vec<StackBox>,
}

impl ChartBuilder<'_, '_> {
    /// Emits a closed box if enough of it shows in the window.
    fn close(&mut self, lane: u32, depth: u32, b: OpenBox) {
        let shown = b.end.min(self.selection.end).saturating_sub(b.start.max(self.selection.start));
        if (shown as f64) < self.min_ns || shown <= 0 {
            return;
        }
        let name = self.names.of(&self.selection.table, b.node);
        self.boxes.push(StackBox { lane, depth, start: b.start, end: b.end, name });
    }
}

/// The names table of a chart: only the frames it draws, each once.
struct Names {
    by_node: Vec<u32>,
    names: Vec<String>,
    files: Vec<String>,
}

impl Names {
    fn new(table: &FrameTable) -> Self {
        Self { by_node: vec![u32::MAX; table.node_count()], names: Vec::new(), files: Vec::new() }
    }

    fn of(&mut self, table: &FrameTable, node: u32) -> u32 {
        let slot = &mut self.by_node[node as usize];
        if *slot == u32::MAX {
            *slot = self.names.len() as u32;
            self.names.push(table.name(node).to_owned());
            self.files.push(table.file(node).to_owned());
        }
        *slot
    }
}

/// Lanes in order of first appearance, found by the labels that name a thread.
#[derive(Default)]
struct Lanes {
    list: Vec<Lane>,
    by_key: HashMap<Vec<Label>, u32>,
    /// The key last looked up and its lane: a thread's samples mostly come together.
    last: Option<(Vec<Label>, u32)>,
}

impl Lanes {
    fn of(&mut self, profile: &Profile, labels: &[Label]) -> u32 {
        let place = || labels.iter().filter(|l| names_a_place(l));
        if let Some((key, lane)) = &self.last {
            if key.iter().eq(place()) {
                return *lane;
            }
        }
        let key: Vec<Label> = place().cloned().collect();
        let next = self.list.len() as u32;
        let lane = *self.by_key.entry(key.clone()).or_insert(next);
        if lane == next {
            self.list.push(Lane { name: lane_name(profile, &key), depth: 0 });
        }
        self.last = Some((key, lane));
        lane
    }
}

/// Whether a label says where a sample ran rather than something of its own.
fn names_a_place(label: &Label) -> bool {
    matches!(label.value, LabelValue::Str(_) | LabelValue::Num { unit: StrId(0), .. })
}

/// A `thread` label's value, else `key=value` of each label of the key.
fn lane_name(profile: &Profile, key: &[Label]) -> String {
    let value = |l: &Label| match l.value {
        LabelValue::Str(s) => profile.str(s).to_owned(),
        LabelValue::Num { value, .. } => value.to_string(),
    };
    if let Some(thread) = key.iter().find(|l| profile.str(l.key) == "thread") {
        return value(thread);
    }
    let parts: Vec<String> = key.iter().map(|l| format!("{}={}", profile.str(l.key), value(l))).collect();
    parts.join(" ")
}

/// More buckets than any screen has pixels.
const MAX_BUCKETS: usize = 1 << 20;

/// The total value in each of `buckets` equal stretches of the window.
pub fn histogram(prepared: &Prepared, options: &TimelineOptions, buckets: usize) -> Result<Histogram> {
    let selection = Selection::new(prepared, options)?;
    if !(1..=MAX_BUCKETS).contains(&buckets) {
        return Err(Error::Invalid(format!("a histogram has 1 to {MAX_BUCKETS} buckets, not {buckets}")));
    }
    let (start, end) = (selection.start, selection.end);
    let width = selection.span() / buckets as f64;
    let bucket = |t: f64| (((t - start as f64) / width).floor().max(0.0) as usize).min(buckets - 1);
    let mut values = vec![0.0; buckets];
    for (_, sample, time) in selection.kept() {
        let value = selection.value(sample) as f64;
        if time.duration <= 0 {
            if (start..end).contains(&time.start) {
                values[bucket(time.start as f64)] += value;
            }
            continue;
        }
        if !selection.overlaps(time) {
            continue;
        }
        // The part of the span inside the window, shared out bucket by bucket.
        let (from, to) = (time.start.max(start) as f64, time.end().min(end) as f64);
        let per_ns = value / time.duration as f64;
        for (b, slot) in values.iter_mut().enumerate().take(bucket(to) + 1).skip(bucket(from)) {
            let (b_start, b_end) = (start as f64 + b as f64 * width, start as f64 + (b + 1) as f64 * width);
            *slot += (to.min(b_end) - from.max(b_start)).max(0.0) * per_ns;
        }
    }
    Ok(Histogram {
        start,
        end,
        sample_type: prepared.sample_type().to_owned(),
        unit: prepared.unit().to_owned(),
        values,
    })
}
