//! A flame graph's questions to the worker: the window of a whole call tree it shows,
//! asked again when the zoom or the search changes, with the last few windows kept.

use std::sync::Arc;

use leptos::prelude::*;
use stacklens_core::analysis::tree::CallTree;

use crate::app::state::{Answer, State};
use crate::views::SharedTree;
use crate::worker::protocol::{Ask, Request, Response, TreeKey, TreeKind};

/// What a flame graph shows: a window of a call tree (see [`CallTree::window`]), the
/// zoomed node in it, and the value a search matches in the whole tree (with the
/// search it was counted for).
#[derive(Clone, PartialEq)]
pub struct FlameData {
    pub tree: SharedTree,
    pub zoom: u32,
    pub matched: Option<(String, i64)>,
    /// What the worker's tree left out, from [`WindowMeta`].
    pub pruned_below: i64,
    pub complete: bool,
}

/// One flame graph's questions to the worker: a window of the whole tree a [`TreeKey`]
/// names, cut again when the zoom or the search changes. Another tree blanks the graph
/// until it arrives; another zoom or search keeps the old window meanwhile. The last
/// few windows of the tree shown are kept, so zooming back out (a click on an ancestor,
/// Escape) shows the wider window at once instead of asking for it again.
#[derive(Copy, Clone)]
pub struct TreeWindow {
    pub answer: Answer<FlameData>,
    token: StoredValue<u64>,
    shown: StoredValue<Option<TreeKey>>,
    /// Windows received for `shown`, by zoom and search, the latest last.
    recent: StoredValue<Vec<(WindowAt, FlameData)>>,
}

/// The zoom path and the search a window was cut for.
type WindowAt = (Vec<String>, String);

/// How many windows [`TreeWindow`] keeps (cpu.large's root window: 4,052 nodes, 0.19 MB
/// encoded).
const RECENT_WINDOWS: usize = 8;

impl TreeWindow {
    pub fn new() -> Self {
        TreeWindow {
            answer: RwSignal::new(None),
            token: StoredValue::new(0),
            shown: StoredValue::new(None),
            recent: StoredValue::new(Vec::new()),
        }
    }

    pub fn ask(&self, state: &State, key: TreeKey, zoom: Vec<String>, search: String) {
        if self.shown.with_value(|k| k.as_ref() != Some(&key)) {
            self.answer.set(None);
            self.shown.set_value(Some(key.clone()));
            self.recent.set_value(Vec::new());
        }
        let at = (zoom, search);
        if let Some(kept) = self.recent.with_value(|r| r.iter().find(|(a, _)| *a == at).map(|(_, d)| d.clone())) {
            // An answer still on its way is for another window: not to be shown.
            self.token.update_value(|t| *t += 1);
            self.answer.set(Some(Ok(kept)));
            return;
        }
        let TreeKey { id, query, kind } = key;
        let (zoom, search) = at.clone();
        let request = Request::Ask { profile: id, query, ask: Ask::Tree { kind, zoom, search } };
        let recent = self.recent;
        state.ask(self.token, self.answer, request, move |response, bytes| {
            let window = decode_tree(response, bytes);
            if let Some(Ok(data)) = &window {
                recent.update_value(|r| {
                    if r.len() == RECENT_WINDOWS {
                        r.remove(0);
                    }
                    r.push((at, data.clone()));
                });
            }
            window
        });
    }
}

impl Default for TreeWindow {
    fn default() -> Self {
        Self::new()
    }
}

fn decode_tree(response: Response, bytes: Option<Vec<u8>>) -> Option<Result<FlameData, String>> {
    match response {
        Response::Tree(Ok(meta)) => Some(
            bytes
                .and_then(|b| CallTree::from_bytes(&b))
                .map(|t| FlameData {
                    tree: SharedTree(Arc::new(t)),
                    zoom: meta.zoom,
                    matched: meta.matched,
                    pruned_below: meta.pruned_below,
                    complete: meta.complete,
                })
                .ok_or_else(|| "the worker sent an unreadable tree".to_owned()),
        ),
        Response::Tree(Err(e)) => Some(Err(e)),
        _ => None,
    }
}

/// The key of `kind`'s tree for `id` at the page's sample type and filters.
pub fn tree_key(state: &State, id: u32, kind: TreeKind) -> TreeKey {
    TreeKey { id, query: state.query.get(), kind }
}
