//! V8 tick logs (`node --prof`, `d8 --prof`: `isolate-0x…-v8.log`), the input of
//! `node --prof-process`. The log is a sequence of comma-separated events:
//!
//! * `code-creation,Type,kind,time,address,size,"name"[,…]` puts generated code (a JS
//!   function, a builtin, a stub, a bytecode handler…) at an address range;
//!   `code-move,from,to` and `code-delete,address` move and remove it, so a tick is
//!   symbolized with the code as it was when the tick was logged.
//! * `shared-library,"path",start,end,…` is native code, named by its library (the log
//!   has no native symbols; `--prof-process` would run `nm`).
//! * `tick,pc,time,is_external_callback,tos_or_callback,vm_state,return addresses…` is
//!   one sample: the pc, then the callers' return addresses, innermost first.
//!
//! As V8's tick processor does, a tick in an external callback is charged to the
//! callback (its address is in the fourth field), otherwise a top of stack inside a JS
//! function is taken as the pc's caller, and an unknown pc is `(unknown)` while unknown
//! callers are left out. JS functions (`LazyCompile`, `Function`,
//! `Script`) are named by their name, file and line, so all compiled versions of one
//! function are one function; other code is `Type: name` (`Builtin: ArrayPush`), as the
//! tick processor prints it. Other events are skipped.
//!
//! Sample type: `samples/count`, one per tick.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;

use super::text::{self, text_error};
use crate::model::{Line, LocationId, Sample, SourceFormat};
use crate::{Profile, Result};

const FORMAT: &str = "V8 tick log";

/// Whether the first line of a text starts a V8 log.
pub(crate) fn is_v8_log(first: &str) -> bool {
    ["v8-version,", "shared-library,\"", "code-creation,"].iter().any(|p| first.starts_with(p))
}

/// Splits a log line at commas outside double quotes; quotes are removed and `\"`,
/// `\\` and `\xHH` escapes inside them resolved.
fn fields(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let (mut quoted, mut chars) = (false, line.chars());
    while let Some(c) = chars.next() {
        let field = out.last_mut().expect("one field at least");
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(String::new()),
            '\\' if quoted => match chars.next() {
                Some('x') => {
                    let hex: String = chars.by_ref().take(2).collect();
                    field.extend(u8::from_str_radix(&hex, 16).ok().map(char::from));
                }
                Some(escaped) => field.push(escaped),
                None => {}
            },
            _ => field.push(c),
        }
    }
    out
}

fn address(s: &str, line: usize) -> Result<u64> {
    s.strip_prefix("0x")
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .ok_or_else(|| text_error(FORMAT, line, format!("'{s}' is not a hex address")))
}

/// Whether code of this type is a JS function (V8 logs its SharedFunctionInfo).
fn is_js(kind: &str) -> bool {
    matches!(kind, "LazyCompile" | "Function" | "Script")
}

/// The name, file and line a code object is shown with.
fn describe(kind: &str, name: &str) -> (String, String, i64) {
    if !is_js(kind) {
        return (format!("{kind}: {name}"), String::new(), 0);
    }
    // `fib /app/fib.js:3:13`, ` bootstrap_node.js:10:10` (anonymous), `events.js`.
    let (function, place) = name.rsplit_once(' ').unwrap_or(("", name));
    let function = if function.is_empty() { "(anonymous)" } else { function };
    let mut parts = place.rsplitn(3, ':');
    let (_column, line, file) = (parts.next(), parts.next(), parts.next());
    match (file, line.and_then(|l| l.parse().ok())) {
        (Some(file), Some(line)) => (function.to_owned(), file.to_owned(), line),
        _ => (function.to_owned(), place.to_owned(), 0),
    }
}

/// Address ranges by start: start → (end, what is there).
type Ranges<T> = BTreeMap<u64, (u64, T)>;

/// What covers `address`: the range starting last at or before it, if it reaches it.
fn lookup<T: Copy>(ranges: &Ranges<T>, address: u64) -> Option<T> {
    ranges.range(..=address).next_back().filter(|(_, (end, _))| address < *end).map(|(_, &(_, v))| v)
}

/// A code object: where it is shown, and whether it is a JS function.
#[derive(Copy, Clone)]
struct Code {
    location: LocationId,
    js: bool,
}

