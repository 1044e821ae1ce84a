//! Valgrind callgrind (and cachegrind-style) profile text, as `valgrind --tool=callgrind`
//! writes it and KCachegrind / `callgrind_annotate` read it:
//!
//! ```text
//! # callgrind format
//! positions: line
//! events: Ir
//! fl=(1) /src/workload.c
//! fn=(2) main
//! 51 8
//! +1 3
//! cfi=(3) ./malloc/malloc.c
//! cfn=(4) malloc
//! calls=1 3281
//! * 1835
//! ```
//!
//! * Header lines `key: value`; `events:` names the sample types (unit `count`),
//!   `positions:` how many position columns start each cost line (`line` by default).
//! * `fl=`/`fi=`/`fe=`/`fn=` (and `ob=`, `cob=`, `cfi=`/`cfl=`, `cfn=`, `jfi=`, `jfn=`)
//!   with name compression: `(id) name` defines an id, `(id)` refers to it. Files share
//!   one id space, functions another, objects a third.
//! * A cost line is positions (a number, `0x…`, `+N`/`-N` relative, `*` same) followed
//!   by at most one count per event (missing counts are 0). Its counts are self cost of
//!   the current function, except right after `calls=`, where they are the inclusive
//!   cost of that call.
//! * A function is identified as `callgrind_annotate` does, by its file and name
//!   (`file:function`), the file being the one current at `fn=`. Cost under `fi=`/`fe=`
//!   (inlined code from another source file) is shown at a location of its own whose
//!   innermost line is a function of the same name in that file, so self cost per
//!   `file:function` is exactly `callgrind_annotate --inclusive=no`'s.
//! * `jump=`/`jcnd=` lines are ignored (as `callgrind_annotate` does); `summary:` and
//!   `totals:` are not needed (the totals are the sum of the cost lines).
//!
//! Stacks come from the call graph: see [`super::call_graph`]. Line numbers are not kept
//! (one location per function and source file).

use rustc_hash::FxHashMap as HashMap;

use super::call_graph::CallGraph;
use super::text::{self, text_error};
use crate::model::{FunctionId, Line, LocationId, Profile, SourceFormat, StrId};
use crate::Result;

const FORMAT: &str = "callgrind";

/// Whether the text is callgrind: `# callgrind format` first, or an `events:` header
/// line preceded only by `key: value` headers, comments and blank lines.
pub(crate) fn looks_like_callgrind(bytes: &[u8]) -> bool {
    if super::text::starts_binary(bytes) {
        return false;
    }
    let head = &bytes[..bytes.len().min(16 * 1024)];
    let text = String::from_utf8_lossy(head);
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let Some(first) = lines.clone().next() else { return false };
    if first == "# callgrind format" {
        return true;
    }
    for line in lines.by_ref().take(64) {
        if line.starts_with("events:") {
            return true;
        }
        if line.starts_with('#') {
            continue;
        }
        let Some((key, _)) = line.split_once(':') else { return false };
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            return false;
        }
    }
    false
}

/// One name space of compressed names.
#[derive(Default)]
struct Names {
    by_id: HashMap<u64, String>,
}

impl Names {
    /// `(id) name`, `(id)` or `name`.
    fn resolve(&mut self, value: &str, line: usize, what: &str) -> Result<String> {
        let value = value.trim();
        let Some(rest) = value.strip_prefix('(') else { return Ok(value.to_owned()) };
        let (id, name) =
            rest.split_once(')').ok_or_else(|| text_error(FORMAT, line, format!("{what} '{value}' has no ')'")))?;
        let id: u64 =
            id.trim().parse().map_err(|_| text_error(FORMAT, line, format!("{what} id '{id}' is not a number")))?;
        let name = name.trim();
        if name.is_empty() {
            return self
                .by_id
                .get(&id)
                .cloned()
                .ok_or_else(|| text_error(FORMAT, line, format!("{what} id ({id}) was never defined")));
        }
        self.by_id.insert(id, name.to_owned());
        Ok(name.to_owned())
    }
}

