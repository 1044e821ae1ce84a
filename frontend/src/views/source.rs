//! The source view (pprof's `list`): per-line flat and cum of the selected function.
//! When the user gives the source files, the code is shown beside the numbers;
//! otherwise the line numbers alone. Files never leave the page.

use leptos::prelude::*;
use leptos::task::spawn_local;
use stacklens_core::analysis::source::{SourceFile, SourceReport};
use stacklens_core::units::format_value;
use web_sys::HtmlInputElement;

use crate::app::state::State;
use crate::worker::protocol::{Ask, Request, Response};

/// The text of the given file that `path` (as the profile names it) most likely is:
/// the same path, else the longest common ending of at least the base name.
fn code_for(files: &[(String, String)], path: &str) -> Option<Vec<String>> {
    let base = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let common = |given: &str| given.bytes().rev().zip(path.bytes().rev()).take_while(|(a, b)| a == b).count();
    files
        .iter()
        .filter(|(given, _)| given == path || given.rsplit(['/', '\\']).next() == Some(base))
        .max_by_key(|(given, _)| common(given))
        .map(|(_, text)| text.lines().map(str::to_owned).collect())
}

fn listing(file: SourceFile, unit: String, code: Option<Vec<String>>) -> impl IntoView {
    let values = |line: i64| file.lines.iter().find(|l| l.line == line).copied();
    let shown = |v: i64| if v == 0 { ".".to_owned() } else { format_value(v, &unit) };
    let has_code = code.is_some();
    let rows = (file.first_line..=file.last_line)
        .map(|line| {
            let (flat, cum) = values(line).map_or((0, 0), |v| (v.flat, v.cum));
            let text = code.as_ref().and_then(|c| c.get((line - 1).max(0) as usize).cloned());
            view! {
                <tr data-testid="source-line" data-line=line.to_string() data-flat=flat.to_string() data-cum=cum.to_string() class:hot=flat != 0>
                    <td>{shown(flat)}</td>
                    <td>{shown(cum)}</td>
                    <td class="line-number">{line}</td>
                    <td class="code">{text}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <section class="source-file" data-testid="source-file" data-file=file.file.clone()>
            <h4>
                {file.file.clone()} " — flat " {format_value(file.flat, &unit)} ", cum " {format_value(file.cum, &unit)}
                {(!has_code).then_some(" (give the source file above to see the code)")}
            </h4>
            <table class="data source">
                <thead><tr><th>"flat"</th><th>"cum"</th><th>"line"</th><th>"code"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        </section>
    }
}

fn report_view(state: State, report: SourceReport) -> AnyView {
    if report.functions.is_empty() {
        return view! { <p class="hint">"No samples in this function."</p> }.into_any();
    }
    let unit = report.unit.clone();
    report
        .functions
        .into_iter()
        .map(|f| {
            let files = f
                .files
                .into_iter()
                .map(|file| {
                    let code = state.source_files.with(|given| code_for(given, &file.file));
                    listing(file, unit.clone(), code)
                })
                .collect_view();
            view! {
                <h3 data-testid="source-function">{f.name}</h3>
                {files}
            }
        })
        .collect_view()
        .into_any()
}

/// Reads the chosen source files into the page's state.
fn add_source_files(state: State, input: HtmlInputElement) {
    let Some(files) = input.files() else { return };
    for i in 0..files.length() {
        let Some(file) = files.get(i) else { continue };
        let file = gloo::file::File::from(file);
        spawn_local(async move {
            let name = file.name();
            match gloo::file::futures::read_as_text(&file).await {
                Ok(text) => state.source_files.update(|f| f.push((name, text))),
                Err(e) => state.report(format!("{name}: cannot read the source file: {e}")),
            }
        });
    }
}

#[component]
pub fn SourceView() -> impl IntoView {
    let state = expect_context::<State>();
    let answer = super::report_on_active(
        state,
        move |e| {
            let functions = format!("^{}$", regex::escape(&state.selected_fn.get()?));
            Some(Request::Ask { profile: e.id, query: state.query.get(), ask: Ask::Source { functions } })
        },
        |r| match r {
            Response::Source(s) => Some(s),
            _ => None,
        },
    );
    view! {
        <div class="source-view" data-testid="view-source-panel">
            <label>
                "function "
                <input
                    data-testid="source-function-input"
                    aria-label="function to list"
                    placeholder="pick one with ⇅ in Top, or type its name"
                    prop:value=move || state.selected_fn.get().unwrap_or_default()
                    on:change=move |ev| state.select(Some(event_target_value(&ev)).filter(|f| !f.is_empty()))
                />
            </label>
            <label class="file">
                " source files "
                <input type="file" multiple data-testid="source-files" on:change=move |ev| add_source_files(state, event_target(&ev)) />
            </label>
            {move || {
                if state.selected_fn.get().is_none() {
                    return view! { <p class="hint">"Pick a function with ⇅ in the Top view, or type its name, to see its lines."</p> }.into_any();
                }
                super::answered(answer, move |report| report_view(state, report))
            }}
        </div>
    }
}
