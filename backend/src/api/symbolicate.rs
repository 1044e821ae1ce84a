//! The Firefox Profiler's symbol-server API, `POST /symbolicate/v5` (Mozilla Tecken's
//! protocol, with samply's `inlines`): modules named by debug name and Breakpad id,
//! addresses as module offsets, answered from the debug files the server keeps, so a
//! profile opened in the Firefox Profiler can be symbolized against stacklens.

use std::collections::BTreeMap;

use axum::extract::{Request, State as AxumState};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use stacklens_core::import::demangle::demangle;
use stacklens_core::symbols::{AddressLookup, ObjectFile, SymbolFrame};
use utoipa::ToSchema;

use super::access::Reader;
use super::request::{off_thread, read_body};
use super::{ApiError, ErrorBody};
use crate::budget::Reservation;
use crate::records::debuginfo::{self, Artifact};
use crate::state::State;
use crate::symbols;

/// A request's size: the profiler sends every address of a profile at once.
const MAX_REQUEST: usize = 16 << 20;
/// Frames one request may ask for.
const MAX_FRAMES: usize = 1_000_000;

/// One job, or several (`{"jobs": [...]}`).
#[derive(Deserialize, ToSchema)]
#[serde(untagged)]
pub enum SymbolicateRequest {
    Jobs { jobs: Vec<Job> },
    One(Job),
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    /// `[debugName, breakpadId]` per module.
    #[schema(value_type = Vec<Vec<String>>)]
    memory_map: Vec<(String, String)>,
    /// Per stack, `[moduleIndex, moduleOffset]` per frame (-1: no module).
    #[schema(value_type = Vec<Vec<Vec<i64>>>)]
    stacks: Vec<Vec<(i64, u64)>>,
}

#[derive(Serialize, ToSchema)]
pub struct SymbolicateResponse {
    results: Vec<JobResult>,
}

#[derive(Serialize, ToSchema)]
pub struct JobResult {
    stacks: Vec<Vec<Frame>>,
    /// `debugName/breakpadId`: whether the server had the module's symbols.
    found_modules: BTreeMap<String, bool>,
}

#[derive(Serialize, ToSchema)]
pub struct Frame {
    frame: usize,
    module_offset: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    module: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    function: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    function_offset: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
    /// The functions inlined at this address, innermost first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    inlines: Vec<Inline>,
}

#[derive(Serialize, ToSchema)]
pub struct Inline {
    function: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
}

fn readable(name: &str) -> String {
    demangle(name).unwrap_or_else(|| name.to_owned())
}

fn inline_of(frame: SymbolFrame) -> Inline {
    Inline { function: readable(&frame.name), file: frame.file, line: (frame.line > 0).then_some(frame.line) }
}

/// The frame at `offset` of `module` in `file`.
fn frame_of(index: usize, module: &str, offset: u64, file: &ObjectFile) -> Frame {
    let address = file.relative_to_address(offset);
    let mut frame = Frame::unnamed(index, Some(module), offset);
    let mut frames = file.lookup(address).unwrap_or_default();
    // The physical function is the last; the ones inlined into it come first.
    if let Some(outer) = frames.pop() {
        frame.function = Some(readable(&outer.name));
        frame.function_offset = file.function_start(address).map(|start| format!("{:#x}", address - start));
        frame.file = outer.file;
        frame.line = (outer.line > 0).then_some(outer.line);
        frame.inlines = frames.into_iter().map(inline_of).collect();
    }
    frame
}

/// Symbolizes stacks of module offsets for the Firefox Profiler, from the binaries and
/// debug files uploaded to (or fetched by) this server, found by Breakpad id.
#[utoipa::path(post, path = "/symbolicate/v5", tag = "debuginfo", operation_id = "Symbolicate",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant (default: \"default\")")),
    request_body = SymbolicateRequest,
    responses((status = 200, body = SymbolicateResponse, description = "per job, the stacks' frames with their functions, files, lines and inlined functions, and which modules were found"),
        (status = 400, description = "InvalidRequest: not a symbolication request, or more than 1,000,000 frames", body = ErrorBody),
        (status = 413, description = "PayloadTooLarge: over 16 MiB", body = ErrorBody),
        (status = 503, description = "Busy, StorageUnavailable", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn symbolicate(
    AxumState(state): AxumState<State>,
    Reader(tenant): Reader,
    request: Request,
) -> Result<Json<SymbolicateResponse>, ApiError> {
    let body = read_body(request.into_body(), MAX_REQUEST).await?;
    let request: SymbolicateRequest = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request("InvalidRequest", format!("not a symbolication request: {e}")))?;
    let jobs = match request {
        SymbolicateRequest::Jobs { jobs } => jobs,
        SymbolicateRequest::One(job) => vec![job],
    };
    let frames: usize = jobs.iter().flat_map(|j| &j.stacks).map(Vec::len).sum();
    if frames > MAX_FRAMES {
        return Err(ApiError::bad_request("InvalidRequest", format!("at most {MAX_FRAMES} frames per request"))
            .details(json!({ "frames": frames })));
    }
    let mut results = Vec::with_capacity(jobs.len());
    for job in jobs {
        let mut held = Reservation::default();
        let mut files = Vec::with_capacity(job.memory_map.len());
        let mut found_modules = BTreeMap::new();
        for (name, breakpad_id) in &job.memory_map {
            let bytes = match debuginfo::by_breakpad_id(&state.store, &tenant, breakpad_id).await? {
                None => None,
                Some(id) => match symbols::find(&state, &tenant, &id, Artifact::Debuginfo, &mut held).await? {
                    Some(bytes) => Some(bytes),
                    None => symbols::find(&state, &tenant, &id, Artifact::Executable, &mut held).await?,
                },
            };
            found_modules.insert(format!("{name}/{breakpad_id}"), bytes.is_some());
            files.push(bytes);
        }
        let held_bytes: u64 = files.iter().flatten().map(|b| b.len() as u64).sum();
        // Reading DWARF copies its sections: count them as much again.
        state.budget.hold_to(&mut held, 2 * held_bytes).await?;
        let result = off_thread(move || {
            let parsed: Vec<Option<ObjectFile>> =
                files.iter().map(|b| b.as_ref().and_then(|b| ObjectFile::parse(&**b).ok())).collect();
            let stacks = job
                .stacks
                .iter()
                .map(|stack| {
                    stack
                        .iter()
                        .enumerate()
                        .map(|(i, &(module, offset))| {
                            let known = usize::try_from(module).ok().filter(|&m| m < job.memory_map.len());
                            match known {
                                Some(m) => match &parsed[m] {
                                    Some(file) => frame_of(i, &job.memory_map[m].0, offset, file),
                                    None => Frame::unnamed(i, Some(&job.memory_map[m].0), offset),
                                },
                                None => Frame::unnamed(i, None, offset),
                            }
                        })
                        .collect()
                })
                .collect();
            JobResult { stacks, found_modules }
        })
        .await?;
        results.push(result);
    }
    Ok(Json(SymbolicateResponse { results }))
}

impl Frame {
    fn unnamed(index: usize, module: Option<&str>, offset: u64) -> Frame {
        Frame {
            frame: index,
            module_offset: format!("{offset:#x}"),
            module: module.map(str::to_owned),
            function: None,
            function_offset: None,
            file: None,
            line: None,
            inlines: Vec::new(),
        }
    }
}
