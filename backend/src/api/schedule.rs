//! Continuous capture schedules (run by `runs::schedule` on every replica).

use axum::extract::{Request, State as AxumState};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use stacklens_core::ProfileKind;
use utoipa::ToSchema;

use super::access::{Reader, Writer};
use super::request::{parse_kind, read_json, PathParam};
use super::{ApiError, ErrorBody};
use crate::records::now_rfc3339;
use crate::records::schedules::{self, Schedule};
use crate::state::State;

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleRequest {
    /// A service from `--targets`.
    service: String,
    /// Types captured each interval (cpu, memory, alloc, block, mutex, goroutine).
    profile_types: Vec<String>,
    sample_rate: Option<u64>,
    /// Captures older than this are deleted (fractions allowed).
    retention_days: f64,
    enabled: bool,
    /// Seconds between captures of each type (default 60).
    interval_seconds: Option<u64>,
    /// Length of cpu captures (default: the interval, at most 30).
    duration_seconds: Option<u64>,
}

/// Stores a schedule (it replaces the service's previous one).
#[utoipa::path(post, path = "/api/v1/observability/profiling/continuous", tag = "capture", operation_id = "SetContinuousCapture",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant")),
    request_body = ScheduleRequest,
    responses((status = 201, body = Schedule),
        (status = 400, description = "InvalidRequest, InvalidProfileType", body = ErrorBody),
        (status = 401, description = "Unauthorized", body = ErrorBody),
        (status = 403, description = "Forbidden, InsufficientScope", body = ErrorBody),
        (status = 404, description = "UnknownService", body = ErrorBody),
        (status = 415, description = "UnsupportedMediaType: the body is not sent as application/json", body = ErrorBody),
        (status = 503, description = "StorageUnavailable", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn set(
    AxumState(state): AxumState<State>,
    Writer(tenant): Writer,
    request: Request,
) -> Result<(StatusCode, Json<Schedule>), ApiError> {
    let request: ScheduleRequest = read_json(request, "a schedule").await?;
    if state.targets.find(&request.service, &tenant).is_none() {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "UnknownService",
            format!("no capture target named '{}'", request.service),
        )
        .details(json!({ "service": request.service })));
    }
    let mut types = Vec::new();
    for t in &request.profile_types {
        let kind = parse_kind(t)?;
        if matches!(kind, ProfileKind::Threadcreate | ProfileKind::Other) {
            return Err(ApiError::invalid_request(
                "profileTypes",
                "threadcreate and other profiles cannot be captured",
            ));
        }
        if !types.contains(&kind) {
            types.push(kind);
        }
    }
    if types.is_empty() {
        return Err(ApiError::invalid_request("profileTypes", "name at least one profile type"));
    }
    if !(request.retention_days > 0.0 && request.retention_days <= 3650.0) {
        return Err(ApiError::invalid_request("retentionDays", "retentionDays must be within (0, 3650]"));
    }
    let interval = request.interval_seconds.unwrap_or(60);
    if !(1..=86_400).contains(&interval) {
        return Err(ApiError::invalid_request("intervalSeconds", "intervalSeconds must be 1..86400"));
    }
    let duration = request.duration_seconds.unwrap_or(interval.min(30));
    if !(1..=interval.max(1)).contains(&duration) {
        return Err(ApiError::invalid_request("durationSeconds", "durationSeconds must be 1..intervalSeconds"));
    }
    let schedule = Schedule {
        service: request.service,
        profile_types: types,
        sample_rate: request.sample_rate,
        retention_days: request.retention_days,
        enabled: request.enabled,
        interval_seconds: interval,
        duration_seconds: duration,
        updated_at: now_rfc3339(),
    };
    schedules::save(&state.store, &tenant, &schedule).await?;
    Ok((StatusCode::CREATED, Json(schedule)))
}

#[derive(Serialize, ToSchema)]
pub struct ScheduleList {
    schedules: Vec<Schedule>,
}

/// The tenant's schedules, one per service.
#[utoipa::path(get, path = "/api/v1/observability/profiling/continuous", tag = "capture", operation_id = "ListContinuousCaptures",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant")),
    responses((status = 200, body = ScheduleList),
        (status = 401, description = "Unauthorized", body = ErrorBody),
        (status = 403, description = "Forbidden", body = ErrorBody),
        (status = 503, description = "StorageUnavailable", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn list(AxumState(state): AxumState<State>, Reader(tenant): Reader) -> Result<Json<ScheduleList>, ApiError> {
    Ok(Json(ScheduleList { schedules: schedules::of_tenant(&state.store, &tenant).await? }))
}

/// Removes a service's schedule: no more captures; those it made stay until the server's
/// retention or their deletion.
#[utoipa::path(delete, path = "/api/v1/observability/profiling/continuous/{service}", tag = "capture", operation_id = "DeleteContinuousCapture",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant"), ("service" = String, Path)),
    responses((status = 204, description = "removed"),
        (status = 401, description = "Unauthorized", body = ErrorBody),
        (status = 403, description = "Forbidden, InsufficientScope", body = ErrorBody),
        (status = 404, description = "UnknownSchedule", body = ErrorBody),
        (status = 503, description = "StorageUnavailable", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn delete(
    AxumState(state): AxumState<State>,
    Writer(tenant): Writer,
    PathParam(service): PathParam,
) -> Result<StatusCode, ApiError> {
    if !schedules::remove(&state.store, &tenant, &service).await? {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "UnknownSchedule",
            format!("no schedule for the service '{service}'"),
        )
        .details(json!({ "service": service })));
    }
    Ok(StatusCode::NO_CONTENT)
}
