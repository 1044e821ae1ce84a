//! Flame-graph geometry: which rectangles to paint for a viewport, so the page only
//! draws. Frames narrower than `min_width_px` are not emitted (their area stays part
//! of the parent), which keeps a 100k-node tree to a few thousand rectangles.

use serde::{Deserialize, Serialize};

use crate::analysis::tree::{CallTree, ROOT};

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Viewport {
    /// The zoomed node: it spans the full width; its ancestors are drawn above it.
    pub zoom: u32,
    pub width_px: f64,
    pub min_width_px: f64,
    /// Rows below this depth (relative to the root) are not emitted.
    pub max_depth: u32,
    /// The part of the zoomed frame's span the width shows, as fractions of it (0 and 1
    /// for all of it): speedscope's continuous zoom and pan, within the zoomed frame.
    /// Frames outside it are not emitted; those across its edges are clipped to them.
    pub from: f64,
    pub to: f64,
}

impl Default for Viewport {
    fn default() -> Self {
        Self { zoom: ROOT, width_px: 1000.0, min_width_px: 0.5, max_depth: u32::MAX, from: 0.0, to: 1.0 }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rect {
    pub node: u32,
    pub depth: u32,
    pub x: f64,
    pub width: f64,
}

/// Rectangles for `tree` in `viewport`, parents before children.
pub fn layout(tree: &CallTree, viewport: &Viewport) -> Vec<Rect> {
    let zoom = if (viewport.zoom as usize) < tree.nodes.len() { viewport.zoom } else { ROOT };
    let z = &tree.nodes[zoom as usize];
    let mut rects = Vec::new();
    if z.total <= 0 || viewport.width_px <= 0.0 {
        return rects;
    }
    // A window that is not a part of the span (reversed, empty, out of [0, 1], NaN)
    // shows all of it.
    let (from, to) = (viewport.from.max(0.0), viewport.to.min(1.0));
    let (from, to) = if from < to { (from, to) } else { (0.0, 1.0) };
    let scale = viewport.width_px / (z.total as f64 * (to - from));
    let offset = from * z.total as f64 * scale;
    let clipped = |node: u32, depth: u32, x: f64, width: f64| {
        let (left, right) = ((x - offset).max(0.0), (x - offset + width).min(viewport.width_px));
        Rect { node, depth, x: left, width: right - left }
    };
    // Ancestors of the zoomed frame fill the width, as in every flame graph tool.
    if zoom != ROOT {
        let mut above = Vec::new();
        let mut ancestor = z.parent;
        loop {
            above.push(Rect {
                node: ancestor,
                depth: tree.nodes[ancestor as usize].depth,
                x: 0.0,
                width: viewport.width_px,
            });
            if ancestor == ROOT {
                break;
            }
            ancestor = tree.nodes[ancestor as usize].parent;
        }
        rects.extend(above.into_iter().rev());
    }
    if z.depth > viewport.max_depth {
        return rects;
    }
    rects.push(clipped(zoom, z.depth, 0.0, z.total as f64 * scale));
    // Pre-order walk: `open` holds, per drawn ancestor, its subtree end and where its
    // next child starts. Narrow subtrees are skipped whole.
    let mut open: Vec<(u32, f64)> = vec![(z.end, 0.0)];
    let mut i = zoom + 1;
    while i < z.end {
        while open.last().is_some_and(|&(end, _)| end <= i) {
            open.pop();
        }
        let n = &tree.nodes[i as usize];
        let width = n.total as f64 * scale;
        let slot = open.last_mut().expect("the zoomed node stays open");
        slot.1 += tree.left_out_before(i) as f64 * scale;
        let x = slot.1;
        slot.1 += width;
        let outside = x + width <= offset || x >= offset + viewport.width_px;
        if width < viewport.min_width_px || n.depth > viewport.max_depth || outside {
            i = n.end;
            continue;
        }
        rects.push(clipped(i, n.depth, x, width));
        open.push((n.end, x));
        i += 1;
    }
    rects
}

/// The node under a point, for hover and click.
pub fn hit(rects: &[Rect], x: f64, depth: u32) -> Option<u32> {
    rects.iter().find(|r| r.depth == depth && x >= r.x && x < r.x + r.width).map(|r| r.node)
}
