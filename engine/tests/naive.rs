//! An independent, in-memory reading of a session file: the oracle for the store's answers.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::path::Path;

use pisess_formats::{Event, SessionReader};

/// One record with a string id.
#[derive(Debug, Clone)]
pub struct Node {
    pub id: String,
    pub parent: Option<String>,
    pub line: u64,
}

/// What the formats reader sees in a file.
#[derive(Debug, Default)]
pub struct Naive {
    pub version: f64,
    pub rejected: bool,
    pub nodes: Vec<Node>,
    /// id → index in `nodes` (a later duplicate wins, as in pi).
    pub by_id: HashMap<String, usize>,
    /// Records after the header.
    pub records: u64,
}

impl Naive {
    pub fn read(path: &Path) -> Self {
        let mut n = Self::default();
        let summary = SessionReader::new(std::fs::File::open(path).unwrap())
            .read(|ev| {
                match ev {
                    Event::Header(h) => n.version = h.version(),
                    Event::Record(r, _) => {
                        n.records += 1;
                        if let Ok(e) = &r.entry
                            && let Some(id) = e.id()
                        {
                            n.by_id.insert(id.to_owned(), n.nodes.len());
                            n.nodes.push(Node {
                                id: id.to_owned(),
                                parent: e.parent_id().map(str::to_owned),
                                line: r.line,
                            });
                        }
                    }
                    Event::Problem(_) => {}
                }
                Ok::<(), ()>(())
            })
            .unwrap();
        n.rejected = summary.rejected || summary.header.is_none();
        n
    }

    /// Root-first path of ids from the root to `id`, or `None` when the chain has a cycle.
    pub fn path(&self, id: &str) -> Option<Vec<String>> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut cur = self.by_id.get(id).copied();
        while let Some(i) = cur {
            if !seen.insert(i) {
                return None;
            }
            let n = &self.nodes[i];
            out.push(n.id.clone());
            cur = n.parent.as_ref().and_then(|p| self.by_id.get(p).copied());
        }
        out.reverse();
        Some(out)
    }

    /// The lowest common ancestor of two ids (by path comparison).
    pub fn lca(&self, a: &str, b: &str) -> Option<Option<String>> {
        let (pa, pb) = (self.path(a)?, self.path(b)?);
        let mut last = None;
        for (x, y) in pa.iter().zip(&pb) {
            if x != y {
                break;
            }
            last = Some(x.clone());
        }
        Some(last)
    }
}

/// A tiny deterministic PRNG (xorshift).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}
