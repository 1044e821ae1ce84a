//! Share and baselines: the only parts of the page that talk to the server, and only
//! on a click.

use leptos::prelude::*;
use leptos::task::spawn_local;

use stacklens_core::api::{BaselineResponse, SessionResponse};

use super::sanitize_panel::{SanitizePanel, Sanitized};
use super::share;
use super::state::State;
use super::url_state;

/// Uploads the active profile (idempotent: the same bytes are the same session), then
/// hands its session to `then`.
fn with_session(state: State, then: impl FnOnce(SessionResponse) + 'static) {
    let Some(e) = state.current.get_untracked() else { return };
    let Some(source) = state.client.with_value(|c| c.source(e.id)) else { return };
    upload_then(state, e.name, source, then);
}

/// Uploads `source` as the profile `name`, then hands its session to `then`.
fn upload_then(state: State, name: String, source: web_sys::Blob, then: impl FnOnce(SessionResponse) + 'static) {
    spawn_local(async move {
        match share::upload(&source, &name, state.tenant.get_value().as_deref()).await {
            Ok(session) => then(session),
            Err(err) => state.report(format!("{name}: cannot share: {err}")),
        }
    });
}

/// Fetches the latest baseline of the active profile's type and opens the diff of the
/// active profile against it.
fn compare_with_latest_baseline(state: State) {
    let Some(e) = state.current.get_untracked() else { return };
    spawn_local(async move {
        let tenant = state.tenant.get_value();
        let latest = match share::baselines(Some(&e.summary.kind), true, tenant.as_deref()).await {
            Ok(list) => list.into_iter().next(),
            Err(err) => return state.report(format!("cannot list baselines: {err}")),
        };
        let Some(b) = latest else {
            return state.report(format!("no {} baseline has been saved yet: save one first", e.summary.kind));
        };
        let url = share::raw_url(&b.record.session_id, tenant.as_deref());
        let bytes = url_state::fetch(&url).await;
        if bytes.is_ok() {
            state.sources.update(|s| s.push(url));
        }
        if let Some(id) = state.add(format!("baseline {}", b.record.baseline_label), bytes, false) {
            state.pending_compare.set_value(Some((id, e.id)));
        }
    });
}

fn baseline_table(list: Vec<BaselineResponse>) -> impl IntoView {
    let rows = list
        .into_iter()
        .map(|BaselineResponse { record: b, is_latest, share_url }| {
            view! {
                <tr data-testid="baseline-row">
                    <td>{b.created_at}</td>
                    <td>{b.profile_type.as_str()}</td>
                    <td>{b.service}</td>
                    <td>{if is_latest { "latest" } else { "" }}</td>
                    <td>
                        <a href=share_url target="_blank">{b.baseline_label}</a>
                    </td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="data" data-testid="baselines">
            <tr><th>"created"</th><th>"type"</th><th>"service"</th><th></th><th>"label"</th></tr>
            {rows}
        </table>
    }
}

#[component]
pub fn SharePanel() -> impl IntoView {
    let state = expect_context::<State>();
    let share_link = RwSignal::new(None::<String>);
    let baseline_saved = RwSignal::new(None::<String>);
    let baseline_list = RwSignal::new(None::<Vec<BaselineResponse>>);
    let (label, description, tags) =
        (RwSignal::new(String::new()), RwSignal::new(String::new()), RwSignal::new(String::new()));
    let choosing = RwSignal::new(false);
    let linked = move |session: SessionResponse| {
        share_link.try_set(Some(session.share_url.clone()));
        if let Some(w) = web_sys::window() {
            let _ = w.navigator().clipboard().write_text(&session.share_url);
        }
    };
    // Nothing left out: the profile as opened; else only the sanitized bytes.
    let upload = Callback::new(move |chosen: Option<Sanitized>| {
        choosing.set(false);
        match chosen {
            None => with_session(state, linked),
            Some(s) => {
                let Some(e) = state.current.get_untracked() else { return };
                match super::download::blob(&s.bytes, "application/octet-stream") {
                    Ok(blob) => upload_then(state, e.name, blob, linked),
                    Err(err) => state.report(format!("{}: cannot share: {err:?}", e.name)),
                }
            }
        }
    });
    let save_baseline = move |_| {
        let label = label.get_untracked();
        if label.trim().is_empty() {
            return state.report("a baseline needs a label".to_owned());
        }
        let description = description.get_untracked();
        let tags: Vec<String> =
            tags.get_untracked().split(',').map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()).collect();
        with_session(state, move |session| {
            spawn_local(async move {
                let tenant = state.tenant.get_value();
                match share::save_baseline(&session, &label, &description, tags, tenant.as_deref()).await {
                    Ok(b) => {
                        baseline_saved.try_set(Some(format!(
                            "saved baseline '{}' ({})",
                            b.record.baseline_label, b.record.profile_type
                        )));
                    }
                    Err(err) => state.report(format!("cannot save the baseline: {err}")),
                }
            });
        })
    };
    let list_baselines = move |_| {
        spawn_local(async move {
            match share::baselines(None, false, state.tenant.get_value().as_deref()).await {
                Ok(list) => {
                    baseline_list.try_set(Some(list));
                }
                Err(err) => state.report(format!("cannot list baselines: {err}")),
            }
        });
    };
    let link = move || {
        share_link.get().map(|url| {
            view! {
                <input class="share-url" readonly aria-label="share link" data-testid="share-url" prop:value=url.clone() />
                <a href=url target="_blank">"open"</a>
            }
        })
    };
    let text_input = |placeholder: &'static str, testid: &'static str, value: RwSignal<String>| {
        view! { <input placeholder=placeholder aria-label=placeholder data-testid=testid on:input=move |ev| value.set(event_target_value(&ev)) /> }
    };
    view! {
        <div class="share">
            <button
                data-testid="share"
                title="choose what to leave out, then upload this profile and copy a link to it"
                on:click=move |_| choosing.update(|c| *c = !*c)
            >
                "Share…"
            </button>
            {link}
            {move || choosing.get().then(|| view! { <SanitizePanel upload=upload /> })}
            <details class="baseline-menu" data-testid="baseline-menu">
                <summary>"Baselines"</summary>
                {text_input("label", "baseline-label", label)}
                {text_input("description", "baseline-description", description)}
                {text_input("tags, comma-separated", "baseline-tags", tags)}
                <button data-testid="save-baseline" on:click=save_baseline>"Save as baseline"</button>
                {move || baseline_saved.get().map(|m| view! { <span data-testid="baseline-saved">{m}</span> })}
                <button data-testid="compare-baseline" on:click=move |_| compare_with_latest_baseline(state)>
                    "Compare with latest baseline"
                </button>
                <button data-testid="list-baselines" on:click=list_baselines>"List baselines"</button>
                {move || baseline_list.get().map(baseline_table)}
            </details>
        </div>
    }
}