/// Symbolization state: code and libraries by address, and the locations made.
#[derive(Default)]
struct Symbols {
    code: Ranges<Code>,
    libraries: Ranges<LocationId>,
    /// One location per function: all compiled versions of it.
    functions: HashMap<(String, String, i64), LocationId>,
}

impl Symbols {
    fn location(&mut self, p: &mut Profile, name: String, file: String, line: i64) -> LocationId {
        let key = (name, file, line);
        if let Some(&l) = self.functions.get(&key) {
            return l;
        }
        let function = super::demangle::add_native_function(p, &key.0, &key.1, line);
        let l = p.add_location(0, vec![Line { function, line, column: 0 }]);
        self.functions.insert(key, l);
        l
    }

    fn find(&self, address: u64) -> Option<LocationId> {
        lookup(&self.code, address).map(|c| c.location).or_else(|| lookup(&self.libraries, address))
    }
}

pub fn parse(bytes: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    let mut room = super::Room::new(options);
    let text = text::decode(bytes);
    let mut p = Profile::new(SourceFormat::V8Log);
    p.sample_types = vec![p.value_type("samples", "count")];
    let mut symbols = Symbols::default();
    for (n, line) in text::numbered(&text) {
        let event = line.split(',').next().unwrap_or("");
        if !matches!(event, "code-creation" | "code-move" | "code-delete" | "shared-library" | "tick") {
            continue;
        }
        let f = fields(line);
        let field = |i: usize| {
            f.get(i).map(String::as_str).ok_or_else(|| text_error(FORMAT, n, format!("{event} has too few fields")))
        };
        match event {
            "code-creation" => {
                let start = address(field(4)?, n)?;
                let size: u64 =
                    field(5)?.parse().map_err(|_| text_error(FORMAT, n, "the code size is not a number"))?;
                let end = start
                    .checked_add(size)
                    .ok_or_else(|| text_error(FORMAT, n, "the code ends past the address space"))?;
                let (name, file, line) = describe(field(1)?, field(6)?);
                let location = symbols.location(&mut p, name, file, line);
                let code = Code { location, js: is_js(field(1)?) };
                // New code replaces what started inside its range, as V8's code map does.
                let covered: Vec<u64> = symbols.code.range(start..end).map(|(&s, _)| s).collect();
                for s in covered {
                    symbols.code.remove(&s);
                }
                symbols.code.insert(start, (end, code));
            }
            "code-move" => {
                let (from, to) = (address(field(1)?, n)?, address(field(2)?, n)?);
                if let Some((end, code)) = symbols.code.remove(&from) {
                    symbols.code.insert(to, (to.saturating_add(end - from), code));
                }
            }
            "code-delete" => {
                symbols.code.remove(&address(field(1)?, n)?);
            }
            "shared-library" => {
                let (start, end) = (address(field(2)?, n)?, address(field(3)?, n)?);
                let location = symbols.location(&mut p, field(1)?.to_owned(), String::new(), 0);
                symbols.libraries.insert(start, (end, location));
            }
            _ => {
                let pc = address(field(1)?, n)?;
                let external = field(3)? == "1";
                let callback = address(field(4)?, n)?;
                field(5)?; // the VM state: a tick has all its fixed fields
                let leaf = if external { callback } else { pc };
                let leaf = match symbols.find(leaf) {
                    Some(l) => l,
                    None => symbols.location(&mut p, "(unknown)".into(), String::new(), 0),
                };
                let mut stack = vec![leaf];
                // Outside a callback, a top of stack inside a JS function is a caller
                // that has not set up its frame yet (V8's tick processor keeps it too).
                if !external {
                    stack.extend(lookup(&symbols.code, callback).filter(|c| c.js).map(|c| c.location));
                }
                for caller in &f[6..] {
                    stack.extend(symbols.find(address(caller, n)?));
                }
                room.push(&mut p.samples, Sample { locations: stack, values: vec![1], labels: Vec::new() })?;
            }
        }
    }
    if p.samples.is_empty() {
        return Err(text_error(FORMAT, 1, "no tick events (was the profiler running?)"));
    }
    Ok(p)
}
