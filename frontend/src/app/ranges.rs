//! The page's side of the server's time-range API: the services and types it holds, a
//! series' totals per step, label values, a range's merged profile, two ranges' top
//! movers and a function's history. The answers' types are core's (`stacklens_core::api`),
//! the same the server writes.

use gloo::net::http::Request;
use stacklens_core::analysis::diff::Mover;
use stacklens_core::api::{
    DiffRequest, DiffResponse, FunctionHistory, LabelList, ProfileTypeName, RangeSpec, SeriesList, SeriesName,
    SeriesResponse,
};

use super::api_urls;
pub use super::api_urls::{label_text, RangeRef};
use super::share::{addressed, call, send};

/// A range's profile opened in the page: its range, and the timeline's window and step
/// it was chosen on (a function's trend covers that window).
#[derive(Clone, Debug, PartialEq)]
pub struct RangeProfile {
    pub range: RangeRef,
    pub window: (u64, u64),
    pub step_ms: u64,
}

impl RangeRef {
    fn spec(&self) -> RangeSpec {
        RangeSpec {
            service: self.service.clone(),
            profile_type: ProfileTypeName(self.profile_type.clone()),
            from: Some(self.from.into()),
            to: Some(self.to.into()),
            labels: self.labels.clone(),
        }
    }
}

async fn get<T: serde::de::DeserializeOwned>(url: String, tenant: Option<&str>) -> Result<T, String> {
    call(|token| addressed(Request::get(&url), tenant, token).build()).await
}

pub async fn services(tenant: Option<&str>) -> Result<Vec<SeriesName>, String> {
    get::<SeriesList>(api_urls::services(), tenant).await.map(|l| l.series)
}

pub async fn series(range: &RangeRef, step_ms: u64, tenant: Option<&str>) -> Result<SeriesResponse, String> {
    get(api_urls::series(range, step_ms), tenant).await
}

/// Every `key=value` the range's profiles carry, with how many carry it.
pub async fn label_values(range: &RangeRef, tenant: Option<&str>) -> Result<Vec<(String, usize)>, String> {
    let keys: LabelList = get(api_urls::labels(range), tenant).await?;
    let mut found = Vec::new();
    for key in keys.labels {
        let url = api_urls::label_values(&key.name, range);
        let values: LabelList = get(url, tenant).await?;
        found.extend(values.labels.into_iter().map(|v| (format!("{}={}", key.name, v.name), v.profiles)));
    }
    Ok(found)
}

/// The range's profiles merged into one (gzipped pprof).
pub async fn merged(range: &RangeRef, tenant: Option<&str>) -> Result<Vec<u8>, String> {
    let url = api_urls::merged_pprof(range);
    send(|token| addressed(Request::get(&url), tenant, token).build()).await
}

/// The functions whose self share moved most from `base` to `compare`.
pub async fn top_movers(base: &RangeRef, compare: &RangeRef, tenant: Option<&str>) -> Result<Vec<Mover>, String> {
    let body = DiffRequest { base: Some(base.spec()), compare: Some(compare.spec()), ..DiffRequest::default() };
    let url = api_urls::diff();
    let answer: DiffResponse = call(|token| addressed(Request::post(&url), tenant, token).json(&body)).await?;
    answer.top_movers.ok_or_else(|| "unexpected answer from the server: no topMovers".to_owned())
}

pub async fn function_history(
    function: &str,
    range: &RangeRef,
    step_ms: u64,
    tenant: Option<&str>,
) -> Result<FunctionHistory, String> {
    let url = api_urls::function_history(function, range, step_ms);
    get(url, tenant).await
}
