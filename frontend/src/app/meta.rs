//! The loaded profile in a few lines, under its tab: where it came from, what it
//! measures and how much of it there is (core's `ProfileMeta`).

use leptos::prelude::*;
use stacklens_core::analysis::summary::ProfileMeta;
use stacklens_core::units::format_value;

use super::state::State;

fn when(time_nanos: i64) -> Option<String> {
    (time_nanos > 0).then(|| {
        let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(time_nanos as f64 / 1e6));
        String::from(date.to_iso_string()).replace('T', " ").trim_end_matches('Z').to_owned()
    })
}

fn meta_view(meta: ProfileMeta) -> impl IntoView {
    let types = meta
        .sample_types
        .iter()
        .map(|t| {
            view! {
                <li
                    class:default=t.default
                    data-testid="meta-sample-type"
                    data-name=t.name.clone()
                    data-total=t.total.to_string()
                    data-default=t.default.to_string()
                >
                    {t.name.clone()} " " <span class="total">{format_value(t.total, &t.unit)}</span>
                    {t.default.then_some(" (default)")}
                </li>
            }
        })
        .collect_view();
    let fact = |label: &'static str, value: Option<String>| {
        value.map(|v| view! { <span class="fact" data-fact=label><span class="label">{label}</span> " " <span class="value">{v}</span></span> })
    };
    let period = meta
        .period
        .as_ref()
        .map(|p| format!("{} ({})", format_value(p.value, &p.unit), format!("{} {}", p.kind, p.unit).trim()));
    view! {
        <section class="profile-meta" data-testid="profile-meta" aria-label="profile details">
            {fact("format", Some(meta.format.clone()))}
            {fact("from", meta.producer.clone())}
            {fact("taken", when(meta.time_nanos))}
            {fact("duration", (meta.duration_nanos > 0).then(|| format_value(meta.duration_nanos, "nanoseconds")))}
            {fact("period", period)}
            {fact("samples", Some(meta.sample_count.to_string()))}
            {fact("functions", Some(meta.function_count.to_string()))}
            {fact("locations", Some(meta.location_count.to_string()))}
            <ul class="sample-types">{types}</ul>
        </section>
    }
}

#[component]
pub fn ProfileMetaBar() -> impl IntoView {
    let state = expect_context::<State>();
    move || state.current.get().map(|e| meta_view(e.summary.meta))
}
