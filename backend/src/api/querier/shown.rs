//! How a merged selection is shown: its sample type, the samples kept, and the flame
//! graph's size; and the shapes it is shown in (flame graph, diff, DOT, pprof), each
//! made by core off the async threads.

use axum::http::StatusCode;
use prost::Message;
use stacklens_core::analysis::graph::{call_graph, GraphOptions};
use stacklens_core::analysis::tree::{CallTree, TreeOptions};
use stacklens_core::analysis::Query as ProfileQuery;
use stacklens_core::export::pprof;
use stacklens_core::layout::flamebearer::Flamebearer;
use stacklens_core::report::dot::dot;
use stacklens_core::Profile;

use super::proto;
use crate::api::request::off_thread;
use crate::api::ApiError;
use crate::records::profile_types::ProfileTypeId;

/// How a merged profile is shown: the sample type, the samples kept (those with one of
/// the span or trace ids asked for, pprof's `-tagfocus`), and the flame graph's size.
#[derive(Clone)]
pub struct Shown {
    pub profile_type: ProfileTypeId,
    pub tag_focus: Option<String>,
    pub max_nodes: usize,
}

impl Shown {
    pub fn new(profile_type: ProfileTypeId, max_nodes: usize) -> Self {
        Shown { profile_type, tag_focus: None, max_nodes }
    }

    /// The profile prepared as shown; a sample type it lacks is the request's error.
    fn prepare<'p>(&self, profile: &'p Profile) -> Result<stacklens_core::analysis::query::Prepared<'p>, ApiError> {
        let t = &self.profile_type;
        self.query()?.prepare(profile).map_err(|e| {
            ApiError::bad_request("InvalidProfileType", format!("the merged profiles have no sample type {t}: {e}"))
        })
    }

    fn query(&self) -> Result<ProfileQuery, ApiError> {
        let mut query = ProfileQuery::of_sample(self.profile_type.sample_type.as_str());
        if let Some(focus) = &self.tag_focus {
            query.set("tagfocus", focus).map_err(|e| ApiError::bad_request("InvalidQuery", e.to_string()))?;
        }
        Ok(query)
    }
}

/// pprof's `-tagfocus` for samples labelled `key` with one of `ids` (hex, `digits` long):
/// OTLP profiles' links and Pyroscope's span profiles label samples so.
pub(super) fn ids_focus(field: &str, key: &str, ids: &[String], digits: usize) -> Result<String, ApiError> {
    if let Some(bad) = ids.iter().find(|id| id.len() != digits || !id.bytes().all(|b| b.is_ascii_hexdigit())) {
        return Err(ApiError::invalid(field, format!("{field}: '{bad}' is not {digits} hex digits")));
    }
    let ids: Vec<String> = ids.iter().map(|id| id.to_ascii_lowercase()).collect();
    Ok(format!("{key}=^(?:{})$", ids.join("|")))
}

/// The flame graph of a merged selection (empty when nothing matched).
pub async fn flame_graph(profile: Option<Profile>, shown: &Shown) -> Result<Flamebearer, ApiError> {
    let Some(profile) = profile else {
        return Ok(Flamebearer {
            names: vec!["total".into()],
            levels: vec![vec![0, 0, 0, 0]],
            ..Flamebearer::default()
        });
    };
    let shown = shown.clone();
    off_thread(move || {
        let prepared = shown.prepare(&profile)?;
        let options = TreeOptions { max_nodes: Some(shown.max_nodes), ..TreeOptions::default() };
        let tree =
            CallTree::build(&prepared, &options).map_err(|e| ApiError::bad_request("InvalidQuery", e.to_string()))?;
        Ok(Flamebearer::of(&tree))
    })
    .await?
}

/// The diff flame graph of two merged selections of one type (a side with nothing is
/// an empty profile of the other's types).
pub async fn diff_graph(left: Option<Profile>, right: Option<Profile>, shown: &Shown) -> Result<Flamebearer, ApiError> {
    let empty = |p: &Profile| Profile { samples: Default::default(), ..p.clone() };
    let (left, right) = match (left, right) {
        (Some(l), Some(r)) => (l, r),
        (Some(l), None) => (l.clone(), empty(&l)),
        (None, Some(r)) => (empty(&r), r),
        (None, None) => {
            return Ok(Flamebearer {
                names: vec!["total".into()],
                levels: vec![vec![0; 7]],
                ticks: Some((0, 0)),
                ..Flamebearer::default()
            })
        }
    };
    let shown = shown.clone();
    off_thread(move || {
        let t = &shown.profile_type;
        let (base, compare) = shown.query()?.prepare_pair(&left, &right).map_err(|e| {
            ApiError::bad_request("InvalidProfileType", format!("the sides cannot be compared as {t}: {e}"))
        })?;
        let options = TreeOptions { max_nodes: Some(shown.max_nodes), ..TreeOptions::default() };
        let tree = CallTree::build_diff(&base, &compare, &options)
            .map_err(|e| ApiError::bad_request("InvalidQuery", e.to_string()))?;
        Ok(Flamebearer::of(&tree))
    })
    .await?
}

/// The DOT text of a merged selection's call graph, at most `max_nodes` nodes.
pub async fn dot_graph(profile: Option<Profile>, shown: &Shown) -> Result<String, ApiError> {
    let Some(profile) = profile else { return Ok(String::new()) };
    let shown = shown.clone();
    off_thread(move || {
        let prepared = shown.prepare(&profile)?;
        let options = GraphOptions { node_count: Some(shown.max_nodes), ..GraphOptions::default() };
        let graph =
            call_graph(&prepared, &options).map_err(|e| ApiError::bad_request("InvalidQuery", e.to_string()))?;
        Ok(dot(prepared.profile(), &graph))
    })
    .await?
}

/// A merged profile as `google.v1.Profile` (empty when nothing matched): the samples
/// shown, the sample type asked for its default.
pub(super) async fn pprof_message(profile: Option<Profile>, shown: &Shown) -> Result<proto::Profile, ApiError> {
    let Some(profile) = profile else { return Ok(proto::Profile::default()) };
    let shown = shown.clone();
    off_thread(move || {
        let prepared = shown.prepare(&profile)?;
        let mut kept = profile.filter_compiled(prepared.filters());
        kept.default_sample_type = kept.sample_types[prepared.sample_index].kind;
        proto::Profile::decode(pprof::encode(&kept).as_slice())
            .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal", e.to_string()))
    })
    .await?
}
