//! Python cProfile / profile statistics (`.pstats`, `.prof`): what `cProfile.run(…,
//! filename)`, `python -m cProfile -o`, and `pstats.Stats.dump_stats` write — a
//! `marshal` dump of one dict:
//!
//! ```text
//! {(filename, lineno, funcname): (cc, nc, tt, ct, {caller: (nc, cc, tt, ct)})}
//! ```
//!
//! `cc` counts primitive (non-recursive) calls, `nc` all calls, `tt` is the time in the
//! function itself and `ct` the time including callees, in seconds (floats). A caller
//! entry holds the same four figures for the calls from that caller (`profile.py` writes
//! a bare call count there instead; its time is then taken as the callee's `ct` in
//! proportion to the calls).
//!
//! * Sample types: `time`/`nanoseconds` (self = `tt`, rounded to the nanosecond) and
//!   `calls`/`count` (self = `nc`, pstats' first `ncalls` figure). The default is time.
//! * Functions: name `funcname`, file `filename`, start line `lineno`; built-ins
//!   (`('~', 0, "<built-in method …>")`) have no file.
//! * Stacks come from the call graph, edges weighted by the caller entry's `ct` and `nc`
//!   (see [`super::call_graph`]).
//!
//! The marshal reader handles what pstats files contain (dict, tuples, the str
//! variants, int, long, binary and text floats, `None`/`True`/`False`, bytes, and
//! references with `FLAG_REF`); any other type code is an error with its byte offset.
//! Values live in one arena and a reference is an index into it, so a file of
//! references cannot make the reader allocate more than the bytes it has.

use rustc_hash::FxHashMap as HashMap;

use super::call_graph::CallGraph;
use crate::model::{Line, Profile, SourceFormat};
use crate::{Error, Result};

const FORMAT: &str = "pstats";

/// Deepest nesting the reader follows (pstats needs 4).
const MAX_DEPTH: usize = 32;

const FLAG_REF: u8 = 0x80;

/// Whether the bytes are a marshalled dict whose first key is a 3-tuple: `{` (maybe
/// with `FLAG_REF`) then a small tuple of 3 or a tuple of 3.
pub(crate) fn looks_like_pstats(bytes: &[u8]) -> bool {
    match bytes {
        [d, t, 3, ..] if d & !FLAG_REF == b'{' && t & !FLAG_REF == b')' => true,
        [d, t, 3, 0, 0, 0, ..] if d & !FLAG_REF == b'{' && t & !FLAG_REF == b'(' => true,
        _ => false,
    }
}

#[derive(Clone, Debug)]
enum Value {
    /// A reserved reference slot not yet filled (a container still being read).
    Pending,
    /// `None`, `True`, `False` and bytes: read, never needed.
    Other,
    Int(i64),
    Float(f64),
    Str(String),
    Tuple(Vec<usize>),
    Dict(Vec<(usize, usize)>),
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    arena: Vec<Value>,
    /// `FLAG_REF` objects, in order: arena indices.
    refs: Vec<usize>,
}

