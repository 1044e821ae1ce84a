//! Share and baselines: the only parts of the page that talk to the server, and only
//! on a click.

use leptos::prelude::*;
use leptos::task::spawn_local;

use stacklens_core::api::{BaselineResponse, SessionResponse};
use stacklens_core::timestamp::Timestamp;

use super::clipboard::{Copied, PendingCopy};
use super::encrypted::{self, Link};
use super::sanitize_panel::{SanitizePanel, ShareChoice};
use super::share::{self, Shared};
use super::state::State;
use super::{api_urls, download, url_state};
use crate::{js_bytes, js_error};

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
        match share::upload(&source, &name, None, state.tenant.get_value().as_deref()).await {
            Ok(session) => then(session),
            Err(err) => state.report(format!("{name}: cannot share: {err}")),
        }
    });
}

/// A link shared from this panel, and how to take it back.
#[derive(Clone)]
struct SharedLink {
    url: String,
    expires_at: Option<Timestamp>,
    /// What the delete token revokes, and the token (the server keeps only its hash).
    revoke: Option<(Shared, String)>,
}

/// Uploads the profile `id` (named `name`) as `choice` says: sanitized or as opened,
/// sealed in the page or not, for ever or until it expires.
async fn share_as_chosen(state: State, id: u32, name: &str, choice: ShareChoice) -> Result<SharedLink, String> {
    let tenant = state.tenant.get_value();
    let expires = choice.expires_in.as_deref();
    let bytes_blob = |bytes: &[u8]| {
        download::blob(bytes, "application/octet-stream").map_err(|e| js_error("cannot keep the bytes to upload", e))
    };
    let opened = || state.client.with_value(|c| c.source(id)).ok_or_else(|| "the profile was closed".to_owned());
    if choice.encrypt {
        let plain = match choice.sanitized {
            Some(s) => s.bytes,
            None => {
                let source = opened()?;
                if source.size() > encrypted::MAX_BYTES {
                    return Err(format!(
                        "{:.0} MiB is too large to encrypt in the page (at most {:.0} MiB): leave something out \
                         (the sanitized profile is much smaller), or share it unencrypted",
                        source.size() / 1048576.0,
                        encrypted::MAX_BYTES / 1048576.0
                    ));
                }
                js_bytes(Ok(source.array_buffer())).await.map_err(|e| js_error("cannot read the profile", e))?
            }
        };
        let (sealed, key) = encrypted::seal(name, &plain).await?;
        let stored = share::upload_blob(&bytes_blob(&sealed)?, expires, tenant.as_deref()).await?;
        let origin = web_sys::window().and_then(|w| w.location().origin().ok()).unwrap_or_default();
        let url = Link { blob: stored.id.to_string(), key }.url(&origin, tenant.as_deref());
        return Ok(SharedLink {
            url,
            expires_at: stored.expires_at,
            revoke: Some((Shared::Blob(stored.id), stored.delete_token)),
        });
    }
    let source = match &choice.sanitized {
        Some(s) => bytes_blob(&s.bytes)?,
        None => opened()?,
    };
    let session = share::upload(&source, name, expires, tenant.as_deref()).await?;
    let revoke = session.delete_token.map(|token| (Shared::Session(session.record.id), token));
    Ok(SharedLink { url: session.share_url, expires_at: session.record.expires_at, revoke })
}

/// Fetches the latest baseline of the active profile's type and opens the diff of the
/// active profile against it.
fn compare_with_latest_baseline(state: State) {
    let Some(e) = state.current.get_untracked() else { return };
    spawn_local(async move {
        let tenant = state.tenant.get_value();
        let latest = match share::baselines(Some(e.summary.kind.as_str()), true, tenant.as_deref()).await {
            Ok(list) => list.into_iter().next(),
            Err(err) => return state.report(format!("cannot list baselines: {err}")),
        };
        let Some(b) = latest else {
            return state.report(format!("no {} baseline has been saved yet: save one first", e.summary.kind));
        };
        let url = api_urls::profile_raw(&b.record.session_id, tenant.as_deref());
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
                    <td>{b.created_at.to_string()}</td>
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
    let share_link = RwSignal::new(None::<SharedLink>);
    let deleted = RwSignal::new(None::<String>);
    let baseline_saved = RwSignal::new(None::<String>);
    let baseline_list = RwSignal::new(None::<Vec<BaselineResponse>>);
    let (label, description, tags) =
        (RwSignal::new(String::new()), RwSignal::new(String::new()), RwSignal::new(String::new()));
    let choosing = RwSignal::new(false);
    // Whether the last link reached the clipboard (shown beside it).
    let copied = RwSignal::new(None::<Copied>);
    let upload = Callback::new(move |choice: ShareChoice| {
        choosing.set(false);
        let Some(e) = state.current.get_untracked() else { return };
        copied.set(None);
        // Started in the click: WebKit refuses a copy made after the upload's await.
        let copy = PendingCopy::start(move |outcome| {
            copied.try_set(Some(outcome));
        });
        spawn_local(async move {
            match share_as_chosen(state, e.id, &e.name, choice).await {
                Ok(link) => {
                    copy.finish(Some(&link.url));
                    deleted.try_set(None);
                    share_link.try_set(Some(link));
                }
                Err(err) => {
                    copy.finish(None);
                    state.report(format!("{}: cannot share: {err}", e.name))
                }
            }
        });
    });
    let revoke = move |_| {
        let Some(SharedLink { revoke: Some((shared, token)), .. }) = share_link.get_untracked() else { return };
        spawn_local(async move {
            match share::delete(&shared, &token, state.tenant.get_value().as_deref()).await {
                Ok(()) => {
                    share_link.try_set(None);
                    deleted.try_set(Some("deleted from the server: the link no longer opens".to_owned()));
                }
                Err(err) => state.report(format!("cannot delete the shared copy: {err}")),
            }
        });
    };
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
        share_link.get().map(|SharedLink { url, expires_at, revoke: token }| {
            let expiry = expires_at.map_or_else(|| "never expires".to_owned(), |at| format!("expires {at}"));
            let token = token.map(|(_, token)| {
                view! {
                    <input class="share-url" readonly aria-label="delete token" title="keep it to delete the shared copy later (DELETE with X-Stacklens-Delete-Token)" data-testid="share-delete-token" prop:value=token />
                    <button data-testid="share-delete" on:click=revoke>"Delete the shared copy"</button>
                }
            });
            view! {
                <input class="share-url" readonly aria-label="share link" data-testid="share-url" prop:value=url.clone() />
                <a href=url target="_blank">"open"</a>
                <span data-testid="share-expiry">{expiry}</span>
                {move || copied.get().map(|outcome| match outcome {
                    Ok(()) => view! { <span data-testid="share-copied">"copied"</span> }.into_any(),
                    Err(why) => view! {
                        <span data-testid="share-not-copied" title=why>"not copied (the browser refused): copy it from the box"</span>
                    }.into_any(),
                })}
                {token}
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
            {move || deleted.get().map(|m| view! { <span data-testid="share-deleted">{m}</span> })}
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
