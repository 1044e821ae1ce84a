//! Android simpleperf `report-sample` protobuf (`simpleperf report-sample --protobuf`,
//! what Android Studio and Firefox Profiler read): `SIMPLEPERF`, a 16-bit version, then
//! records, each a 32-bit little-endian size and a `Record` message, until a size of 0.
//!
//! * Each `Sample` record is one sample: its call chain, leaf first, names frames by
//!   file and symbol index (`file+0xaddress` when the symbol is unknown).
//! * Sample types: samples/count, and one per event type of the recording holding each
//!   sample's `event_count` (nanoseconds for `cpu-clock` and `task-clock`).
//! * The thread's name becomes a `thread` label.

use rustc_hash::FxHashMap as HashMap;

use prost::Message;

use super::named_frames::NamedFrames;
use crate::model::{Label, LabelValue, SourceFormat};
use crate::{Error, Profile, Result};

const FORMAT: &str = "simpleperf report-sample";
pub(crate) const MAGIC: &[u8] = b"SIMPLEPERF";

/// `simpleperf_report.proto`, the messages and fields read.
mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Record {
        #[prost(message, optional, tag = "1")]
        pub sample: Option<Sample>,
        #[prost(message, optional, tag = "3")]
        pub file: Option<File>,
        #[prost(message, optional, tag = "4")]
        pub thread: Option<Thread>,
        #[prost(message, optional, tag = "5")]
        pub meta_info: Option<MetaInfo>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sample {
        #[prost(int32, optional, tag = "2")]
        pub thread_id: Option<i32>,
        #[prost(message, repeated, tag = "3")]
        pub callchain: Vec<CallChainEntry>,
        #[prost(uint64, optional, tag = "4")]
        pub event_count: Option<u64>,
        #[prost(uint32, optional, tag = "5")]
        pub event_type_id: Option<u32>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct CallChainEntry {
        #[prost(uint64, optional, tag = "1")]
        pub vaddr_in_file: Option<u64>,
        #[prost(uint32, optional, tag = "2")]
        pub file_id: Option<u32>,
        #[prost(int32, optional, tag = "3")]
        pub symbol_id: Option<i32>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct File {
        #[prost(uint32, optional, tag = "1")]
        pub id: Option<u32>,
        #[prost(string, optional, tag = "2")]
        pub path: Option<String>,
        #[prost(string, repeated, tag = "3")]
        pub symbol: Vec<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Thread {
        #[prost(uint32, optional, tag = "1")]
        pub thread_id: Option<u32>,
        #[prost(string, optional, tag = "3")]
        pub thread_name: Option<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct MetaInfo {
        #[prost(string, repeated, tag = "1")]
        pub event_type: Vec<String>,
    }
}

fn binary_error(offset: usize, reason: impl Into<String>) -> Error {
    Error::Binary { format: FORMAT, offset, reason: reason.into() }
}

/// The records after the magic and version, each with its offset.
fn records(bytes: &[u8]) -> Result<Vec<(usize, proto::Record)>> {
    let mut at = MAGIC.len() + 2;
    let mut out = Vec::new();
    loop {
        let size = bytes.get(at..at + 4).ok_or_else(|| binary_error(at, "the file ends before its end record"))?;
        let size = u32::from_le_bytes([size[0], size[1], size[2], size[3]]) as usize;
        at += 4;
        if size == 0 {
            return Ok(out);
        }
        let body = bytes.get(at..at.saturating_add(size)).ok_or_else(|| binary_error(at, "record past the end"))?;
        let record = proto::Record::decode(body).map_err(|e| binary_error(at, format!("malformed record: {e}")))?;
        out.push((at, record));
        at += size;
    }
}

/// The unit of an event's counts.
fn event_unit(event: &str) -> &'static str {
    if matches!(event, "cpu-clock" | "task-clock") {
        "nanoseconds"
    } else {
        "count"
    }
}

pub fn parse(bytes: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    let records = records(bytes)?;
    let mut files: HashMap<u32, proto::File> = HashMap::default();
    let mut threads: HashMap<u32, String> = HashMap::default();
    let mut events: Vec<String> = Vec::new();
    let mut samples = Vec::new();
    for (at, record) in records {
        if let Some(file) = record.file {
            files.insert(file.id.unwrap_or(0), file);
        } else if let Some(thread) = record.thread {
            threads.insert(thread.thread_id.unwrap_or(0), thread.thread_name.unwrap_or_default());
        } else if let Some(meta) = record.meta_info {
            events = meta.event_type;
        } else if let Some(sample) = record.sample {
            samples.push((at, sample));
        }
    }
    let mut types = vec![("samples".to_owned(), "count")];
    types.extend(events.iter().map(|e| (e.clone(), event_unit(e))));
    let type_refs: Vec<(&str, &str)> = types.iter().map(|(k, u)| (k.as_str(), *u)).collect();
    let mut frames = NamedFrames::new(SourceFormat::Simpleperf, &type_refs, options);
    for (at, sample) in samples {
        let mut stack = Vec::with_capacity(sample.callchain.len());
        for entry in &sample.callchain {
            let file_id = entry.file_id.unwrap_or(0);
            let file = files
                .get(&file_id)
                .ok_or_else(|| binary_error(at, format!("sample names file {file_id}, which has no File record")))?;
            let path = file.path.as_deref().unwrap_or("");
            let symbol = entry.symbol_id.and_then(|s| file.symbol.get(usize::try_from(s).ok()?));
            let name = match symbol {
                Some(symbol) => symbol.clone(),
                None => format!(
                    "{}+0x{:x}",
                    path.rsplit(['/', '\\']).next().unwrap_or(path),
                    entry.vaddr_in_file.unwrap_or(0)
                ),
            };
            stack.push(frames.frame(&name, path));
        }
        let mut values = vec![0i64; types.len()];
        values[0] = 1;
        if let Some(slot) = sample.event_type_id.and_then(|e| values.get_mut(usize::try_from(e).ok()?.checked_add(1)?))
        {
            *slot = i64::try_from(sample.event_count.unwrap_or(0)).unwrap_or(i64::MAX);
        }
        let tid = sample.thread_id.unwrap_or(0);
        let thread =
            u32::try_from(tid).ok().and_then(|t| threads.get(&t)).map_or_else(|| format!("thread {tid}"), Clone::clone);
        let p = &mut frames.profile;
        frames.labels =
            vec![Label { key: p.strings.intern("thread"), value: LabelValue::Str(p.strings.intern(&thread)) }];
        frames.sample(stack, values)?;
    }
    Ok(frames.profile)
}