fn error(offset: usize, reason: impl Into<String>) -> Error {
    Error::Binary { format: FORMAT, offset, reason: reason.into() }
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(error(
                self.pos,
                format!("truncated: {what} needs {n} bytes, {} left", self.bytes.len() - self.pos),
            ));
        };
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }

    fn i32(&mut self, what: &str) -> Result<i32> {
        let b = self.take(4, what)?;
        Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A 4-byte length that must fit in what is left (each item takes at least a byte).
    fn len(&mut self, what: &str) -> Result<usize> {
        let at = self.pos;
        let n = self.i32(what)?;
        let n = usize::try_from(n).map_err(|_| error(at, format!("negative {what} length {n}")))?;
        if n > self.bytes.len() - self.pos {
            return Err(error(
                at,
                format!("truncated: {what} of length {n}, {} bytes left", self.bytes.len() - self.pos),
            ));
        }
        Ok(n)
    }

    fn push(&mut self, v: Value) -> usize {
        self.arena.push(v);
        self.arena.len() - 1
    }

    fn string(&mut self, n: usize, at: usize) -> Result<Value> {
        let b = self.take(n, "string")?;
        let s = std::str::from_utf8(b).map_err(|e| error(at, format!("string is not UTF-8: {e}")))?;
        Ok(Value::Str(s.to_owned()))
    }

    /// Reads one object; returns its arena index.
    fn object(&mut self, depth: usize) -> Result<usize> {
        let at = self.pos;
        if depth > MAX_DEPTH {
            return Err(error(at, format!("objects nested deeper than {MAX_DEPTH}")));
        }
        let code = self.u8("type code")?;
        let (flag, kind) = (code & FLAG_REF != 0, code & !FLAG_REF);
        if kind == b'r' {
            let i = self.i32("reference")?;
            let slot = usize::try_from(i).ok().and_then(|i| self.refs.get(i).copied());
            return match slot {
                Some(v) if !matches!(self.arena[v], Value::Pending) => Ok(v),
                Some(_) => Err(error(at, format!("reference {i} to an object still being read"))),
                None => Err(error(at, format!("reference {i} to an object not read yet"))),
            };
        }
        // The reference slot is taken before the contents, as CPython's reader does.
        let index = self.push(Value::Pending);
        if flag {
            self.refs.push(index);
        }
        let value = match kind {
            b'N' | b'T' | b'F' => Value::Other,
            b'i' => Value::Int(i64::from(self.i32("int")?)),
            b'l' => {
                let n = self.i32("long size")?;
                let digits = n.unsigned_abs() as usize;
                let b = self.take(digits.checked_mul(2).ok_or_else(|| error(at, "long too large"))?, "long")?;
                let mut v: i64 = 0;
                for d in b.chunks_exact(2).rev() {
                    let digit = i64::from(u16::from_le_bytes([d[0], d[1]]));
                    v = v
                        .checked_mul(1 << 15)
                        .and_then(|v| v.checked_add(digit))
                        .ok_or_else(|| error(at, "int beyond 64 bits"))?;
                }
                Value::Int(if n < 0 { -v } else { v })
            }
            b'g' => {
                let b = self.take(8, "float")?;
                Value::Float(f64::from_le_bytes(b.try_into().expect("8 bytes")))
            }
            b'f' => {
                let n = usize::from(self.u8("float length")?);
                let b = self.take(n, "float")?;
                let s = std::str::from_utf8(b).ok().and_then(|s| s.parse::<f64>().ok());
                Value::Float(s.ok_or_else(|| error(at, "float text is not a number"))?)
            }
            b'z' | b'Z' => {
                let n = usize::from(self.u8("string length")?);
                self.string(n, at)?
            }
            b'a' | b'A' | b'u' | b't' => {
                let n = self.len("string")?;
                self.string(n, at)?
            }
            b's' => {
                let n = self.len("bytes")?;
                self.take(n, "bytes")?;
                Value::Other
            }
            b')' | b'(' => {
                let n = if kind == b')' { usize::from(self.u8("tuple size")?) } else { self.len("tuple")? };
                let mut items = Vec::with_capacity(n.min(self.bytes.len() - self.pos));
                for _ in 0..n {
                    items.push(self.object(depth + 1)?);
                }
                Value::Tuple(items)
            }
            b'{' => {
                let mut items = Vec::new();
                loop {
                    if self.bytes.get(self.pos) == Some(&b'0') {
                        self.pos += 1;
                        break;
                    }
                    let k = self.object(depth + 1)?;
                    let v = self.object(depth + 1)?;
                    items.push((k, v));
                }
                Value::Dict(items)
            }
            _ => return Err(error(at, format!("unknown marshal type code 0x{code:02x}"))),
        };
        self.arena[index] = value;
        Ok(index)
    }
}

/// The parts of one stats entry.
struct Entry {
    key: (String, i64, String),
    nc: i64,
    tt: f64,
    ct: f64,
    /// (caller key index in the arena, nc, ct or None when profile.py's bare count).
    callers: Vec<(usize, i64, Option<f64>)>,
}

fn nanoseconds(seconds: f64, at: usize) -> Result<i64> {
    let ns = (seconds * 1e9).round();
    if !(0.0..9.0e18).contains(&ns) {
        return Err(error(at, format!("time {seconds} s is not a duration")));
    }
    Ok(ns as i64)
}

