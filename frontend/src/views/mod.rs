//! One file per view; each asks the worker for core's report through the page's state
//! and draws it.

pub mod axes;
pub mod details;
pub mod diff;
pub mod flame;
pub mod goroutines;
pub mod graph;
pub mod history;
pub mod labels;
pub mod movers;
pub mod sandwich;
pub mod source;
pub mod split;
pub mod table;
pub mod timeline;
pub mod trend;

use leptos::prelude::*;

use std::sync::Arc;

use stacklens_core::analysis::tree::CallTree;

use crate::app::state::{Answer, Entry, State};
use crate::worker::protocol::{Request, Response};

/// A call tree the views share; equal when it is the same tree (a signal then does not
/// compare millions of nodes).
#[derive(Clone)]
pub struct SharedTree(pub Arc<CallTree>);

impl PartialEq for SharedTree {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

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

/// The worker's report on the active profile: asked again whenever what `request`
/// reads changes, and after the worker restarts; nothing is asked while `request` gives
/// none. `decode` picks the report out of the answer.
fn report_on_active<T: Send + Sync + 'static>(
    state: State,
    request: impl Fn(&Entry) -> Option<Request> + 'static,
    decode: fn(Response) -> Option<Result<T, String>>,
) -> Answer<T> {
    let answer: Answer<T> = RwSignal::new(None);
    let token = StoredValue::new(0);
    Effect::new(move |_| {
        state.generation().get();
        let Some(request) = state.current.get().and_then(|e| request(&e)) else { return };
        answer.set(None);
        state.ask(token, answer, request, move |r, _| decode(r));
    });
    answer
}
