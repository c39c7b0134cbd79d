//! Reading a file's header without reading the file, and checking a written migration against
//! its source (`--verify`).

use std::collections::HashMap;
use std::path::Path;

use pisess_formats::open::open_regular;
use pisess_formats::{Event, ProblemKind, ReadError, SessionReader, Severity, js};
use pisess_migrate::Plan;
use serde_json::Value;

/// What the start of a file says about it.
#[derive(Debug)]
pub enum Probe {
    /// A session header and the plan pi would follow.
    Header(Plan),
    /// No usable header: the error the reader gave.
    Rejected(ProblemKind),
}

/// Reads `path` up to its header (at most the bytes before it).
pub fn probe(path: &Path) -> std::io::Result<Probe> {
    let file = open_regular(path)?;
    let mut header = None;
    let mut rejection = None;
    let result = SessionReader::with_chunk_size(file, 16 << 10).read(|ev| match ev {
        Event::Header(h) => {
            header = Some(h.fields.clone());
            Err(())
        }
        Event::Problem(p) => {
            if p.severity() == Severity::Error {
                rejection = Some(p.kind.clone());
            }
            Ok(())
        }
        Event::Record(..) => Ok(()),
    });
    match result {
        Ok(_) | Err(ReadError::Stopped(())) => {}
        Err(ReadError::Io(e)) => return Err(e),
    }
    Ok(match header {
        Some(h) => Probe::Header(Plan::for_header(&h)),
        None => Probe::Rejected(rejection.unwrap_or(ProblemKind::Empty)),
    })
}

/// The id fields renamed by [`normalize`].
const ID_FIELDS: [&str; 3] = ["id", "parentId", "firstKeptEntryId"];

/// Renames every entry id (in `id`, `parentId`, `firstKeptEntryId` of the elements after the
/// header) to `#n`, n being the order of its first appearance, so that two lists compare equal
/// when their structure is the same whatever ids they drew.
fn normalize(entries: &mut [Value]) {
    let mut names: HashMap<String, usize> = HashMap::new();
    for e in entries.iter_mut().skip(1) {
        let Value::Object(obj) = e else { continue };
        for key in ID_FIELDS {
            if let Some(Value::String(s)) = obj.get_mut(key) {
                let n = names.len();
                let k = *names.entry(s.clone()).or_insert(n);
                *s = format!("#{k}");
            }
        }
    }
}

/// One element of the source: a parsed value, or the exact text of a record that serde_json
/// cannot hold (written back unchanged by the migration).
enum Element {
    Value,
    Raw(String),
}

/// Checks that `written` is the migration of `source`: every element the reader keeps from the
/// source is in `written`, in order, and the two lists are equal by structure once ids are
/// renamed by first appearance (the source migrated in memory by
/// `pisess_migrate::migrate_values`, a separate path from the streaming writer).
pub fn verify(written: &Path, source: &Path) -> Result<(), String> {
    let mut values: Vec<Value> = Vec::new();
    let mut kinds: Vec<Element> = Vec::new();
    let file = open_regular(source).map_err(|e| format!("cannot re-read the source: {e}"))?;
    let read = SessionReader::new(file).read(|ev| {
        match ev {
            Event::Header(h) => {
                values.push(Value::Object(h.fields.clone()));
                kinds.push(Element::Value);
            }
            Event::Record(r, _) if !values.is_empty() => {
                match serde_json::from_str::<Value>(r.json) {
                    Ok(v) => {
                        values.push(v);
                        kinds.push(Element::Value);
                    }
                    Err(_) => {
                        // A truthy non-object placeholder keeps the positions.
                        values.push(Value::Array(Vec::new()));
                        kinds.push(Element::Raw(r.json.to_owned()));
                    }
                }
            }
            _ => {}
        }
        Ok::<(), std::convert::Infallible>(())
    });
    match read {
        Ok(_) => {}
        Err(ReadError::Io(e)) => return Err(format!("cannot re-read the source: {e}")),
        Err(ReadError::Stopped(never)) => match never {},
    }
    if values.is_empty() {
        return Err("the source has no session header".into());
    }
    pisess_migrate::migrate_values(&mut values);

    let bytes = std::fs::read(written).map_err(|e| format!("cannot re-read the output: {e}"))?;
    let text = std::str::from_utf8(&bytes).map_err(|e| format!("output is not UTF-8: {e}"))?;
    if !text.is_empty() && !text.ends_with('\n') {
        return Err("the output does not end with a newline".into());
    }
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() != values.len() {
        return Err(format!(
            "{} elements written, the source has {}",
            lines.len(),
            values.len()
        ));
    }
    let mut out = Vec::with_capacity(lines.len());
    for (i, (line, kind)) in lines.iter().zip(&kinds).enumerate() {
        match kind {
            Element::Raw(raw) => {
                if line != raw {
                    return Err(format!("line {}: the unparsable record changed", i + 1));
                }
                out.push(Value::Array(Vec::new()));
            }
            Element::Value => out.push(
                serde_json::from_str::<Value>(line)
                    .map_err(|e| format!("line {}: not JSON: {e}", i + 1))?,
            ),
        }
    }
    normalize(&mut values);
    normalize(&mut out);
    for (i, (a, b)) in values.iter().zip(&out).enumerate() {
        if js::to_string(a) != js::to_string(b) {
            return Err(format!(
                "line {}: differs from the source's migration",
                i + 1
            ));
        }
    }
    // What the model sees must not change either: compare pi's context (the agent layer's
    // buildSessionContext) at every leaf of the written file with the source's migration.
    // The ids were renamed identically on both sides above, so the contexts compare directly.
    contexts_match(&values, &out)?;
    Ok(())
}

