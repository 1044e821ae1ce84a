//! Go goroutine dumps (`/debug/pprof/goroutine?debug=2`, or a panic traceback): one
//! record per goroutine with its status, wait time, frames and creator. Goroutines with
//! the same stack and state also become one aggregated sample, so every analysis that
//! works on samples (top, flame graph, diff) works on dumps too.

use rustc_hash::FxHashMap as HashMap;

use super::text::{self, text_error};
use super::Room;
use crate::model::{
    CreatedBy, FunctionId, Goroutine, Label, LabelValue, Line, LocationId, Profile, Sample, Samples, SourceFormat,
    StrId,
};
use crate::Result;
use std::collections::hash_map::Entry;

const FORMAT: &str = "goroutine dump";

struct Builder {
    profile: Profile,
    functions: HashMap<(StrId, StrId), FunctionId>,
    locations: HashMap<(FunctionId, i64), LocationId>,
}

impl Builder {
    fn frame(&mut self, function: &str, file: &str, line: i64) -> LocationId {
        let name = self.profile.strings.intern(function);
        let filename = self.profile.strings.intern(file);
        let f = match self.functions.get(&(name, filename)) {
            Some(&f) => f,
            None => {
                let f = self.profile.add_function(function, function, file, 0);
                self.functions.insert((name, filename), f);
                f
            }
        };
        match self.locations.get(&(f, line)) {
            Some(&l) => l,
            None => {
                let l = self.profile.add_location(0, vec![Line { function: f, line, column: 0 }]);
                self.locations.insert((f, line), l);
                l
            }
        }
    }
}

/// `goroutine 17 [chan receive, 12 minutes, locked to thread]:` → (id, status, minutes, locked).
fn parse_header(line: &str) -> Option<(u64, &str, Option<u64>, bool)> {
    let rest = line.strip_prefix("goroutine ")?;
    let (id, rest) = rest.split_once(' ')?;
    let id = id.parse().ok()?;
    let open = rest.find('[')?;
    let close = rest.rfind("]:")?;
    let mut parts = rest.get(open + 1..close)?.split(", ");
    let status = parts.next()?;
    let (mut minutes, mut locked) = (None, false);
    for part in parts {
        if part == "locked to thread" {
            locked = true;
        } else if let Some(m) = part.strip_suffix(" minutes").or_else(|| part.strip_suffix(" minute")) {
            minutes = m.parse().ok();
        }
    }
    Some((id, status, minutes, locked))
}

/// `main.(*T).run(0xc000, {0x1, 0x2})` → `main.(*T).run`. Arguments never contain
/// parentheses, so the last `(` opens the argument list.
fn function_name(line: &str) -> &str {
    match line.rfind('(') {
        Some(i) if line.ends_with(')') && i > 0 => &line[..i],
        _ => line,
    }
}

/// `\t/src/x.go:123 +0x1c6` → (`/src/x.go`, 123).
fn file_line(line: &str) -> Option<(&str, i64)> {
    let t = line.trim();
    let t = t.rsplit_once(" +0x").map_or(t, |(a, _)| a);
    let (file, n) = t.rsplit_once(':')?;
    Some((file, n.trim().parse().ok()?))
}

