//! Painting frames on a HiDPI canvas: colours per package (or per diff), boxes with
//! their names cut to fit, and the flame graph's own frames laid out by core. The Time
//! order view paints its boxes with the same pieces.

use std::collections::HashMap;

use leptos::prelude::*;
use stacklens_core::analysis::summary::package_of;
use stacklens_core::analysis::tree::{CallTree, ROOT};
use stacklens_core::layout::Rect;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::JsCast;
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement};

use stacklens_core::analysis::tree::window::MAX_ROWS;

/// A flame graph's row height in CSS pixels.
pub(super) const ROW: f64 = 18.0;

#[derive(Clone, Copy, PartialEq, Default)]
pub struct FlameSettings {
    pub icicle: bool,
    pub diff: bool,
    /// For diffs: compare shares of each total rather than raw values.
    pub normalize: bool,
}

/// What a frame's colour is chosen by: its package, or its name when it has none.
fn colour_key(name: &str) -> &str {
    match package_of(name) {
        "" => name,
        p => p,
    }
}

/// Stable colour per package: warm hues for code, hashed from the package path.
pub(crate) fn package_colour(name: &str) -> String {
    let package = colour_key(name);
    let hash = package.bytes().fold(2166136261u32, |h, b| (h ^ u32::from(b)).wrapping_mul(16777619));
    let hue = hash % 55; // red..yellow
    let light = 52 + (hash >> 8) % 14;
    format!("hsl({hue}, 78%, {light}%)")
}

/// Red when a frame grew, blue when it shrank, by how much relative to its size.
fn diff_colour(total: i64, base: i64) -> String {
    let delta = total - base;
    let scale = total.max(base).max(1) as f64;
    let strength = (delta.abs() as f64 / scale).min(1.0);
    let light = 92.0 - 42.0 * strength;
    if delta >= 0 {
        format!("hsl(0, 80%, {light:.0}%)")
    } else {
        format!("hsl(220, 80%, {light:.0}%)")
    }
}

fn context(canvas: &HtmlCanvasElement) -> Option<CanvasRenderingContext2d> {
    canvas.get_context("2d").ok().flatten()?.dyn_into().ok()
}

/// The canvas's context for drawing `css_width` × `css_height` CSS pixels at the screen's
/// pixel ratio (at most `max_ratio`), cleared.
pub(crate) fn sized_context(
    canvas: &HtmlCanvasElement,
    css_width: f64,
    css_height: f64,
    max_ratio: f64,
) -> Option<CanvasRenderingContext2d> {
    let dpr = web_sys::window().map_or(1.0, |w| w.device_pixel_ratio()).min(max_ratio);
    // Resizing reallocates the canvas: only when the size changed.
    let (w, h) = ((css_width * dpr) as u32, (css_height * dpr) as u32);
    if canvas.width() != w || canvas.height() != h {
        canvas.set_width(w);
        canvas.set_height(h);
    }
    let ctx = context(canvas)?;
    let _ = ctx.set_transform(dpr, 0.0, 0.0, dpr, 0.0, 0.0);
    ctx.clear_rect(0.0, 0.0, css_width, css_height);
    Some(ctx)
}

/// Writes a frame's name in its box (`width` wide from `x`, text on `baseline`) in the
/// current font and fill, cut with … to fit; boxes too narrow for a few letters get none.
fn box_label(ctx: &CanvasRenderingContext2d, name: &str, x: f64, width: f64, baseline: f64) {
    if width <= 28.0 {
        return;
    }
    let chars = ((width - 6.0) / 7.2) as usize;
    let label: String = if name.chars().count() > chars {
        name.chars().take(chars.saturating_sub(1)).chain(['…']).collect()
    } else {
        name.to_owned()
    };
    let _ = ctx.fill_text(&label, x + 3.0, baseline);
}

/// A frame's box as painted: its top left corner, its width (`label_width` for the name
/// written in it), its fill and its name.
pub(crate) struct PaintedBox<'a> {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub label_width: f64,
    pub fill: &'a str,
    pub label: &'a str,
}

