//! Objects that hold a key twice, read as pi's `JSON.parse` reads them.
//!
//! pi never writes such an object, but a hand-edited or badly merged file may hold one
//! (`{"id":"x","id":"a"}`). `JSON.parse` keeps one property per key: it stays where the key was
//! first written and takes the value written last. serde's derived structs refuse the object
//! instead ("duplicate field"), so without this module the entry lost its id, its label or its
//! whole message.
//!
//! [`merged`] rewrites such a text into one where every object holds each key once, in that
//! order and with those values, so that any parse of it reads what pi reads. It builds an
//! outline of the whole value (a node per value), so callers run it only on a text that serde
//! refused for a repeated key ([`is_repeated_key`]), never on every failed parse.
//!
//! Invariants:
//! - only a text that is one complete JSON value (white space around it allowed) is rewritten;
//!   anything this scan cannot follow gives `None` and the caller keeps its own error;
//! - keys are compared decoded (`"id"` and `"\u0069d"` are the same key, as in JavaScript);
//! - everything that is not a repeated member is copied as written: strings keep their escapes,
//!   numbers their digits; only the white space between tokens is dropped;
//! - the scan and the output are iterative, so any depth of nesting is handled in bounded stack.

use std::borrow::Cow;
use std::collections::HashMap;

/// One value of the text, by its place in the arena.
enum Node<'t> {
    /// A string, number, `true`, `false` or `null`, exactly as written.
    Scalar(&'t str),
    Array(Vec<usize>),
    /// Members in the order their keys were first written: the key as written, the value.
    Object(Vec<(&'t str, usize)>),
}

/// An array or object whose closing bracket has not been reached yet.
struct Open<'t> {
    node: usize,
    /// For an object: the members' places by decoded key.
    keys: HashMap<Cow<'t, str>, usize>,
    /// For an object: the key whose value comes next.
    key: Option<(&'t str, Cow<'t, str>)>,
}

/// `text` with every repeated key of every object merged as `JSON.parse` merges it, and how
/// many members were dropped; `None` when no object repeats a key or `text` is not one JSON
/// value.
pub fn merged(text: &str) -> Option<(String, usize)> {
    let b = text.as_bytes();
    let mut nodes: Vec<Node<'_>> = Vec::new();
    let mut open: Vec<Open<'_>> = Vec::new();
    let mut root = None;
    let mut dropped = 0;
    let mut i = skip_ws(b, 0);
    while i < b.len() {
        // Where a value completes, it is attached to the innermost open container.
        let value = match b[i] {
            c @ (b'{' | b'[') => {
                let is_object = c == b'{';
                nodes.push(if is_object {
                    Node::Object(Vec::new())
                } else {
                    Node::Array(Vec::new())
                });
                open.push(Open {
                    node: nodes.len() - 1,
                    keys: HashMap::new(),
                    key: None,
                });
                i = skip_ws(b, i + 1);
                // Next: its closing bracket (empty), else a key or a value.
                match b.get(i) {
                    None => return None,
                    Some(b'"' | b'}' | b']') => {}
                    Some(_) if is_object => return None,
                    Some(_) => {}
                }
                continue;
            }
            b'}' | b']' => {
                let top = open.pop()?;
                let is_object = matches!(nodes[top.node], Node::Object(_));
                if is_object != (b[i] == b'}') || top.key.is_some() {
                    return None;
                }
                i += 1;
                top.node
            }
            b'"' if open
                .last()
                .is_some_and(|o| matches!(nodes[o.node], Node::Object(_)) && o.key.is_none()) =>
            {
                // A key, then its colon.
                let end = string_end(b, i)?;
                let raw = &text[i..end];
                let name = decoded(raw)?;
                i = skip_ws(b, end);
                if b.get(i) != Some(&b':') {
                    return None;
                }
                i = skip_ws(b, i + 1);
                open.last_mut()?.key = Some((raw, name));
                continue;
            }
            b'"' => {
                let end = string_end(b, i)?;
                nodes.push(Node::Scalar(&text[i..end]));
                i = end;
                nodes.len() - 1
            }
            _ => {
                let end = b[i..]
                    .iter()
                    .position(|c| matches!(c, b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r'))
                    .map_or(b.len(), |n| i + n);
                if end == i {
                    return None;
                }
                nodes.push(Node::Scalar(&text[i..end]));
                i = end;
                nodes.len() - 1
            }
        };
        match open.last_mut() {
            None => {
                if root.replace(value).is_some() {
                    return None;
                }
            }
            Some(o) => match &mut nodes[o.node] {
                Node::Array(items) => items.push(value),
                Node::Object(members) => {
                    let (raw, name) = o.key.take()?;
                    match o.keys.get(&name) {
                        Some(&at) => {
                            members[at].1 = value;
                            dropped += 1;
                        }
                        None => {
                            o.keys.insert(name, members.len());
                            members.push((raw, value));
                        }
                    }
                }
                Node::Scalar(_) => return None,
            },
        }
        // After a value: a comma and the next one, or the end of its container.
        i = skip_ws(b, i);
        match (b.get(i), open.last()) {
            (Some(b','), Some(o)) => {
                i = skip_ws(b, i + 1);
                let in_object = matches!(nodes[o.node], Node::Object(_));
                if in_object && b.get(i) != Some(&b'"') {
                    return None;
                }
                if matches!(b.get(i), None | Some(b']' | b'}')) {
                    return None; // a trailing comma
                }
            }
            (Some(b']' | b'}'), Some(_)) | (None, None) => {}
            _ => return None,
        }
    }
    if !open.is_empty() || dropped == 0 {
        return None;
    }
    Some((write(&nodes, root?, text.len()), dropped))
}

/// Whether serde refused a text because an object in it holds a key twice (the error of
/// `#[derive(Deserialize)]` structs: "duplicate field `id`"). Callers ask this before
/// [`merged`], whose outline of the text costs memory in proportion to its values.
pub fn is_repeated_key(e: &serde_json::Error) -> bool {
    e.is_data() && e.to_string().starts_with("duplicate field `")
}

/// The index just past the white space at `i`.
fn skip_ws(b: &[u8], i: usize) -> usize {
    i + b.get(i..).map_or(0, crate::line::count_leading_ws)
}

/// The index just past the string that starts at `i` (its opening quote), when it is one.
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    crate::line::scan_string(b, i).ok()
}

/// A key's decoded text (borrowed when it has no escapes).
fn decoded(raw: &str) -> Option<Cow<'_, str>> {
    let inner = &raw[1..raw.len() - 1];
    if !inner.contains('\\') {
        return Some(Cow::Borrowed(inner));
    }
    match serde_json::from_str::<String>(raw) {
        Ok(s) => Some(Cow::Owned(s)),
        // A lone surrogate escape: compare such keys as written.
        Err(_) => Some(Cow::Borrowed(inner)),
    }
}

/// The nodes from `root` as compact JSON text.
fn write(nodes: &[Node<'_>], root: usize, capacity: usize) -> String {
    enum Step<'t> {
        Node(usize),
        Text(&'t str),
    }
    let mut out = String::with_capacity(capacity);
    let mut todo = vec![Step::Node(root)];
    while let Some(step) = todo.pop() {
        match step {
            Step::Text(t) => out.push_str(t),
            Step::Node(n) => match &nodes[n] {
                Node::Scalar(s) => out.push_str(s),
                Node::Array(items) => {
                    out.push('[');
                    todo.push(Step::Text("]"));
                    for (k, &item) in items.iter().enumerate().rev() {
                        todo.push(Step::Node(item));
                        if k > 0 {
                            todo.push(Step::Text(","));
                        }
                    }
                }
                Node::Object(members) => {
                    out.push('{');
                    todo.push(Step::Text("}"));
                    for (k, &(key, value)) in members.iter().enumerate().rev() {
                        todo.push(Step::Node(value));
                        todo.push(Step::Text(":"));
                        todo.push(Step::Text(key));
                        if k > 0 {
                            todo.push(Step::Text(","));
                        }
                    }
                }
            },
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(text: &str) -> Option<String> {
        merged(text).map(|(s, _)| s)
    }

    #[test]
    fn the_first_place_and_the_last_value_are_kept() {
        assert_eq!(
            merged(r#"{"a":1,"b":2,"a":3}"#),
            Some((r#"{"a":3,"b":2}"#.to_owned(), 1))
        );
        assert_eq!(
            merged(r#"{"a":1,"a":[2],"a":{"x":3}}"#),
            Some((r#"{"a":{"x":3}}"#.to_owned(), 2))
        );
    }

    #[test]
    fn nested_objects_are_merged_and_values_kept_as_written() {
        let text = r#" { "m" : { "c" : "x\"}" , "c" : "\u00e9\ud83d" } , "n" : [ 1.50 , -0 , {"k":true,"k":null} ] } "#;
        assert_eq!(
            m(text).as_deref(),
            Some(r#"{"m":{"c":"\u00e9\ud83d"},"n":[1.50,-0,{"k":null}]}"#)
        );
    }

    #[test]
    fn keys_are_compared_decoded() {
        assert_eq!(
            m(r#"{"id":"x","\u0069d":"a"}"#).as_deref(),
            Some(r#"{"id":"a"}"#)
        );
    }

    #[test]
    fn nothing_to_merge_or_not_one_value_gives_none() {
        for text in [
            r#"{"a":1,"b":{"a":2}}"#,
            r#"[{"a":1},{"a":2}]"#,
            r#"{"a":1,"a":2"#,
            r#"{"a":1,"a":2}}"#,
            r#"{"a":1,"a":2} {"b":1}"#,
            r#"{"a":1,"a":2,}"#,
            r#"{"a" 1,"a":2}"#,
            r#"{"a":1,"a":2]"#,
            r#"{"a":1,2:"a"}"#,
            r#"{"a":"1,"a":2}"#,
            "",
        ] {
            assert_eq!(m(text), None, "{text}");
        }
    }

    #[test]
    fn any_depth_is_merged_without_recursion() {
        let depth = 200_000;
        let text = format!(
            "{}{{\"a\":1,\"a\":2}}{}",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let want = format!("{}{{\"a\":2}}{}", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(m(&text), Some(want));
    }

    #[test]
    fn only_a_repeated_key_is_taken_for_one() {
        use crate::entry::Entry;
        let err = |t: &str| Entry::parse(t).err().unwrap();
        assert!(is_repeated_key(&err(
            r#"{"type":"label","id":"a","id":"b"}"#
        )));
        assert!(is_repeated_key(&err(
            r#"{"type":"message","id":"a","message":{"role":"user","content":"x","content":"y"}}"#
        )));
        for other in [
            r#"{"type":"message","id":7}"#,
            r#"{"type":"label","id":"a""#,
            r#"{"type":"label","id":"a"} x"#,
        ] {
            assert!(!is_repeated_key(&err(other)), "{other}");
        }
    }

    #[test]
    fn what_comes_out_parses_as_javascript_reads_the_input() {
        let out =
            m(r#"{"type":"label","id":"l","label":"one","targetId":"t","label":"two"}"#).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["label"], "two");
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["type", "id", "label", "targetId"]);
    }
}
