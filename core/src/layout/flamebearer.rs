//! A call tree as Pyroscope's flame graphs carry it (`flamebearer`, and `querier.v1`'s
//! `FlameGraph`): a table of names and, per depth, one run of numbers per frame from
//! left to right — `[x, total, self, name]`, or for a diff
//! `[x, total, self]` of the left (base) profile, the same of the right, then `name`.
//! Each `x` is the gap after the previous frame's end on that level (delta-encoded);
//! a frame's own time sits at its left, its callees after it, in name order. Subtrees
//! the tree left out (see [`CallTree::pruned_below`]) are one `other` frame at the end
//! of their parent, as Pyroscope draws them.

use crate::analysis::tree::{CallTree, ROOT};

/// A flame graph in Pyroscope's layout.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Flamebearer {
    /// Frame names; the first is the root, `total`.
    pub names: Vec<String>,
    /// Per depth, the frames' numbers (4 per frame, or 7 for a diff).
    pub levels: Vec<Vec<i64>>,
    /// The root's total (for a diff: the left's plus the right's).
    pub num_ticks: i64,
    /// The largest self value of any frame (of either side).
    pub max_self: i64,
    /// For a diff: the left (base) and right (compare) totals.
    pub ticks: Option<(i64, i64)>,
}

/// One frame's values on each side: `[total, self]` per side.
type Sides = [[i64; 2]; 2];

/// A frame to emit: a node of the tree, or the left-out rest of one.
#[derive(Copy, Clone)]
enum Frame {
    Node(u32),
    Other(Sides),
}

impl Flamebearer {
    /// The flame graph of a call tree (a diff tree gives a diff flame graph).
    pub fn of(tree: &CallTree) -> Flamebearer {
        let diff = !tree.base.is_empty();
        let sides = if diff { 2 } else { 1 };
        let values = |node: u32| -> Sides {
            let n = &tree.nodes[node as usize];
            let base = tree.base_values(node);
            // The left side of a diff is the base.
            if diff {
                [[base.total, base.self_value], [n.total, n.self_value]]
            } else {
                [[n.total, n.self_value], [0, 0]]
            }
        };
        let mut out = Flamebearer { names: vec!["total".to_owned()], ..Flamebearer::default() };
        let mut name_index: Vec<Option<i64>> = vec![None; tree.names.len()];
        let mut other_index = None;
        // Pre-order, so each level's frames come left to right.
        let mut stack = vec![(Frame::Node(ROOT), 0usize, [0i64; 2])];
        while let Some((frame, depth, x)) = stack.pop() {
            let (v, name) = match frame {
                Frame::Node(node) => (values(node), Some(node)),
                Frame::Other(v) => (v, None),
            };
            let index = match name {
                Some(ROOT) => 0,
                Some(node) => *name_index[tree.nodes[node as usize].name as usize].get_or_insert_with(|| {
                    out.names.push(tree.name(node).to_owned());
                    out.names.len() as i64 - 1
                }),
                None => *other_index.get_or_insert_with(|| {
                    out.names.push("other".to_owned());
                    out.names.len() as i64 - 1
                }),
            };
            if depth == out.levels.len() {
                out.levels.push(Vec::new());
            }
            let level = &mut out.levels[depth];
            for side in 0..sides {
                level.extend([x[side], v[side][0], v[side][1]]);
                out.max_self = out.max_self.max(v[side][1]);
            }
            level.push(index);
            let Some(node) = name else { continue };
            let mut next = [x[0] + v[0][1], x[1] + v[1][1]];
            let mut children = Vec::new();
            let mut rest = [v[0][0] - v[0][1], v[1][0] - v[1][1]];
            for child in tree.children(node) {
                let c = values(child);
                children.push((Frame::Node(child), depth + 1, next));
                for side in 0..2 {
                    next[side] += c[side][0];
                    rest[side] -= c[side][0];
                }
            }
            if rest != [0, 0] {
                children.push((Frame::Other([[rest[0], rest[0]], [rest[1], rest[1]]]), depth + 1, next));
            }
            stack.extend(children.into_iter().rev());
        }
        for level in &mut out.levels {
            let width = 3 * sides + 1;
            for side in 0..sides {
                let mut end = 0;
                for frame in level.chunks_exact_mut(width) {
                    let x = frame[3 * side];
                    frame[3 * side] = x - end;
                    end = x + frame[3 * side + 1];
                }
            }
        }
        let root = values(ROOT);
        if diff {
            out.num_ticks = root[0][0] + root[1][0];
            out.ticks = Some((root[0][0], root[1][0]));
        } else {
            out.num_ticks = root[0][0];
        }
        out
    }

