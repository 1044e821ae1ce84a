//! What a share gives away, chosen before it happens (like the Firefox Profiler's
//! upload panel): the profile's file paths, build ids, comments and label keys with
//! what to leave out, function names to redact, and the top table of what will be
//! uploaded; then whether the link is encrypted and when it expires. The worker
//! sanitizes (core's `sanitize`); only its bytes leave the page.

use leptos::prelude::*;
use stacklens_core::analysis::sanitize::{Inventory, Labels, Paths, SanitizeOptions};
use stacklens_core::analysis::top::TopReport;
use stacklens_core::units::{format_value_in, percentage, report_unit};

use super::state::State;
use crate::views::table::inline_mark;
use crate::worker::protocol::{Request, Response};

/// Rows of the preview.
const PREVIEW_ROWS: usize = 10;

/// The sanitized profile for some options: its top rows and gzipped pprof bytes.
#[derive(Clone)]
pub struct Sanitized {
    pub options: SanitizeOptions,
    pub top: TopReport,
    pub bytes: Vec<u8>,
}

fn inventory_lines(inv: &Inventory) -> String {
    let mut lines = Vec::new();
    if inv.paths > 0 {
        let roots: Vec<String> = inv.path_roots.iter().map(|(root, n)| format!("{n} under {root}…")).collect();
        lines.push(format!("{} file paths ({})", inv.paths, roots.join(", ")));
    }
    if inv.build_ids > 0 {
        lines.push(format!("{} build ids", inv.build_ids));
    }
    if inv.comments > 0 {
        lines.push(format!("{} comments", inv.comments));
    }
    if !inv.label_keys.is_empty() {
        lines.push(format!("label keys: {}", inv.label_keys.join(", ")));
    }
    lines.push(format!("{} function names", inv.functions));
    lines.join("; ")
}