pub fn parse(bytes: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    let text = text::decode(bytes);
    let mut b = Builder {
        profile: Profile::new(SourceFormat::GoGoroutineDump),
        functions: HashMap::default(),
        locations: HashMap::default(),
    };
    let vt = b.profile.value_type("goroutine", "count");
    b.profile.sample_types = vec![vt];
    b.profile.period_type = Some(vt);
    b.profile.period = 1;

    let mut lines = text::numbered(&text).peekable();
    while let Some((n, line)) = lines.next() {
        let Some((id, status, wait_minutes, locked_to_thread)) = parse_header(line.trim_end()) else {
            // Text around the goroutines (panic messages, signal info) is not ours.
            continue;
        };
        let state = b.profile.strings.intern(status);
        let mut stack = Vec::new();
        let mut created_by = None;
        while let Some(&(fn_n, fn_line)) = lines.peek() {
            let fn_line = fn_line.trim_end();
            if fn_line.is_empty() || parse_header(fn_line).is_some() {
                break;
            }
            lines.next();
            if fn_line.starts_with("...") || fn_line.starts_with('\t') && fn_line.contains("stack unavailable") {
                continue; // "...additional frames elided..." / running on another thread
            }
            let (creator, parent) = match fn_line.strip_prefix("created by ") {
                Some(c) => match c.rsplit_once(" in goroutine ") {
                    Some((f, g)) => (Some(f), g.trim().parse().ok()),
                    None => (Some(c), None),
                },
                None => (None, None),
            };
            let (file, line_no) =
                match lines.peek().and_then(|&(_, l)| l.starts_with('\t').then(|| file_line(l)).flatten()) {
                    Some(fl) => {
                        lines.next();
                        fl
                    }
                    None => {
                        return Err(text_error(
                            FORMAT,
                            fn_n + 1,
                            format!("goroutine {id} (line {n}): expected '\\t<file>:<line>' after '{fn_line}'"),
                        ))
                    }
                };
            match creator {
                Some(f) => {
                    let location = b.frame(f, file, line_no);
                    created_by = Some(CreatedBy { location, parent_goroutine: parent });
                }
                None => stack.push(b.frame(function_name(fn_line), file, line_no)),
            }
        }
        b.profile.goroutines.push(Goroutine { id, state, wait_minutes, locked_to_thread, stack, created_by });
    }
    if b.profile.goroutines.is_empty() {
        return Err(text_error(FORMAT, 1, "no 'goroutine N [status]:' header found"));
    }
    aggregate_samples(&mut b.profile, &mut Room::new(options))?;
    Ok(b.profile)
}

/// One sample per distinct (stack, state), labelled with the state.
fn aggregate_samples(p: &mut Profile, room: &mut Room) -> Result<()> {
    let state_key = p.strings.intern("state");
    let mut index: HashMap<(&[LocationId], StrId), usize> = HashMap::default();
    let mut samples = Samples::new();
    for g in &p.goroutines {
        let i = match index.entry((g.stack.as_slice(), g.state)) {
            Entry::Occupied(e) => *e.get(),
            Entry::Vacant(e) => {
                let labels = vec![Label { key: state_key, value: LabelValue::Str(g.state) }];
                room.push(&mut samples, Sample { locations: g.stack.clone(), values: vec![0], labels })?;
                *e.insert(samples.len() - 1)
            }
        };
        samples.values_mut(i)[0] += 1;
    }
    p.samples = samples;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_variants() {
        assert_eq!(parse_header("goroutine 1 [running]:"), Some((1, "running", None, false)));
        assert_eq!(
            parse_header("goroutine 17 [chan receive, 12 minutes, locked to thread]:"),
            Some((17, "chan receive", Some(12), true))
        );
        assert_eq!(
            parse_header("goroutine 9 gp=0xc000 m=nil [select (no cases)]:"),
            Some((9, "select (no cases)", None, false))
        );
        assert_eq!(parse_header("goroutine x [running]:"), None);
    }

    #[test]
    fn parses_frames_and_creator() {
        let dump = "goroutine 7 [chan send, 3 minutes]:\nmain.(*T).run(0xc000, {0x1, 0x2})\n\t/src/a.go:10 +0x1f\nmain.helper(...)\n\t/src/a.go:20\ncreated by main.start in goroutine 1\n\t/src/a.go:30 +0x5\n\ngoroutine 8 [runnable]:\nmain.f()\n\t/src/b.go:1 +0x1\n";
        let p = parse(dump.as_bytes(), &Default::default()).unwrap();
        assert_eq!(p.goroutines.len(), 2);
        let g = &p.goroutines[0];
        assert_eq!((g.id, p.str(g.state), g.wait_minutes), (7, "chan send", Some(3)));
        let names: Vec<&str> = g.stack.iter().map(|l| p.line_function_name(&p.location(*l).lines[0])).collect();
        assert_eq!(names, ["main.(*T).run", "main.helper"]);
        let c = g.created_by.as_ref().unwrap();
        assert_eq!(p.line_function_name(&p.location(c.location).lines[0]), "main.start");
        assert_eq!(c.parent_goroutine, Some(1));
        assert_eq!(p.total(0), 2);
    }

    #[test]
    fn frame_without_file_line_is_an_error_with_line_number() {
        let err = parse(b"goroutine 1 [running]:\nmain.f()\nmain.g()\n", &Default::default()).unwrap_err();
        assert!(err.to_string().contains("line 3"), "{err}");
    }
}