    /// Each name's self value (summed over its frames) and total (summed over its
    /// frames that have no ancestor of the same name, so recursion counts once), on
    /// `side` (0, or 1 for a diff's right): what pprof's `-top` gives as flat and cum,
    /// read back from the levels as a client would.
    pub fn totals_by_name(&self, side: usize) -> std::collections::BTreeMap<String, (i64, i64)> {
        let width = if self.ticks.is_some() { 7 } else { 4 };
        let mut out: std::collections::BTreeMap<String, (i64, i64)> = Default::default();
        // Per level above, its frames' (start, end, name), left to right.
        let mut above: Vec<Vec<(i64, i64, i64)>> = Vec::new();
        for level in &self.levels {
            let mut end = 0;
            let mut here = Vec::new();
            for frame in level.chunks_exact(width) {
                let x = end + frame[3 * side];
                let (total, self_value, name) = (frame[3 * side + 1], frame[3 * side + 2], frame[width - 1]);
                end = x + total;
                here.push((x, x + total, name));
                // Frames on one level do not overlap: the last one with width that starts at
                // or before x is the only one that can hold this frame.
                let recursive = total > 0
                    && above.iter().any(|frames| {
                        let before = &frames[..frames.partition_point(|&(s, _, _)| s <= x)];
                        before
                            .iter()
                            .rev()
                            .find(|&&(s, e, _)| e > s)
                            .is_some_and(|&(_, e, n)| n == name && x + total <= e)
                    });
                let Some(name) = usize::try_from(name).ok().and_then(|i| self.names.get(i)) else { continue };
                let row = out.entry(name.clone()).or_default();
                row.0 += self_value;
                if !recursive {
                    row.1 += total;
                }
            }
            above.push(here);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::query::Query;
    use crate::analysis::tree::TreeOptions;
    use crate::import::parse;

    fn folded(text: &str) -> crate::Profile {
        parse(text.as_bytes()).unwrap()
    }

    #[test]
    fn single_levels_are_delta_encoded_with_self_first() {
        let profile = folded("main;a;b 3\nmain;a 2\nmain;c 5\n");
        let prepared = Query::default().prepare(&profile).unwrap();
        let fb = Flamebearer::of(&CallTree::build(&prepared, &TreeOptions::default()).unwrap());
        assert_eq!(fb.names, ["total", "main", "a", "b", "c"]);
        assert_eq!(fb.num_ticks, 10);
        assert_eq!(fb.max_self, 5);
        assert_eq!(
            fb.levels,
            vec![vec![0, 10, 0, 0], vec![0, 10, 0, 1], vec![0, 5, 2, 2, 0, 5, 5, 4], vec![2, 3, 3, 3]]
        );
        assert_eq!(fb.ticks, None);
    }

    #[test]
    fn names_sum_to_pprof_flat_and_cum_with_recursion() {
        let profile = folded("main;f;f;g 4\nmain;f 1\nmain;g;f 2\n");
        let prepared = Query::default().prepare(&profile).unwrap();
        let fb = Flamebearer::of(&CallTree::build(&prepared, &TreeOptions::default()).unwrap());
        let rows = fb.totals_by_name(0);
        assert_eq!(rows["main"], (0, 7));
        assert_eq!(rows["f"], (3, 7));
        assert_eq!(rows["g"], (4, 6));
    }

    #[test]
    fn pruned_subtrees_become_other() {
        let profile = folded("main;a 100\nmain;b 1\nmain;c 1\n");
        let prepared = Query::default().prepare(&profile).unwrap();
        let tree = CallTree::build(&prepared, &TreeOptions { max_nodes: Some(3), ..TreeOptions::default() }).unwrap();
        let fb = Flamebearer::of(&tree);
        assert_eq!(fb.names, ["total", "main", "a", "other"]);
        assert_eq!(fb.levels[2], vec![0, 100, 100, 2, 0, 2, 2, 3]);
    }

    #[test]
    fn diff_levels_carry_both_sides() {
        let base = folded("main;a 3\nmain;b 1\n");
        let compare = folded("main;a 1\nmain;c 4\n");
        let (b, c) = Query::default().prepare_pair(&base, &compare).unwrap();
        let fb = Flamebearer::of(&CallTree::build_diff(&b, &c, &TreeOptions::default()).unwrap());
        assert_eq!(fb.ticks, Some((4, 5)));
        assert_eq!(fb.num_ticks, 9);
        assert_eq!(fb.levels[0], vec![0, 4, 0, 0, 5, 0, 0]);
        let names: Vec<&str> = fb.levels[2].chunks(7).map(|f| fb.names[f[6] as usize].as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        // b is absent on the right, c on the left: zero-width frames keep their places.
        assert_eq!(fb.levels[2], vec![0, 3, 3, 0, 1, 1, 2, 0, 1, 1, 0, 0, 0, 3, 0, 0, 0, 0, 4, 4, 4]);
        let (left, right) = (fb.totals_by_name(0), fb.totals_by_name(1));
        assert_eq!((left["b"], left["c"], right["b"], right["c"]), ((1, 1), (0, 0), (0, 0), (4, 4)));
        assert_eq!((left["main"], right["main"]), ((0, 4), (0, 5)));
    }
}