struct Parser {
    p: Profile,
    graph: CallGraph,
    events: usize,
    positions: usize,
    files: Names,
    fns: Names,
    objects: Names,
    functions: HashMap<(StrId, StrId), FunctionId>,
    /// `(file, name)` → node.
    nodes: HashMap<(StrId, StrId), usize>,
    node_function: Vec<FunctionId>,
    /// `(node, source file)` → location for self cost.
    leaves: HashMap<(usize, StrId), LocationId>,
    file: StrId,
    current: Option<usize>,
    callee_file: Option<StrId>,
    callee: Option<usize>,
    /// Line of a `calls=` whose cost line is still to come.
    pending_call: Option<usize>,
}

impl Parser {
    fn function(&mut self, name: StrId, file: StrId) -> FunctionId {
        let p = &mut self.p;
        *self.functions.entry((name, file)).or_insert_with(|| {
            let id = FunctionId(p.functions.len() as u32);
            // `valgrind --demangle=no` leaves symbols mangled; the raw one stays the system name.
            let shown = super::demangle::demangle(p.strings.get(name)).map_or(name, |d| p.strings.intern(&d));
            p.functions.push(crate::model::Function {
                id: u64::from(id.0) + 1,
                name: shown,
                system_name: name,
                filename: file,
                start_line: 0,
            });
            id
        })
    }

    fn node(&mut self, file: StrId, name: StrId) -> usize {
        if let Some(&n) = self.nodes.get(&(file, name)) {
            return n;
        }
        let function = self.function(name, file);
        let frame = self.p.add_location(0, vec![Line { function, line: 0, column: 0 }]);
        let n = self.graph.add_node(frame);
        self.node_function.push(function);
        self.leaves.insert((n, file), frame);
        self.nodes.insert((file, name), n);
        n
    }

    fn leaf(&mut self, node: usize, file: StrId) -> LocationId {
        if let Some(&l) = self.leaves.get(&(node, file)) {
            return l;
        }
        let outer = self.node_function[node];
        let name = self.p.functions[outer.0 as usize].name;
        let inner = self.function(name, file);
        let lines = vec![Line { function: inner, line: 0, column: 0 }, Line { function: outer, line: 0, column: 0 }];
        let l = self.p.add_location(0, lines);
        self.leaves.insert((node, file), l);
        l
    }

    /// Positions then counts; returns the counts, one per event.
    fn cost_line(&self, line: &str, n: usize) -> Result<Vec<i64>> {
        let mut tokens = line.split_whitespace();
        for _ in 0..self.positions {
            let Some(t) = tokens.next() else { break };
            let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
            let ok = t == "*"
                || digits.strip_prefix("0x").map_or_else(
                    || !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()),
                    |h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()),
                );
            if !ok {
                return Err(text_error(FORMAT, n, format!("'{t}' is not a position")));
            }
        }
        let mut values = vec![0i64; self.events];
        for (i, t) in tokens.enumerate() {
            if i >= self.events {
                return Err(text_error(FORMAT, n, format!("more counts than the {} events", self.events)));
            }
            values[i] = t
                .parse::<u64>()
                .ok()
                .and_then(|v| i64::try_from(v).ok())
                .ok_or_else(|| text_error(FORMAT, n, format!("'{t}' is not a count")))?;
        }
        Ok(values)
    }
}