/// Checks that the context at every leaf (an entry no other entry names as parent) is the same
/// in `a` and `b` (header first in both).
fn contexts_match(a: &[Value], b: &[Value]) -> Result<(), String> {
    use pisess_engine::agent::{EntryIndex, project};
    let (a, b) = (
        a.get(1..).unwrap_or_default(),
        b.get(1..).unwrap_or_default(),
    );
    let parents: std::collections::HashSet<&str> = b
        .iter()
        .filter_map(|e| e.get("parentId").and_then(Value::as_str))
        .collect();
    let (ia, ib) = (EntryIndex::new(a), EntryIndex::new(b));
    for leaf in b.iter().filter_map(|e| e.get("id").and_then(Value::as_str)) {
        if parents.contains(leaf) {
            continue;
        }
        let pa = ia
            .path(Some(leaf))
            .map_err(|e| format!("source, leaf {leaf}: {e}"))?;
        let pb = ib
            .path(Some(leaf))
            .map_err(|e| format!("output, leaf {leaf}: {e}"))?;
        // Compared as pi's JSON.parse reads them: `1.0`, `1` and `1e0` are one number.
        if js::to_string(&project(&pa).context_json())
            != js::to_string(&project(&pb).context_json())
        {
            return Err(format!(
                "the model's context at leaf {leaf} differs from the source's"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn contexts_are_compared_at_every_leaf() {
        let a: Vec<Value> = serde_json::from_str(
            r#"[{"type":"session","id":"s"},
                {"type":"message","id":"x","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"hi","timestamp":1}},
                {"type":"message","id":"y","parentId":"x","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"one","timestamp":2}},
                {"type":"message","id":"z","parentId":"x","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"two","timestamp":3}}]"#,
        )
        .unwrap();
        assert_eq!(contexts_match(&a, &a), Ok(()));
        let mut b = a.clone();
        b[3]["message"]["content"] = Value::from("changed");
        let err = contexts_match(&a, &b).unwrap_err();
        assert!(err.contains("leaf z"), "{err}");
        // A number written otherwise in the source (`1.0`, `-0`, `1E2`: the migration writes
        // it as JSON.stringify does) is the same number.
        let mut c = a.clone();
        for (k, src) in [(1, "1.0"), (2, "-0"), (3, "1E2")] {
            c[k]["message"]["timestamp"] = serde_json::from_str(src).unwrap();
        }
        let mut d = c.clone();
        for (k, out) in [(1, "1"), (2, "0"), (3, "100")] {
            d[k]["message"]["timestamp"] = serde_json::from_str(out).unwrap();
        }
        assert_eq!(contexts_match(&c, &d), Ok(()));
    }

    #[test]
    fn normalize_renames_by_first_appearance() {
        let mut v: Vec<Value> = serde_json::from_str(
            r#"[{"type":"session","id":"s"},{"id":"x","parentId":null},{"id":"y","parentId":"x"}]"#,
        )
        .unwrap();
        normalize(&mut v);
        assert_eq!(v[2]["parentId"], "#0");
        assert_eq!(v[2]["id"], "#1");
        assert_eq!(v[0]["id"], "s");
    }
}
