//! What one JFR chunk's constant pools resolve to: stacks as the profile's locations
//! (shared by all chunks) and threads as label values.

use rustc_hash::FxHashMap as HashMap;

use super::metadata::{Metadata, Pools};
use super::reader::Value;
use crate::model::{FunctionId, Line, LocationId, Profile, StrId};

/// Functions and locations shared by all chunks, by name and line.
#[derive(Default)]
pub(super) struct Frames {
    functions: HashMap<String, FunctionId>,
    locations: HashMap<(FunctionId, i64), LocationId>,
}

/// What one chunk's constant pools resolve to.
pub(super) struct Chunk<'m> {
    pub(super) metadata: &'m Metadata,
    pub(super) pools: Pools,
    pub(super) ticks_per_second: i64,
    /// Stack trace id → leaf-first locations.
    pub(super) stacks: HashMap<i64, Vec<LocationId>>,
    pub(super) threads: HashMap<i64, Option<StrId>>,
}

impl Chunk<'_> {
    /// Follows a constant pool reference (a missing entry is `None`, as the JDK shows it).
    fn resolve<'v>(&'v self, value: &'v Value) -> Option<&'v Value> {
        match value {
            Value::Ref(class, id) => self.pools.get(&(*class, *id)),
            v => Some(v),
        }
    }

    /// Field `name` of an object of type `class` as stored (a reference stays one),
    /// with the field's type.
    fn raw<'v>(&self, object: &'v Value, class: u64, name: &str) -> Option<(&'v Value, u64)> {
        let Value::Object(values) = object else { return None };
        let fields = &self.metadata.classes.get(&class)?.fields;
        let i = fields.iter().position(|f| f.name == name)?;
        Some((values.get(i)?, fields[i].class))
    }

    /// Field `name` of an object of type `class`, resolved, with its type.
    pub(super) fn get<'v>(&'v self, object: &'v Value, class: u64, name: &str) -> Option<(&'v Value, u64)> {
        let (value, field_class) = self.raw(object, class, name)?;
        Some((self.resolve(value)?, field_class))
    }

    fn text<'v>(&'v self, value: &'v Value) -> Option<&'v str> {
        match self.resolve(value)? {
            Value::Str(s) => s.as_deref(),
            _ => None,
        }
    }

    /// The text of a `jdk.types.Symbol` field.
    fn symbol<'v>(&'v self, object: &'v Value, class: u64, name: &str) -> Option<&'v str> {
        let (symbol, symbol_class) = self.get(object, class, name)?;
        self.text(self.get(symbol, symbol_class, "string")?.0)
    }

    /// `package.Class.method` of a `jdk.types.Method`.
    fn method_name(&self, method: &Value, class: u64) -> String {
        let name = self.symbol(method, class, "name").unwrap_or("<unknown>");
        let owner = self.get(method, class, "type").and_then(|(c, cc)| self.symbol(c, cc, "name"));
        match owner {
            Some(owner) => format!("{}.{name}", owner.replace('/', ".")),
            None => name.to_owned(),
        }
    }

    /// The leaf-first locations of an event's `stackTrace` (none when it has none).
    pub(super) fn stack(&mut self, p: &mut Profile, frames: &mut Frames, event: &Value, class: u64) -> Vec<LocationId> {
        let Some((&Value::Ref(trace_class, id), _)) = self.raw(event, class, "stackTrace") else { return Vec::new() };
        if let Some(stack) = self.stacks.get(&id) {
            return stack.clone();
        }
        let mut stack = Vec::new();
        let trace = self.pools.get(&(trace_class, id));
        if let Some((Value::Array(items), frame_class)) = trace.and_then(|t| self.get(t, trace_class, "frames")) {
            for frame in items {
                let method = self.get(frame, frame_class, "method");
                let name = method.map_or_else(|| "<unknown>".to_owned(), |(m, mc)| self.method_name(m, mc));
                let line = match self.get(frame, frame_class, "lineNumber") {
                    Some((&Value::Int(l), _)) if l > 0 => l,
                    _ => 0,
                };
                stack.push(frames.location(p, name, line));
            }
        }
        self.stacks.insert(id, stack.clone());
        stack
    }

    /// The `thread` label of an event: its sampled or event thread's Java name, else its
    /// OS name.
    pub(super) fn thread(&mut self, p: &mut Profile, event: &Value, class: u64) -> Option<StrId> {
        let field = self.raw(event, class, "sampledThread").or_else(|| self.raw(event, class, "eventThread"));
        let (&Value::Ref(thread_class, id), _) = field? else { return None };
        if let Some(&name) = self.threads.get(&id) {
            return name;
        }
        let thread = self.pools.get(&(thread_class, id));
        let name = thread
            .and_then(|t| {
                let java = self.get(t, thread_class, "javaName").and_then(|(v, _)| self.text(v));
                java.or_else(|| self.get(t, thread_class, "osName").and_then(|(v, _)| self.text(v)))
            })
            .map(|name| p.strings.intern(name));
        self.threads.insert(id, name);
        name
    }

    /// Ticks (the unit of event durations) in nanoseconds.
    pub(super) fn nanoseconds(&self, ticks: i64) -> i64 {
        let ns = i128::from(ticks) * 1_000_000_000 / i128::from(self.ticks_per_second);
        i64::try_from(ns).unwrap_or(if ns < 0 { i64::MIN } else { i64::MAX })
    }
}

impl Frames {
    fn location(&mut self, p: &mut Profile, name: String, line: i64) -> LocationId {
        let function = *self.functions.entry(name).or_insert_with_key(|name| p.add_function(name, name, "", 0));
        *self
            .locations
            .entry((function, line))
            .or_insert_with(|| p.add_location(0, vec![Line { function, line, column: 0 }]))
    }
}
