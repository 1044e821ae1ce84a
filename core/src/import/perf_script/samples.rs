//! perf's records to samples, for perf script text and perf.data alike: per event a
//! count column and (with periods) a weight column; records with times stay one sample
//! each, with their spans, and others with the same stack, event and thread are summed.
//! Records are added one at a time, so perf.data's samples go into the profile as they
//! are read rather than being held until the end.

use rustc_hash::FxHashMap as HashMap;

use super::{Event, FrameKey, Record, Thread};
use crate::import::demangle::add_native_function;
use crate::import::Room;
use crate::model::{
    FunctionId, Label, LabelValue, Line, LocationId, Mapping, MappingId, Profile, Sample, SampleTime, StrId, ValueType,
};
use crate::Result;

/// Turns records into a profile's samples.
pub(crate) struct Samples {
    b: Builder,
    /// The label keys comm, pid and tid.
    keys: [StrId; 3],
    /// Per event: its count column and, with periods, its weight column.
    columns: Vec<(usize, Option<usize>)>,
    /// The sample each (stack, event, thread) sums into, for records without times.
    summed: HashMap<(Vec<LocationId>, usize, Thread), usize>,
    /// While every record has had a time: each sample's thread and event, and time.
    timed: Option<Vec<((Thread, usize), i64)>>,
}

impl Samples {
    /// Adds the sample types of `events` to `p`.
    pub(crate) fn new(p: &mut Profile, events: &[Event]) -> Self {
        let keys = ["comm", "pid", "tid"].map(|k| p.strings.intern(k));
        let single = events.len() == 1;
        let mut columns: Vec<(usize, Option<usize>)> = Vec::with_capacity(events.len());
        for (name, has_period) in events {
            let shown = if name.is_empty() { "events" } else { name.as_str() };
            let count_name = if single { "samples".to_owned() } else { format!("{shown}_samples") };
            let count_type: ValueType = p.value_type(&count_name, "count");
            p.sample_types.push(count_type);
            let count_column = p.sample_types.len() - 1;
            let weight_column = has_period.then(|| {
                let vt = p.value_type(shown, period_unit(shown));
                p.sample_types.push(vt);
                p.sample_types.len() - 1
            });
            columns.push((count_column, weight_column));
        }
        Samples { b: Builder::default(), keys, columns, summed: HashMap::default(), timed: Some(Vec::new()) }
    }

    /// Adds `record` (its event one of those given to [`Samples::new`]) as a sample, or
    /// into the one it sums with.
    pub(crate) fn add(&mut self, p: &mut Profile, room: &mut Room, record: &Record) -> Result<()> {
        let inline = record.inline_frame.map(|f| (f, false));
        let frames = if record.frames.is_empty() { inline.as_slice() } else { &record.frames };
        let locations = self.b.locations(p, frames);
        let (count_column, weight_column) = self.columns[record.event];
        // A record without a time: from here on none is timed and records are summed
        // (those before stay one sample each; the profile's numbers are the same).
        if record.time_nanos.is_none() {
            self.timed = None;
        }
        let key = (locations, record.event, record.thread);
        let at = match self.timed {
            Some(_) => None,
            None => self.summed.get(&key).copied(),
        };
        let at = match at {
            Some(at) => at,
            None => {
                let (comm, pid, tid) = record.thread;
                let [comm_key, pid_key, tid_key] = self.keys;
                let mut labels = Vec::with_capacity(3);
                if comm != StrId(0) {
                    labels.push(Label { key: comm_key, value: LabelValue::Str(comm) });
                }
                for (key, value) in [(pid_key, pid), (tid_key, tid)] {
                    if let Some(value) = value {
                        labels.push(Label { key, value: LabelValue::Num { value, unit: StrId(0) } });
                    }
                }
                let values = vec![0; p.sample_types.len()];
                room.push(&mut p.samples, Sample { locations: key.0.clone(), values, labels })?;
                let at = p.samples.len() - 1;
                match (&mut self.timed, record.time_nanos) {
                    (Some(timed), Some(time)) => timed.push(((record.thread, record.event), time)),
                    _ => {
                        self.summed.insert(key, at);
                    }
                }
                at
            }
        };
        let values = p.samples.values_mut(at);
        values[count_column] = values[count_column].saturating_add(1);
        if let Some(w) = weight_column {
            values[w] = values[w].saturating_add(record.period.unwrap_or(0));
        }
        Ok(())
    }

