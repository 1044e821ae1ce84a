//! One file per view; each asks the worker for core's report through the page's state
//! and draws it.

pub mod diff;
pub mod flame;
pub mod goroutines;
pub mod history;
pub mod labels;
pub mod sandwich;
pub mod table;

use leptos::prelude::*;

use crate::app::state::Answer;

fn error_view(err: String) -> AnyView {
    view! { <p class="error" data-testid="error">{err}</p> }.into_any()
}

fn busy_view() -> AnyView {
    view! { <p class="busy" data-testid="busy">"analysing…"</p> }.into_any()
}

/// An answer drawn by `ready`, or the error, or "analysing…" while it is on its way.
fn answered<T: Clone + Send + Sync + 'static>(answer: Answer<T>, ready: impl Fn(T) -> AnyView) -> AnyView {
    match answer.get() {
        Some(Ok(value)) => ready(value),
        Some(Err(err)) => error_view(err),
        None => busy_view(),
    }
}

/// [`answered`] for views that follow their answer themselves (flame graphs take it as
/// a signal): drawn again only when the answer turns ready, failed or pending, not for
/// each new window.
fn when_ready<T: Send + Sync + 'static>(answer: Answer<T>, ready: impl Fn() -> AnyView) -> impl Fn() -> AnyView {
    let status = Memo::new(move |_| answer.with(|a| a.as_ref().map(|r| r.as_ref().map(|_| ()).map_err(Clone::clone))));
    move || match status.get() {
        Some(Ok(())) => ready(),
        Some(Err(err)) => error_view(err),
        None => busy_view(),
    }
}
