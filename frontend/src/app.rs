//! The page's components.

use leptos::prelude::*;
use leptos::task::spawn_local;
use stacklens_core::analysis::top::TopReport;
use stacklens_core::units::{format_value_in, percentage, report_unit};
use web_sys::HtmlInputElement;

use crate::Loaded;

#[component]
pub fn App() -> impl IntoView {
    let loaded = RwSignal::new(None::<std::sync::Arc<Loaded>>);
    let error = RwSignal::new(None::<String>);
    let sample_index = RwSignal::new(0usize);

    let on_file = move |ev: leptos::ev::Event| {
        let input: HtmlInputElement = event_target(&ev);
        let Some(file) = input.files().and_then(|f| f.get(0)) else { return };
        let file = gloo::file::File::from(file);
        spawn_local(async move {
            let name = file.name();
            match gloo::file::futures::read_as_bytes(&file).await {
                Ok(bytes) => match Loaded::parse(&name, &bytes) {
                    Ok(l) => {
                        sample_index.set(l.sample_types().1);
                        loaded.set(Some(std::sync::Arc::new(l)));
                        error.set(None);
                    }
                    Err(e) => error.set(Some(e)),
                },
                Err(e) => error.set(Some(format!("{name}: cannot read the file: {e}"))),
            }
        });
    };

    let report = move || loaded.get().map(|l| l.top(sample_index.get()));

    view! {
        <header>
            <h1>"stacklens"</h1>
            <input type="file" data-testid="file-input" on:change=on_file />
        </header>
        <Show when=move || error.get().is_some()>
            <p class="error" data-testid="error" role="alert">{move || error.get().unwrap_or_default()}</p>
        </Show>
        <Show when=move || loaded.get().is_some()>
            <select
                data-testid="sample-type"
                on:change=move |ev| sample_index.set(event_target_value(&ev).parse().unwrap_or(0))
                prop:value=move || sample_index.get().to_string()
            >
                {move || {
                    loaded
                        .get()
                        .map(|l| {
                            let (names, _) = l.sample_types();
                            names
                                .into_iter()
                                .enumerate()
                                .map(|(i, n)| view! { <option value=i.to_string()>{n}</option> })
                                .collect_view()
                        })
                }}
            </select>
        </Show>
        {move || match report() {
            Some(Ok(r)) => view! { <TopTable report=r /> }.into_any(),
            Some(Err(e)) => view! { <p class="error" data-testid="error">{e}</p> }.into_any(),
            None => view! { <p class="hint">"Choose a profile: pprof (cpu, heap, allocs, block, mutex, goroutine), Go text profiles or a goroutine dump. It is analysed in this page; nothing is uploaded."</p> }.into_any(),
        }}
    }
}

#[component]
fn TopTable(report: TopReport) -> impl IntoView {
    let unit = report_unit(report.functions.iter().map(|f| (f.flat, f.cum)), report.total, &report.unit);
    let total = report.total;
    let rows = report
        .functions
        .iter()
        .map(|f| {
            let v = |x: i64| format_value_in(x, &report.unit, &unit);
            view! {
                <tr data-testid="top-row">
                    <td data-col="flat" data-value=f.flat.to_string()>{v(f.flat)}</td>
                    <td>{percentage(f.flat, total)}</td>
                    <td data-col="cum" data-value=f.cum.to_string()>{v(f.cum)}</td>
                    <td>{percentage(f.cum, total)}</td>
                    <td data-col="name" data-value=f.name.clone()>{f.name.clone()}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table data-testid="top-table">
            <thead><tr><th>"flat"</th><th>"flat%"</th><th>"cum"</th><th>"cum%"</th><th>"name"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}