    /// Sets the profile's duration from `times` (the first and last record's), and the
    /// samples' spans when every record had a time: a record lasts until the next one of
    /// its thread and event, the last one the profile's median time between them.
    pub(crate) fn finish(self, p: &mut Profile, times: Option<(i64, i64)>) {
        let Some((origin, last)) = times else { return };
        p.duration_nanos = last.saturating_sub(origin);
        let Some(timed) = self.timed else { return };
        let mut threads: HashMap<(Thread, usize), Vec<usize>> = HashMap::default();
        for (i, (thread, _)) in timed.iter().enumerate() {
            threads.entry(*thread).or_default().push(i);
        }
        let start = |i: usize| timed[i].1.saturating_sub(origin);
        // Each thread's samples and their starts, in time order.
        let threads: Vec<(Vec<usize>, Vec<i64>)> = threads
            .into_values()
            .map(|mut members| {
                members.sort_by_key(|&i| start(i));
                let starts = members.iter().map(|&i| start(i)).collect();
                (members, starts)
            })
            .collect();
        let last = crate::import::median_interval(threads.iter().map(|(_, starts)| starts.as_slice()));
        let mut spans = vec![SampleTime::default(); timed.len()];
        for (members, starts) in &threads {
            for (&i, span) in members.iter().zip(crate::import::spans_until_next(starts, last)) {
                spans[i] = span;
            }
        }
        p.sample_times = spans;
    }
}

/// The unit of an event's periods: software clocks count nanoseconds.
fn period_unit(event: &str) -> &'static str {
    match event {
        "cpu-clock" | "task-clock" => "nanoseconds",
        _ => "count",
    }
}

#[derive(Default)]
struct Builder {
    functions: HashMap<StrId, FunctionId>,
    mappings: HashMap<StrId, MappingId>,
    locations: HashMap<FrameKey, LocationId>,
    /// Locations with inlined frames: their frames, innermost first.
    inlined_locations: HashMap<Vec<FrameKey>, LocationId>,
}

impl Builder {
    /// The locations of a record's frames, leaf first: each inlined frame joins the
    /// frames after it at the same address into one location.
    fn locations(&mut self, p: &mut Profile, frames: &[(FrameKey, bool)]) -> Vec<LocationId> {
        let mut out = Vec::with_capacity(frames.len());
        let mut start = 0;
        for (i, &(key, inlined)) in frames.iter().enumerate() {
            if inlined && frames.get(i + 1).is_some_and(|next| next.0 .0 == key.0) {
                continue;
            }
            out.push(match &frames[start..=i] {
                [(key, _)] => self.location(p, *key),
                group => {
                    let keys: Vec<FrameKey> = group.iter().map(|&(k, _)| k).collect();
                    match self.inlined_locations.get(&keys) {
                        Some(&l) => l,
                        None => {
                            let l = self.new_location(p, &keys);
                            self.inlined_locations.insert(keys, l);
                            l
                        }
                    }
                }
            });
            start = i + 1;
        }
        out
    }

    fn location(&mut self, p: &mut Profile, key: FrameKey) -> LocationId {
        if let Some(&l) = self.locations.get(&key) {
            return l;
        }
        let l = self.new_location(p, &[key]);
        self.locations.insert(key, l);
        l
    }

    /// A location for frames at one address, innermost first.
    fn new_location(&mut self, p: &mut Profile, frames: &[FrameKey]) -> LocationId {
        let mut lines = Vec::with_capacity(frames.len());
        for &(_, symbol, _, line) in frames {
            if let Some(s) = symbol {
                let function = *self.functions.entry(s).or_insert_with(|| {
                    let raw = p.strings.get(s).to_owned();
                    add_native_function(p, &raw, "", 0)
                });
                lines.push(Line { function, line, column: 0 });
            }
        }
        let has_lines = !lines.is_empty();
        let l = p.add_location(frames[0].0, lines);
        // Inlined frames name no DSO; the frame that does names the location's.
        let dso = frames.iter().map(|f| f.2).find(|&d| !p.str(d).is_empty() && p.str(d) != "[unknown]");
        if let Some(dso) = dso {
            let mapping = *self.mappings.entry(dso).or_insert_with(|| {
                let id = MappingId(p.mappings.len() as u32);
                p.mappings.push(Mapping { id: u64::from(id.0) + 1, filename: dso, ..Mapping::default() });
                id
            });
            let m = &mut p.mappings[mapping.0 as usize];
            m.has_functions |= has_lines;
            m.has_inline_frames |= frames.len() > 1;
            p.locations[l.0 as usize].mapping = Some(mapping);
        }
        l
    }
}
