//! The symbols panel: the open profile's mappings (binaries), with their build ids, how
//! many of their addresses have names and what the last symbolization said; and the
//! binaries and debug files dropped into the page, which the worker read there (nothing
//! is uploaded). A profile whose addresses lack names says so, and how to add them.

use leptos::prelude::*;

use super::state::State;
use crate::worker::protocol::MappingStatus;

fn mapping_row(m: MappingStatus) -> impl IntoView {
    let share = format!("{} of {}", m.named, m.locations);
    let build_id = if m.build_id.is_empty() { "—".to_owned() } else { m.build_id.clone() };
    view! {
        <tr data-testid="symbols-mapping">
            <td class="name">{m.file}</td>
            <td class="build-id">{build_id}</td>
            <td class="num">{share}</td>
            <td>{m.said.unwrap_or_default()}</td>
        </tr>
    }
}

#[component]
pub fn SymbolsPanel() -> impl IntoView {
    let state = expect_context::<State>();
    let mappings = move || state.current.get().map(|e| e.summary.mappings).unwrap_or_default();
    let unnamed = move || mappings().iter().any(|m| m.named < m.locations);
    let files = move || {
        state
            .symbol_files
            .get()
            .into_iter()
            .map(|f| {
                let what = match (f.kernel, f.has_code) {
                    (true, _) => "kallsyms, the kernel's names",
                    (false, true) => "binary",
                    (false, false) => "debug file",
                };
                let id = f.build_id.map(|id| format!(", build id {id}")).unwrap_or_default();
                let names = if f.has_names { "" } else { ", no symbols" };
                view! { <li>{format!("{} ({what}{id}{names})", f.name)}</li> }
            })
            .collect_view()
    };
    view! {
        <Show when=move || !mappings().is_empty()>
            <details class="symbols" data-testid="symbols-panel" prop:open=unnamed>
                <summary>
                    "Symbols" {move || if unnamed() { " — some addresses have no names: drop their binaries or debug files here (read in this page, never uploaded)" } else { "" }}
                </summary>
                <table>
                    <thead><tr><th>"binary"</th><th>"build id"</th><th>"named"</th><th>"symbols"</th></tr></thead>
                    <tbody>{move || mappings().into_iter().map(mapping_row).collect_view()}</tbody>
                </table>
                <ul data-testid="symbol-files">{files}</ul>
            </details>
        </Show>
    }
}
