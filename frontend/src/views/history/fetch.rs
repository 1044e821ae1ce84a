//! The capture history's questions to the server: the stored series, the points of the
//! one chosen over its window (with its label values), and a range's merged profile.

use std::collections::BTreeMap;

use leptos::prelude::*;
use leptos::task::spawn_local;
use stacklens_core::api::SeriesPoint;

use super::shown::{History, Shown, WINDOWS};
use crate::app::ranges::{self, RangeRef};
use crate::app::state::State;

/// Fetches the stored series again.
pub(super) fn load_services(h: History) {
    let History { state, services, .. } = h;
    services.set(None);
    spawn_local(async move { services.set(Some(ranges::services(state.tenant.get_value().as_deref()).await)) });
}

/// Fetches the series again whenever the services (a refresh), service, window or label
/// change; only the last answer is shown.
pub(super) fn follow_series(h: History) {
    let History { state, services, chosen, window, label, label_values, shown, hover, drag, .. } = h;
    let tenant = move || state.tenant.get_value();
    let asked = StoredValue::new(0u64);
    Effect::new(move |_| {
        let Some(Ok(list)) = services.get() else { return };
        let Some(name) = list.get(chosen.get()).cloned() else { return };
        let (_, span, step) = WINDOWS[window.get()];
        let labels: BTreeMap<String, String> =
            label.get().split_once('=').map(|(k, v)| [(k.to_owned(), v.to_owned())].into()).unwrap_or_default();
        let to = (js_sys::Date::now() as u64).div_ceil(step) * step;
        let range = RangeRef {
            service: name.service,
            profile_type: name.profile_type.as_str().to_owned(),
            labels,
            from: to - span,
            to,
        };
        let mine = asked.get_value() + 1;
        asked.set_value(mine);
        shown.set(None);
        hover.set(None);
        drag.set(None);
        spawn_local(async move {
            let tenant = tenant();
            // No line when the window holds no profile: a zero for every step then.
            let zeros =
                || (range.from..range.to).step_by(step as usize).map(|t| SeriesPoint { t, value: 0, profiles: 0 });
            let answer = ranges::series(&range, step, tenant.as_deref()).await.map(|s| Shown {
                points: s.series.into_iter().next().map(|l| l.points).unwrap_or_else(|| zeros().collect()),
                range: range.clone(),
                step_ms: step,
                unit: s.unit,
                sample_type: s.sample_type,
            });
            // Label values of the whole series, not only of the chosen label's profiles.
            let all = RangeRef { labels: BTreeMap::new(), ..range };
            let values = ranges::label_values(&all, tenant.as_deref()).await.unwrap_or_default();
            if asked.get_value() == mine {
                label_values.set(values);
                shown.set(Some(answer));
            }
        });
    });
}

/// Fetches a range's merged profile and opens it as a tab; its id. A range already open
/// (and not closed) is not fetched again.
pub(super) async fn open_range(state: State, shown: &Shown, range: (u64, u64)) -> Option<u32> {
    let profile = shown.profile(range);
    let open = state.range_profiles.with_untracked(|l| {
        l.iter().filter(|(_, p)| p.range == profile.range).map(|&(id, _)| id).find(|id| {
            state.entries.with_untracked(|e| e.iter().any(|x| x.id == *id))
                || state.loading.with_untracked(|l| l.iter().any(|x| x.id == *id))
        })
    });
    if open.is_some() {
        return open;
    }
    let bytes = ranges::merged(&profile.range, state.tenant.get_value().as_deref()).await;
    let id = state.add_bytes(shown.name(range), bytes, false)?;
    state.range_profiles.update(|l| l.push((id, profile)));
    Some(id)
}