fn preview(s: &Sanitized) -> impl IntoView {
    let top = &s.top;
    let shown = &top.functions[..top.functions.len().min(PREVIEW_ROWS)];
    // One unit for the column, as the top table and pprof choose it.
    let unit = report_unit(shown.iter().map(|r| (r.flat, r.cum)), top.total, &top.unit);
    let rows = shown
        .iter()
        .map(|r| {
            let v = |x: i64| format_value_in(x, &top.unit, &unit);
            view! {
                <tr data-testid="sanitize-row">
                    <td data-col="flat" data-value=r.flat.to_string()>{v(r.flat)}</td>
                    <td>{percentage(r.flat, top.total)}</td>
                    <td data-col="cum" data-value=r.cum.to_string()>{v(r.cum)}</td>
                    <td data-col="name" data-value=r.name.clone() data-inline=r.inline.map(|i| i.as_str())>
                        {r.name.clone()}
                        {inline_mark(r.inline)}
                    </td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="data" data-testid="sanitize-preview" data-total=top.total.to_string()>
            <tr><th>"flat"</th><th>"flat%"</th><th>"cum"</th><th>"what will be uploaded"</th></tr>
            {rows}
        </table>
    }
}

/// How the user chose to share.
#[derive(Clone)]
pub struct ShareChoice {
    /// The sanitized profile, or `None` when nothing is left out (the profile is
    /// uploaded as opened).
    pub sanitized: Option<Sanitized>,
    /// Seal it in the page; the key goes in the link only.
    pub encrypt: bool,
    /// `1h`, `7d`: when the link stops working; `None` for never.
    pub expires_in: Option<String>,
}

/// How long a link may live, as the server's `expiresIn` takes it ("" for ever).
const EXPIRIES: [(&str, &str); 5] =
    [("", "never"), ("1h", "in an hour"), ("1d", "in a day"), ("7d", "in a week"), ("30d", "in 30 days")];

/// The panel for the active profile; `upload` gets what the user chose.
#[component]
pub fn SanitizePanel(upload: Callback<ShareChoice>) -> impl IntoView {
    let state = expect_context::<State>();
    let inventory = RwSignal::new(None::<Result<Inventory, String>>);
    let sanitized = RwSignal::new(None::<Result<Sanitized, String>>);
    let (paths, build_ids, comments) = (RwSignal::new(Paths::Keep), RwSignal::new(false), RwSignal::new(false));
    let (dropped_keys, redact) = (RwSignal::new(Vec::<String>::new()), RwSignal::new(String::new()));
    let (encrypt, expires_in) = (RwSignal::new(false), RwSignal::new(String::new()));
    let options = Memo::new(move |_| SanitizeOptions {
        paths: paths.get(),
        build_ids: build_ids.get(),
        comments: comments.get(),
        labels: match dropped_keys.get() {
            keys if keys.is_empty() => Labels::Keep,
            keys => Labels::Keys(keys),
        },
        redact: Some(redact.get()).filter(|r| !r.trim().is_empty()),
    });
    let id = move || state.current.get().map(|e| e.id);
    Effect::new(move |_| {
        let Some(id) = id() else { return };
        state.client.with_value(|c| {
            c.request(Request::Inventory { id }, move |response, _| {
                if let Response::Inventory(r) = response {
                    inventory.try_set(Some(r));
                }
            })
        });
    });
    Effect::new(move |_| {
        let (Some(id), options) = (id(), options.get()) else { return };
        let sample = state.sample_index.get_untracked();
        let asked = options.clone();
        state.client.with_value(|c| {
            c.request(Request::Sanitize { id, sample, options }, move |response, bytes| {
                if let Response::Sanitized(r) = response {
                    let r = r.map(|top| Sanitized { options: asked, top, bytes: bytes.unwrap_or_default() });
                    sanitized.try_set(Some(r));
                }
            })
        });
    });
    let keys = move || {
        let list = inventory.with(|i| i.as_ref().and_then(|r| r.as_ref().ok()).map(|i| i.label_keys.clone()));
        list.unwrap_or_default()
            .into_iter()
            .map(|key| {
                let k = key.clone();
                let toggle = move |ev| {
                    let on = event_target_checked(&ev);
                    dropped_keys.update(|d| {
                        d.retain(|x| *x != k);
                        if on {
                            d.push(k.clone());
                        }
                    });
                };
                view! {
                    <label><input type="checkbox" data-testid="strip-label" data-key=key.clone() on:change=toggle />
                    {format!("label {key}")}</label>
                }
            })
            .collect_view()
    };
    let send = move |_| {
        let chosen = options.get_untracked();
        let share = |sanitized| ShareChoice {
            sanitized,
            encrypt: encrypt.get_untracked(),
            expires_in: Some(expires_in.get_untracked()).filter(|e| !e.is_empty()),
        };
        if !chosen.removes_anything() {
            return upload.run(share(None));
        }
        match sanitized.get_untracked() {
            Some(Ok(s)) if s.options == chosen => upload.run(share(Some(s))),
            Some(Err(e)) => state.report(format!("cannot sanitize: {e}")),
            _ => state.report("the sanitized profile is not ready yet: click again in a moment".to_owned()),
        }
    };
    let expiry_options =
        EXPIRIES.iter().map(|(value, label)| view! { <option value=*value>{*label}</option> }).collect_view();
    let path_choice = move |ev| {
        paths.set(match event_target_value(&ev).as_str() {
            "basenames" => Paths::BaseNames,
            "remove" => Paths::Remove,
            _ => Paths::Keep,
        })
    };
    view! {
        <div class="sanitize" data-testid="sanitize-panel">
            <p data-testid="sanitize-inventory">
                {move || match inventory.get() {
                    Some(Ok(i)) => format!("This profile contains {}.", inventory_lines(&i)),
                    Some(Err(e)) => e,
                    None => "…".to_owned(),
                }}
            </p>
            <div class="sanitize-options">
                <label>"file paths "
                    <select data-testid="strip-paths" on:change=path_choice>
                        <option value="keep">"keep"</option>
                        <option value="basenames">"file names only"</option>
                        <option value="remove">"remove"</option>
                    </select>
                </label>
                <label><input type="checkbox" data-testid="strip-buildids" on:change=move |ev| build_ids.set(event_target_checked(&ev)) />"remove build ids"</label>
                <label><input type="checkbox" data-testid="strip-comments" on:change=move |ev| comments.set(event_target_checked(&ev)) />"remove comments"</label>
                {keys}
                <label>"redact function names matching "
                    <input data-testid="redact" placeholder="regex, e.g. ^internal/" on:change=move |ev| redact.set(event_target_value(&ev)) />
                </label>
            </div>
            {move || match sanitized.get() {
                Some(Ok(s)) => preview(&s).into_any(),
                Some(Err(e)) => view! { <p class="error" data-testid="sanitize-error">{e}</p> }.into_any(),
                None => view! { <p>"…"</p> }.into_any(),
            }}
            <div class="sanitize-options">
                <label title="the page encrypts the profile (AES-256-GCM) and uploads only that; the key is in the link's #fragment, which browsers never send">
                    <input type="checkbox" data-testid="share-encrypt" on:change=move |ev| encrypt.set(event_target_checked(&ev)) />
                    "encrypt: the server keeps bytes it cannot read, the key is in the link only"
                </label>
                <label>"the link expires "
                    <select data-testid="share-expires" on:change=move |ev| expires_in.set(event_target_value(&ev))>
                        {expiry_options}
                    </select>
                </label>
            </div>
            <button data-testid="share-upload" on:click=send>"Upload and copy link"</button>
        </div>
    }
}
