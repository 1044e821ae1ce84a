//! What a profile gives away, and a copy without it: file paths, mappings' files and
//! build ids, comments, labels, and function names a pattern matches. The copy has a new
//! string table holding only the strings it still uses, so nothing removed survives in
//! the bytes written from it; samples, values and stacks are unchanged.

use serde::{Deserialize, Serialize};

use super::filters::compile_regex;
use crate::model::{Function, Label, LabelValue, Mapping, StrId, StringTable};
use crate::{Profile, Result};

/// What to do with file paths (functions' source files and mappings' files).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Paths {
    #[default]
    Keep,
    /// `/home/alice/src/app/main.go` becomes `main.go`.
    BaseNames,
    Remove,
}

/// Which labels to remove from samples.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Labels {
    #[default]
    Keep,
    All,
    Keys(Vec<String>),
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SanitizeOptions {
    pub paths: Paths,
    pub build_ids: bool,
    pub comments: bool,
    pub labels: Labels,
    /// Function names (and raw symbols) this regex matches become `redacted-` and a
    /// hash of the name: the same name always gives the same hash, so one function stays
    /// one frame. The hash hides a name from a reader, not from someone who guesses it.
    pub redact: Option<String>,
}

impl SanitizeOptions {
    /// The CLI's `--strip` list, comma-separated: `paths` (or `basenames`), `buildids`,
    /// `comments`, `labels` (all of them) or `labels=KEY,KEY…` (the words after `labels=`
    /// that are not one of these are more keys).
    pub fn strip(list: &str) -> std::result::Result<Self, String> {
        let mut options = SanitizeOptions::default();
        let mut keys: Option<Vec<String>> = None;
        for word in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match word {
                "paths" => options.paths = Paths::Remove,
                "basenames" => options.paths = Paths::BaseNames,
                "buildids" => options.build_ids = true,
                "comments" => options.comments = true,
                "labels" => options.labels = Labels::All,
                _ => match (word.strip_prefix("labels="), keys.as_mut()) {
                    (Some(key), _) => keys.get_or_insert_with(Vec::new).push(key.to_owned()),
                    (None, Some(keys)) => keys.push(word.to_owned()),
                    (None, None) => {
                        return Err(format!(
                            "cannot strip '{word}': choose from paths, basenames, buildids, comments, labels, labels=KEY,KEY"
                        ))
                    }
                },
            }
        }
        if let (Some(keys), false) = (keys, options.labels == Labels::All) {
            options.labels = Labels::Keys(keys);
        }
        Ok(options)
    }

    /// Whether these options remove anything.
    pub fn removes_anything(&self) -> bool {
        *self != SanitizeOptions::default()
    }
}

/// What a profile gives away, for a reader to choose what to strip before sharing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Inventory {
    /// Distinct source file paths of functions and files of mappings.
    pub paths: usize,
    /// Where they are: each path's first three folders (`/home/alice/src/`, or the path
    /// when it is shorter) with how many paths are under them, most first, five at most.
    pub path_roots: Vec<(String, usize)>,
    pub build_ids: usize,
    pub comments: usize,
    /// Label keys on samples, sorted.
    pub label_keys: Vec<String>,
    pub functions: usize,
}

/// What [`sanitize`] could remove from `profile`.
pub fn inventory(profile: &Profile) -> Inventory {
    let files = profile.functions.iter().map(|f| f.filename).chain(profile.mappings.iter().map(|m| m.filename));
    let mut paths: Vec<&str> = files.map(|id| profile.str(id)).filter(|p| !p.is_empty()).collect();
    paths.sort_unstable();
    paths.dedup();
    let mut roots: std::collections::BTreeMap<String, usize> = Default::default();
    for path in &paths {
        // "/home/alice/src/app/main.go" splits as "/", "home/", "alice/", "src/", …
        let leading = usize::from(path.starts_with(['/', '\\']));
        let root: Vec<&str> = path.split_inclusive(['/', '\\']).take(3 + leading).collect();
        *roots.entry(root.concat()).or_default() += 1;
    }
    let mut path_roots: Vec<(String, usize)> = roots.into_iter().collect();
    path_roots.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    path_roots.truncate(5);
    // Sorted and distinct before any is copied: a large profile has a label per sample.
    let keys: std::collections::BTreeSet<&str> =
        profile.samples.iter().flat_map(|s| s.labels).map(|l| profile.str(l.key)).collect();
    let label_keys = keys.into_iter().map(str::to_owned).collect();
    Inventory {
        paths: paths.len(),
        path_roots,
        build_ids: profile.mappings.iter().filter(|m| !profile.str(m.build_id).is_empty()).count(),
        comments: profile.comments.len(),
        label_keys,
        functions: profile.functions.len(),
    }
}

impl Profile {
    /// Returns a copy of `profile` without what `options` removes.
    pub fn sanitize(&self, options: &SanitizeOptions) -> Result<Profile> {
        let profile = self;
        let redact = compile_regex("redact", &options.redact)?;
        let old = &profile.strings;
        // A new table starts with "" as id 0, which stands for every removed string.
        let mut strings = StringTable::default();
        let keep = |id: StrId, strings: &mut StringTable| strings.intern(old.get(id));
        let path = |id: StrId, strings: &mut StringTable| match options.paths {
            Paths::Keep => keep(id, strings),
            Paths::BaseNames => strings.intern(base_name(old.get(id))),
            Paths::Remove => StrId(0),
        };
        let mut out = Profile { strings: StringTable::default(), ..profile.clone() };

        for t in out.sample_types.iter_mut().chain(out.period_type.as_mut()) {
            t.kind = keep(t.kind, &mut strings);
            t.unit = keep(t.unit, &mut strings);
        }
        for f in &mut out.functions {
            let Function { name, system_name, filename, .. } = f;
            for n in [name, system_name] {
                let text = old.get(*n);
                *n = match &redact {
                    Some(re) if re.is_match(text) => strings.intern(&redacted(text)),
                    _ => strings.intern(text),
                };
            }
            *filename = path(*filename, &mut strings);
        }
        for m in &mut out.mappings {
            let Mapping { filename, build_id, .. } = m;
            *filename = path(*filename, &mut strings);
            *build_id = if options.build_ids { StrId(0) } else { keep(*build_id, &mut strings) };
        }
        let drop_label = |key: &str| match &options.labels {
            Labels::Keep => false,
            Labels::All => true,
            Labels::Keys(keys) => keys.iter().any(|k| k == key),
        };
        out.samples.retain(|sample| {
            sample.labels.retain(|l| !drop_label(old.get(l.key)));
            for Label { key, value } in &mut sample.labels {
                *key = keep(*key, &mut strings);
                match value {
                    LabelValue::Str(v) => *v = keep(*v, &mut strings),
                    LabelValue::Num { unit, .. } => *unit = keep(*unit, &mut strings),
                }
            }
            true
        });
        for g in &mut out.goroutines {
            g.state = keep(g.state, &mut strings);
        }
        out.comments =
            if options.comments { Vec::new() } else { out.comments.iter().map(|&c| keep(c, &mut strings)).collect() };
        for id in [&mut out.drop_frames, &mut out.keep_frames, &mut out.default_sample_type, &mut out.doc_url] {
            *id = keep(*id, &mut strings);
        }
        out.strings = strings;
        Ok(out)
    }
}

/// The last component of a path, with either separator (`C:\src\a.rs` gives `a.rs`).
fn base_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// `redacted-` and the FNV-1a hash of `name`: stable across runs and machines.
fn redacted(name: &str) -> String {
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("redacted-{hash:016x}")
}