pub fn parse(bytes: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    let text = text::decode(bytes);
    let mut s = Parser {
        p: Profile::new(SourceFormat::Callgrind),
        graph: CallGraph::new(0),
        events: 0,
        positions: 1,
        files: Names::default(),
        fns: Names::default(),
        objects: Names::default(),
        functions: HashMap::default(),
        nodes: HashMap::default(),
        node_function: Vec::new(),
        leaves: HashMap::default(),
        file: StrId(0),
        current: None,
        callee_file: None,
        callee: None,
        pending_call: None,
    };
    let mut last_line = 0;
    for (n, raw) in text::numbered(&text) {
        last_line = n;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let first = line.as_bytes()[0];
        if first.is_ascii_digit() || matches!(first, b'+' | b'-' | b'*') {
            if s.events == 0 {
                return Err(text_error(FORMAT, n, "cost line before the 'events:' header"));
            }
            let values = s.cost_line(line, n)?;
            let overflow = || text_error(FORMAT, n, "cost overflows 64 bits");
            let Some(current) = s.current else {
                return Err(text_error(FORMAT, n, "cost line before any 'fn='"));
            };
            if s.pending_call.take().is_some() {
                let callee = s.callee.take().ok_or_else(|| text_error(FORMAT, n, "'calls=' without 'cfn='"))?;
                s.graph.add_edge(current, callee, &values).ok_or_else(overflow)?;
            } else {
                let leaf = s.leaf(current, s.file);
                s.graph.add_self(current, leaf, &values).ok_or_else(overflow)?;
            }
            continue;
        }
        if let Some(call) = s.pending_call {
            return Err(text_error(FORMAT, n, format!("'calls=' on line {call} is not followed by its cost line")));
        }
        let spec = line.find('=').filter(|&eq| line.find(':').is_none_or(|colon| eq < colon));
        if let Some((key, value)) = spec.map(|eq| (&line[..eq], &line[eq + 1..])) {
            match key {
                "fl" | "fi" | "fe" => {
                    let name = s.files.resolve(value, n, "file")?;
                    s.file = s.p.strings.intern(&name);
                }
                "fn" => {
                    let name = s.fns.resolve(value, n, "function")?;
                    let name = s.p.strings.intern(&name);
                    s.current = Some(s.node(s.file, name));
                    s.callee_file = None;
                }
                "cfi" | "cfl" => {
                    let name = s.files.resolve(value, n, "file")?;
                    s.callee_file = Some(s.p.strings.intern(&name));
                }
                "cfn" => {
                    let name = s.fns.resolve(value, n, "function")?;
                    let name = s.p.strings.intern(&name);
                    let file = s.callee_file.take().unwrap_or(s.file);
                    s.callee = Some(s.node(file, name));
                }
                "ob" | "cob" => {
                    s.objects.resolve(value, n, "object")?;
                }
                "jfi" => {
                    s.files.resolve(value, n, "file")?;
                }
                "jfn" => {
                    s.fns.resolve(value, n, "function")?;
                }
                "jump" | "jcnd" => {}
                "calls" => {
                    let count = value.split_whitespace().next().unwrap_or("");
                    if count.parse::<u64>().is_err() {
                        return Err(text_error(FORMAT, n, format!("'calls={value}': '{count}' is not a call count")));
                    }
                    if s.current.is_none() {
                        return Err(text_error(FORMAT, n, "'calls=' before any 'fn='"));
                    }
                    if s.callee.is_none() {
                        return Err(text_error(FORMAT, n, "'calls=' without a preceding 'cfn='"));
                    }
                    s.pending_call = Some(n);
                }
                _ => return Err(text_error(FORMAT, n, format!("unknown specification '{key}='"))),
            }
            continue;
        }
        if let Some((key, value)) = line.split_once(':') {
            match key.trim() {
                "events" => {
                    if s.events != 0 || !s.nodes.is_empty() {
                        return Err(text_error(FORMAT, n, "'events:' after the first 'events:' or 'fn='"));
                    }
                    let names: Vec<&str> = value.split_whitespace().collect();
                    if names.is_empty() {
                        return Err(text_error(FORMAT, n, "'events:' names no event"));
                    }
                    for name in &names {
                        let vt = s.p.value_type(name, "count");
                        s.p.sample_types.push(vt);
                    }
                    s.events = names.len();
                    s.graph = CallGraph::new(names.len());
                    s.p.default_sample_type = s.p.strings.intern(names[0]);
                }
                "positions" => {
                    let count = value.split_whitespace().count();
                    if count == 0 || count > 8 {
                        return Err(text_error(FORMAT, n, format!("'positions:{value}' is not a list of positions")));
                    }
                    s.positions = count;
                }
                "cmd" | "creator" => {
                    let comment = s.p.strings.intern(&format!("{}: {}", key.trim(), value.trim()));
                    s.p.comments.push(comment);
                }
                _ => {}
            }
            continue;
        }
        return Err(text_error(FORMAT, n, format!("unexpected line '{}'", line.chars().take(60).collect::<String>())));
    }
    if let Some(call) = s.pending_call {
        return Err(text_error(FORMAT, last_line.max(call), format!("'calls=' on line {call} has no cost line")));
    }
    if s.events == 0 {
        return Err(text_error(FORMAT, last_line.max(1), "no 'events:' header"));
    }
    let Parser { mut p, graph, .. } = s;
    graph.into_samples(&mut p, &mut super::Room::new(options))?;
    Ok(p)
}
