//! A call tree's compact binary form, to hand a tree from the Web Worker to the page
//! without JSON: a header, the names, then fixed-size node records.

use super::{BaseValues, CallTree, TreeNode};

impl CallTree {
    /// A compact binary form, to hand a tree from a Web Worker to the page without
    /// JSON: a header, the names, then fixed-size node records.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(64 + self.nodes.len() * 32 + self.base.len() * 16 + self.left_out_before.len() * 8);
        let put_str = |out: &mut Vec<u8>, s: &str| {
            out.extend_from_slice(&(s.len() as u32).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        };
        out.extend_from_slice(b"SLT3");
        put_str(&mut out, &self.sample_type);
        put_str(&mut out, &self.unit);
        out.extend_from_slice(&(self.names.len() as u32).to_le_bytes());
        for (n, f) in self.names.iter().zip(&self.files) {
            put_str(&mut out, n);
            put_str(&mut out, f);
        }
        out.extend_from_slice(&(self.nodes.len() as u32).to_le_bytes());
        out.push(u8::from(!self.base.is_empty()) | (u8::from(!self.left_out_before.is_empty()) << 1));
        for n in &self.nodes {
            for v in [n.name, n.parent, n.depth, n.end] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(&n.self_value.to_le_bytes());
            out.extend_from_slice(&n.total.to_le_bytes());
        }
        for b in &self.base {
            out.extend_from_slice(&b.self_value.to_le_bytes());
            out.extend_from_slice(&b.total.to_le_bytes());
        }
        for v in &self.left_out_before {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    /// Reads [`CallTree::to_bytes`]; `None` for bytes it did not write.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let mut r = Reader { bytes, at: 0 };
        if r.take(4)? != b"SLT3" {
            return None;
        }
        let sample_type = r.string()?;
        let unit = r.string()?;
        let n_names = r.u32()? as usize;
        // The count is read from the bytes: reserve only what they can hold (a name and
        // a file take at least 8 bytes), not 4 billion entries for a corrupt header.
        let capacity = n_names.min(r.remaining() / 8);
        let (mut names, mut files) = (Vec::with_capacity(capacity), Vec::with_capacity(capacity));
        for _ in 0..n_names {
            names.push(r.string()?);
            files.push(r.string()?);
        }
        let n_nodes = r.u32()? as usize;
        let flags = r.take(1)?[0];
        let u32_at = |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let i64_at = |b: &[u8], i: usize| i64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let nodes: Vec<TreeNode> = r
            .take(n_nodes.checked_mul(32)?)?
            .chunks_exact(32)
            .map(|c| TreeNode {
                name: u32_at(c, 0),
                parent: u32_at(c, 4),
                depth: u32_at(c, 8),
                end: u32_at(c, 12),
                self_value: i64_at(c, 16),
                total: i64_at(c, 24),
            })
            .collect();
        let base = if flags & 1 != 0 {
            let records = r.take(n_nodes.checked_mul(16)?)?;
            records.chunks_exact(16).map(|c| BaseValues { self_value: i64_at(c, 0), total: i64_at(c, 8) }).collect()
        } else {
            Vec::new()
        };
        let left_out_before = if flags & 2 != 0 {
            r.take(n_nodes.checked_mul(8)?)?.chunks_exact(8).map(|c| i64_at(c, 0)).collect()
        } else {
            Vec::new()
        };
        // Indices must stay inside the arena so every accessor is safe, and parents come
        // before their children (pre-order), so walking up always ends at the root.
        let valid = nodes.iter().enumerate().all(|(i, n)| {
            (n.name as usize) < names.len()
                && (n.parent as usize) < i.max(1)
                && (n.end as usize) <= nodes.len()
                && n.end as usize > i
        });
        if !valid || nodes.is_empty() {
            return None;
        }
        let max_depth = nodes.iter().map(|n| n.depth).max().unwrap_or(0);
        Some(CallTree { nodes, names, files, base, left_out_before, sample_type, unit, max_depth, pruned_below: 0 })
    }
}

/// A bounds-checked cursor over [`CallTree::to_bytes`] output.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn string(&mut self) -> Option<String> {
        let len = self.u32()? as usize;
        String::from_utf8(self.take(len)?.to_vec()).ok()
    }
}
