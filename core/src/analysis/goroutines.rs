//! Goroutine analysis for dumps (`debug=2`), `debug=1` texts and goroutine pprofs:
//! counts by state, stacks grouped with their state and creator, the blocked ones, and
//! growth between two snapshots (the shape of a goroutine leak).

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;

use serde::{Deserialize, Serialize};

use crate::model::{Location, Profile, SourceFormat};
use crate::{Error, Result};

/// Wait reasons that mean "blocked on the program's own synchronisation or I/O",
/// as Go prints them in dump headers. Runtime-internal idling (GC workers, the
/// finalizer, `force gc (idle)`) and running/runnable/syscall states are not blocked.
pub const BLOCKED_STATES: &[&str] = &[
    "chan send",
    "chan receive",
    "chan send (nil chan)",
    "chan receive (nil chan)",
    "select",
    "select (no cases)",
    "semacquire",
    "sync.Mutex.Lock",
    "sync.RWMutex.RLock",
    "sync.RWMutex.Lock",
    "sync.Cond.Wait",
    "sync.WaitGroup.Wait",
    "IO wait",
    "sleep",
    "GC assist wait",
    "wait for GC cycle",
];

/// Whether a state (as printed in a dump header) is a blocking wait.
pub fn is_blocked(state: &str) -> bool {
    BLOCKED_STATES.contains(&state)
}