impl Reader<'_> {
    fn int(&self, v: usize, at: usize, what: &str) -> Result<i64> {
        match self.arena[v] {
            Value::Int(i) if i >= 0 => Ok(i),
            _ => Err(error(at, format!("{what} is not a non-negative int"))),
        }
    }

    fn float(&self, v: usize, at: usize, what: &str) -> Result<f64> {
        match self.arena[v] {
            Value::Float(f) => Ok(f),
            Value::Int(i) => Ok(i as f64),
            _ => Err(error(at, format!("{what} is not a number"))),
        }
    }

    fn key(&self, v: usize, at: usize) -> Result<(String, i64, String)> {
        let bad = || error(at, "a function key is not (filename, lineno, funcname)");
        let Value::Tuple(items) = &self.arena[v] else { return Err(bad()) };
        let [file, line, name] = items[..] else { return Err(bad()) };
        match (&self.arena[file], &self.arena[line], &self.arena[name]) {
            (Value::Str(f), Value::Int(l), Value::Str(n)) => Ok((f.clone(), *l, n.clone())),
            _ => Err(bad()),
        }
    }

    /// `(nc, cc, tt, ct)` from a caller entry, or a bare count.
    fn caller(&self, v: usize, at: usize) -> Result<(i64, Option<f64>)> {
        match &self.arena[v] {
            Value::Int(n) if *n >= 0 => Ok((*n, None)),
            Value::Tuple(t) if t.len() == 4 => {
                Ok((self.int(t[0], at, "caller nc")?, Some(self.float(t[3], at, "caller ct")?)))
            }
            _ => Err(error(at, "a caller entry is neither (nc, cc, tt, ct) nor a call count")),
        }
    }
}

pub fn parse(bytes: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    let mut r = Reader { bytes, pos: 0, arena: Vec::new(), refs: Vec::new() };
    let root = r.object(0)?;
    if r.pos != bytes.len() {
        return Err(error(r.pos, format!("{} bytes after the stats dict", bytes.len() - r.pos)));
    }
    let Value::Dict(items) = r.arena[root].clone() else {
        return Err(error(0, "the marshalled object is not a dict"));
    };
    // Byte offsets are not kept per object; errors in the structure name the dict start.
    let at = 0;
    let mut entries = Vec::with_capacity(items.len());
    for (k, v) in items {
        let key = r.key(k, at)?;
        let Value::Tuple(t) = &r.arena[v] else { return Err(error(at, format!("stats of {key:?} are not a tuple"))) };
        let [_cc, nc, tt, ct, callers] = t[..] else {
            return Err(error(at, format!("stats of {key:?} are not (cc, nc, tt, ct, callers)")));
        };
        let Value::Dict(callers) = &r.arena[callers] else {
            return Err(error(at, format!("callers of {key:?} are not a dict")));
        };
        let callers =
            callers.iter().map(|&(ck, cv)| r.caller(cv, at).map(|(n, ct)| (ck, n, ct))).collect::<Result<Vec<_>>>()?;
        entries.push(Entry {
            nc: r.int(nc, at, "nc")?,
            tt: r.float(tt, at, "tt")?,
            ct: r.float(ct, at, "ct")?,
            key,
            callers,
        });
    }

    let mut p = Profile::new(SourceFormat::Pstats);
    let time = p.value_type("time", "nanoseconds");
    let calls = p.value_type("calls", "count");
    p.sample_types = vec![time, calls];
    p.default_sample_type = time.kind;
    let mut graph = CallGraph::new(2);
    let mut node_of: HashMap<(String, i64, String), usize> = HashMap::default();
    for e in &entries {
        let (file, line, name) = &e.key;
        let file = if file == "~" && *line == 0 { "" } else { file.as_str() };
        let function = p.add_function(name, name, file, *line);
        let frame = p.add_location(0, vec![Line { function, line: *line, column: 0 }]);
        let node = graph.add_node(frame);
        graph.add_self(node, frame, &[nanoseconds(e.tt, at)?, e.nc]).ok_or_else(|| error(at, "overflow"))?;
        graph.set_total(node, &[nanoseconds(e.ct, at)?, e.nc]);
        if node_of.insert(e.key.clone(), node).is_some() {
            return Err(error(at, format!("function {:?} appears twice", e.key)));
        }
    }
    for (callee, e) in entries.iter().enumerate() {
        for &(ck, nc, ct) in &e.callers {
            let key = r.key(ck, at)?;
            // cProfile drops callers it has no entry for; so do we.
            let Some(&caller) = node_of.get(&key) else { continue };
            let ct = match ct {
                Some(ct) => ct,
                None if e.nc > 0 => e.ct * nc as f64 / e.nc as f64,
                None => 0.0,
            };
            graph.add_edge(caller, callee, &[nanoseconds(ct, at)?, nc]).ok_or_else(|| error(at, "overflow"))?;
        }
    }
    graph.into_samples(&mut p, &mut super::Room::new(options))?;
    Ok(p)
}