/// Paints `boxes` `row` high, then their names ([`box_label`], `baseline` below each
/// top) in the 12px monospace font. The canvas parses its fill style from a string each
/// time it is set, so it is set only when it changes, and once for all the names.
pub(crate) fn paint_boxes(ctx: &CanvasRenderingContext2d, boxes: &[PaintedBox<'_>], row: f64, baseline: f64) {
    let mut fill = None;
    for b in boxes {
        if fill != Some(b.fill) {
            ctx.set_fill_style_str(b.fill);
            fill = Some(b.fill);
        }
        ctx.fill_rect(b.x, b.y, b.width, row);
    }
    ctx.set_font("12px ui-monospace, SFMono-Regular, Menlo, monospace");
    ctx.set_fill_style_str("#1d1f24");
    for b in boxes {
        box_label(ctx, b.label, b.x, b.label_width, b.y + baseline);
    }
}

/// The rows a flame graph of `tree` shows.
pub(super) fn rows(tree: &CallTree) -> u32 {
    (tree.max_depth + 1).min(MAX_ROWS)
}

/// Paints the frames `laid` out of `tree` on a canvas `css_height` high: a search's
/// `hits` in its colour and the rest grey, or else each frame by its diff or package.
pub(super) fn paint_frames(
    ctx: &CanvasRenderingContext2d,
    tree: &CallTree,
    laid: &[Rect],
    css_height: f64,
    settings: FlameSettings,
    hits: Option<&[bool]>,
) {
    // With normalisation a frame is compared as a share of each profile's total.
    let base_scale = if settings.normalize && tree.base_values(ROOT).total > 0 {
        tree.total() as f64 / tree.base_values(ROOT).total as f64
    } else {
        1.0
    };
    // The colours: a search's two, the root's, one per package (made once), or a
    // diff's one per frame.
    let mut colours: Vec<String> =
        ["hsl(300, 70%, 60%)", "hsl(0, 0%, 82%)", "hsl(0, 0%, 70%)"].map(str::to_owned).into();
    let (matched, unmatched, root) = (0, 1, 2);
    let mut by_package: HashMap<&str, usize> = HashMap::new();
    let fills: Vec<usize> = laid
        .iter()
        .map(|r| match hits {
            Some(h) => {
                if h[r.node as usize] {
                    matched
                } else {
                    unmatched
                }
            }
            None if settings.diff => {
                let base = (tree.base_values(r.node).total as f64 * base_scale) as i64;
                colours.push(diff_colour(tree.nodes[r.node as usize].total, base));
                colours.len() - 1
            }
            None if r.node == ROOT => root,
            None => {
                let name = tree.name(r.node);
                *by_package.entry(colour_key(name)).or_insert_with(|| {
                    colours.push(package_colour(name));
                    colours.len() - 1
                })
            }
        })
        .collect();
    let boxes: Vec<PaintedBox> = laid
        .iter()
        .zip(fills)
        .map(|(r, fill)| PaintedBox {
            x: r.x,
            y: if settings.icicle { f64::from(r.depth) * ROW } else { css_height - f64::from(r.depth + 1) * ROW },
            width: (r.width - 0.5).max(0.5),
            label_width: r.width,
            fill: &colours[fill],
            label: tree.name(r.node),
        })
        .collect();
    paint_boxes(ctx, &boxes, ROW - 1.0, ROW - 5.0);
}

/// A counter bumped whenever the canvas is resized (the window, the split beside the
/// table), so that it is painted again.
pub(super) fn resize_count(canvas_ref: NodeRef<leptos::html::Canvas>) -> RwSignal<u32> {
    let resized = RwSignal::new(0u32);
    let observer = StoredValue::new_local(None::<(web_sys::ResizeObserver, Closure<dyn FnMut()>)>);
    Effect::new(move |_| {
        let Some(canvas) = canvas_ref.get() else { return };
        if let Some(Some((old, _))) = observer.try_update_value(Option::take) {
            old.disconnect();
        }
        let bump = Closure::<dyn FnMut()>::new(move || resized.update(|n| *n = n.wrapping_add(1)));
        if let Ok(o) = web_sys::ResizeObserver::new(bump.as_ref().unchecked_ref()) {
            o.observe(&canvas);
            observer.set_value(Some((o, bump)));
        }
    });
    on_cleanup(move || {
        if let Some(Some((o, _bump))) = observer.try_update_value(Option::take) {
            o.disconnect();
        }
    });
    resized
}