/// States Go prints that are not wait reasons.
const NON_WAIT_STATES: &[&str] =
    &["running", "runnable", "syscall", "idle", "dead", "copystack", "preempted", "unknown"];

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GoroutineOptions {
    /// Keep only groups whose frames, state or creator contain this text.
    pub filter: Option<String>,
    /// Longest list of groups returned in `topStacks` (all when `None`).
    pub max_stacks: Option<usize>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GoroutineGroup {
    pub count: u64,
    pub state: String,
    /// The wait reason for waiting goroutines; `None` for running/runnable/syscall.
    pub wait_reason: Option<String>,
    /// Function names, leaf first.
    pub frames: Vec<String>,
    /// `file:line` of each frame, where known.
    pub locations: Vec<String>,
    pub created_by: Option<String>,
    /// Longest wait among the group, in minutes (dumps only).
    pub max_wait_minutes: Option<u64>,
    /// Goroutine ids in the group (dumps only; the first 20).
    pub ids: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GoroutineReport {
    pub goroutine_count: u64,
    /// Counts by state as Go prints it (`chan send`, `runnable`, …).
    pub by_state: BTreeMap<String, u64>,
    /// Groups, largest first.
    pub top_stacks: Vec<GoroutineGroup>,
    pub group_count: usize,
    /// Groups in a blocking wait (see [`BLOCKED_STATES`]), largest first.
    pub blocked_goroutines: Vec<GoroutineGroup>,
    pub blocked_count: u64,
    /// Whether states come from a dump (exact) or were inferred from frames.
    pub states_inferred: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupGrowth {
    #[serde(flatten)]
    pub group: GoroutineGroup,
    pub base_count: u64,
    pub delta: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GoroutineComparison {
    pub base_count: u64,
    pub compare_count: u64,
    /// compare − base.
    pub growth_count: i64,
    /// compare / base; `None` when the base has no goroutines.
    pub goroutine_growth_rate: Option<f64>,
    /// Stacks (frames + creator) in the compare snapshot that the base lacks.
    pub new_stacks: Vec<GoroutineGroup>,
    /// Stacks present in both that grew, by growth.
    pub grown_stacks: Vec<GroupGrowth>,
}

fn frame_name(p: &Profile, loc: &Location) -> Vec<(String, String)> {
    if loc.lines.is_empty() {
        return vec![(format!("{:#x}", loc.address), String::new())];
    }
    loc.lines
        .iter()
        .map(|l| {
            let f = p.function(l.function);
            let at =
                if l.line != 0 { format!("{}:{}", p.str(f.filename), l.line) } else { p.str(f.filename).to_owned() };
            (p.str(f.name).to_owned(), at)
        })
        .collect()
}

/// A wait reason read from the frames nearest the leaf, for sources without states.
fn infer_state(frames: &[String]) -> &'static str {
    const RULES: &[(&str, &str)] = &[
        ("runtime.chansend", "chan send"),
        ("runtime.chanrecv", "chan receive"),
        ("runtime.selectgo", "select"),
        ("runtime.block", "select (no cases)"),
        ("sync.runtime_notifyListWait", "sync.Cond.Wait"),
        ("sync.runtime_Semacquire", "semacquire"),
        ("internal/poll.runtime_pollWait", "IO wait"),
        ("time.Sleep", "sleep"),
        ("syscall.Syscall", "syscall"),
        ("syscall.syscall", "syscall"),
        ("syscall.RawSyscall", "syscall"),
    ];
    for name in frames.iter().take(8) {
        if let Some((_, state)) = RULES.iter().find(|(prefix, _)| name.starts_with(prefix)) {
            return state;
        }
    }
    "unknown"
}

struct Raw {
    count: u64,
    state: String,
    frames: Vec<(String, String)>,
    created_by: Option<String>,
    wait_minutes: Option<u64>,
    id: Option<u64>,
}

fn raw_goroutines(p: &Profile) -> Result<(Vec<Raw>, bool)> {
    if p.source == SourceFormat::GoGoroutineDump {
        let raws = p
            .goroutines
            .iter()
            .map(|g| Raw {
                count: 1,
                state: p.str(g.state).to_owned(),
                frames: g.stack.iter().flat_map(|l| frame_name(p, p.location(*l))).collect(),
                created_by: g
                    .created_by
                    .as_ref()
                    .and_then(|c| frame_name(p, p.location(c.location)).into_iter().next().map(|f| f.0)),
                wait_minutes: g.wait_minutes,
                id: Some(g.id),
            })
            .collect();
        return Ok((raws, false));
    }
    let index = (0..p.sample_types.len()).find(|&i| p.sample_type_name(i) == "goroutine").ok_or_else(|| {
        Error::NotGoroutine(format!(
            "its sample types are {}",
            (0..p.sample_types.len()).map(|i| p.sample_type_name(i)).collect::<Vec<_>>().join(", ")
        ))
    })?;
    let raws = p
        .samples
        .iter()
        .map(|s| {
            let frames: Vec<(String, String)> =
                s.locations.iter().flat_map(|l| frame_name(p, p.location(*l))).collect();
            let names: Vec<String> = frames.iter().map(|f| f.0.clone()).collect();
            Raw {
                count: s.values.get(index).copied().unwrap_or(0).max(0) as u64,
                state: infer_state(&names).to_owned(),
                frames,
                created_by: None,
                wait_minutes: None,
                id: None,
            }
        })
        .filter(|r| r.count > 0)
        .collect();
    Ok((raws, true))
}

/// Counts come from sample values, which a hostile profile can make as large as it
/// likes: sums saturate rather than overflow.
fn total(counts: impl Iterator<Item = u64>) -> u64 {
    counts.fold(0, u64::saturating_add)
}

/// `after − before`, clamped to what an `i64` holds.
fn growth(after: u64, before: u64) -> i64 {
    (i128::from(after) - i128::from(before)).clamp(i64::MIN.into(), i64::MAX.into()) as i64
}

/// (state, frames with locations, creator): what makes two goroutines one group.
type GroupKey = (String, Vec<(String, String)>, Option<String>);

fn group(raws: Vec<Raw>) -> Vec<GoroutineGroup> {
    let mut index: HashMap<GroupKey, usize> = HashMap::default();
    let mut groups: Vec<GoroutineGroup> = Vec::new();
    for r in raws {
        let key = (r.state.clone(), r.frames.clone(), r.created_by.clone());
        let i = *index.entry(key).or_insert_with(|| {
            let wait_reason = (!NON_WAIT_STATES.contains(&r.state.as_str())).then(|| r.state.clone());
            groups.push(GoroutineGroup {
                count: 0,
                state: r.state.clone(),
                wait_reason,
                frames: r.frames.iter().map(|f| f.0.clone()).collect(),
                locations: r.frames.iter().map(|f| f.1.clone()).collect(),
                created_by: r.created_by.clone(),
                max_wait_minutes: None,
                ids: Vec::new(),
            });
            groups.len() - 1
        });
        let g = &mut groups[i];
        g.count = g.count.saturating_add(r.count);
        g.max_wait_minutes = g.max_wait_minutes.max(r.wait_minutes);
        if let Some(id) = r.id {
            if g.ids.len() < 20 {
                g.ids.push(id);
            }
        }
    }
    groups.sort_by(|a, b| {
        b.count.cmp(&a.count).then_with(|| a.state.cmp(&b.state)).then_with(|| a.frames.cmp(&b.frames))
    });
    groups
}

fn matches(g: &GoroutineGroup, needle: &str) -> bool {
    g.state.contains(needle)
        || g.frames.iter().any(|f| f.contains(needle))
        || g.locations.iter().any(|f| f.contains(needle))
        || g.created_by.as_deref().is_some_and(|c| c.contains(needle))
}

pub fn analyze(profile: &Profile, options: &GoroutineOptions) -> Result<GoroutineReport> {
    let (raws, states_inferred) = raw_goroutines(profile)?;
    let mut groups = group(raws);
    if let Some(needle) = options.filter.as_deref().filter(|s| !s.is_empty()) {
        groups.retain(|g| matches(g, needle));
    }
    let mut by_state = BTreeMap::new();
    for g in &groups {
        let n = by_state.entry(g.state.clone()).or_insert(0u64);
        *n = n.saturating_add(g.count);
    }
    let goroutine_count = total(groups.iter().map(|g| g.count));
    let blocked: Vec<GoroutineGroup> = groups.iter().filter(|g| is_blocked(&g.state)).cloned().collect();
    let blocked_count = total(blocked.iter().map(|g| g.count));
    let group_count = groups.len();
    if let Some(max) = options.max_stacks {
        groups.truncate(max);
    }
    Ok(GoroutineReport {
        goroutine_count,
        by_state,
        top_stacks: groups,
        group_count,
        blocked_goroutines: blocked,
        blocked_count,
        states_inferred,
    })
}

/// Growth between two snapshots. Stacks are matched by frames and creator, not state,
/// so a goroutine that moved from `runnable` to `chan send` is not "new".
pub fn compare(base: &Profile, compare: &Profile) -> Result<GoroutineComparison> {
    let (b, _) = raw_goroutines(base)?;
    let (c, _) = raw_goroutines(compare)?;
    let compare_count = total(c.iter().map(|r| r.count));
    let base_groups = group(b);
    let compare_groups = group(c);
    let key = |g: &GoroutineGroup| (g.frames.clone(), g.created_by.clone());
    let mut base_counts: HashMap<(Vec<String>, Option<String>), u64> = HashMap::default();
    for g in &base_groups {
        let n = base_counts.entry(key(g)).or_default();
        *n = n.saturating_add(g.count);
    }
    let mut compare_counts: HashMap<(Vec<String>, Option<String>), (u64, GoroutineGroup)> = HashMap::default();
    for g in compare_groups {
        let e = compare_counts.entry(key(&g)).or_insert((0, g.clone()));
        e.0 = e.0.saturating_add(g.count);
    }
    let mut new_stacks = Vec::new();
    let mut grown_stacks = Vec::new();
    for (k, (count, mut g)) in compare_counts {
        g.count = count;
        match base_counts.get(&k) {
            None => new_stacks.push(g),
            Some(&bc) if count > bc => {
                grown_stacks.push(GroupGrowth { delta: growth(count, bc), base_count: bc, group: g })
            }
            Some(_) => {}
        }
    }
    new_stacks.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.frames.cmp(&b.frames)));
    grown_stacks.sort_by(|a, b| b.delta.cmp(&a.delta).then_with(|| a.group.frames.cmp(&b.group.frames)));
    let base_count = total(base_groups.iter().map(|g| g.count));
    Ok(GoroutineComparison {
        base_count,
        compare_count,
        growth_count: growth(compare_count, base_count),
        goroutine_growth_rate: (base_count > 0).then(|| compare_count as f64 / base_count as f64),
        new_stacks,
        grown_stacks,
    })
}
