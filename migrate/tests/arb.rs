//! Random legacy (and current) session files for the property tests.
//!
//! A generated file is a list of [`Line`]s; [`Session::text`] writes it out and
//! [`Session::values`] is pi's entry list for it (every truthy value in order, glued records
//! included, as pisess reads them), so the streaming migration can be checked against the
//! in-memory one.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use pisess_formats::js;

/// One physical line of a generated file.
#[derive(Debug, Clone)]
pub enum Line {
    /// One JSON value.
    Value(Value),
    /// Two objects glued on one line (a lost newline).
    Glued(Value, Value),
    /// A falsy value (dropped by pi and pisess).
    Falsy(&'static str),
    /// Text that holds no complete JSON value.
    Junk(&'static str),
    /// An empty or white-space line.
    Blank(&'static str),
}

/// A generated session file.
#[derive(Debug, Clone)]
pub struct Session {
    /// Junk, falsy and blank lines before the header.
    pub before: Vec<Line>,
    /// The header.
    pub header: Value,
    /// The lines after the header.
    pub lines: Vec<Line>,
    /// Lines end in `\r\n`.
    pub crlf: bool,
    /// The last line has no newline.
    pub no_final_newline: bool,
}

impl Session {
    /// The file's bytes.
    pub fn text(&self) -> Vec<u8> {
        let eol = if self.crlf { "\r\n" } else { "\n" };
        let mut parts: Vec<String> = Vec::new();
        let mut push = |l: &Line| match l {
            Line::Value(v) => parts.push(js::to_string(v)),
            Line::Glued(a, b) => parts.push(js::to_string(a) + &js::to_string(b)),
            Line::Falsy(s) | Line::Junk(s) | Line::Blank(s) => parts.push((*s).to_owned()),
        };
        self.before.iter().for_each(&mut push);
        push(&Line::Value(self.header.clone()));
        self.lines.iter().for_each(&mut push);
        let mut text = parts.join(eol);
        if !self.no_final_newline {
            text.push_str(eol);
        }
        text.into_bytes()
    }

    /// pi's entry list (header first), glued records split.
    pub fn values(&self) -> Vec<Value> {
        let mut v = vec![self.header.clone()];
        for l in &self.lines {
            match l {
                Line::Value(x) => v.push(x.clone()),
                Line::Glued(a, b) => {
                    v.push(a.clone());
                    v.push(b.clone());
                }
                _ => {}
            }
        }
        v
    }
}

fn version() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        6 => Just(None),
        2 => Just(Some(json!(1))),
        2 => Just(Some(json!(2))),
        2 => Just(Some(json!(3))),
        1 => Just(Some(json!("1"))),
        1 => Just(Some(json!("2"))),
        1 => Just(Some(json!(99))),
        1 => Just(Some(Value::Null)),
        1 => Just(Some(json!("abc"))),
        1 => Just(Some(json!(true))),
        1 => Just(Some(json!([2]))),
        1 => Just(Some(json!(1.5))),
    ]
}

fn header() -> impl Strategy<Value = Value> {
    (version(), any::<bool>(), 0u32..1000).prop_map(|(version, early, n)| {
        let mut m = Map::new();
        m.insert("type".into(), json!("session"));
        if early && let Some(v) = &version {
            m.insert("version".into(), v.clone());
        }
        m.insert("id".into(), json!(format!("session-{n}")));
        m.insert("timestamp".into(), json!("2025-06-01T10:00:00.000Z"));
        m.insert("cwd".into(), json!("/p"));
        if !early && let Some(v) = version {
            m.insert("version".into(), v);
        }
        Value::Object(m)
    })
}

fn own_id() -> impl Strategy<Value = Option<(bool, Value)>> {
    prop_oneof![
        8 => Just(None),
        1 => (any::<bool>(), "[0-9a-f]{8}").prop_map(|(f, s)| Some((f, json!(s)))),
        1 => (any::<bool>(), prop_oneof![Just(json!("x")), Just(Value::Null), Just(json!(7))])
            .prop_map(|(f, v)| Some((f, v))),
    ]
}

fn first_kept_index() -> impl Strategy<Value = Value> {
    prop_oneof![
        8 => (0u64..48).prop_map(|n| json!(n)),
        1 => Just(json!(1.5)),
        1 => Just(json!(-1)),
        1 => Just(json!("3")),
        1 => Just(Value::Null),
        1 => Just(json!(1e300)),
    ]
}

fn object() -> impl Strategy<Value = Value> {
    let kind = prop_oneof![
        6 => Just("message"),
        3 => Just("compaction"),
        1 => Just("thinking_level_change"),
        1 => Just("model_change"),
        1 => Just("session"),
        1 => Just("custom"),
    ];
    let role = prop_oneof![Just("user"), Just("assistant"), Just("hookMessage")];
    (
        kind,
        role,
        own_id(),
        first_kept_index(),
        prop::option::weighted(0.2, "[a-z0-9]{1,8}"),
        0u32..1000,
    )
        .prop_map(|(kind, role, id, fki, fkid, n)| {
            let mut m = Map::new();
            if let Some((true, v)) = &id {
                m.insert("id".into(), v.clone());
            }
            m.insert("type".into(), json!(kind));
            m.insert("timestamp".into(), json!("2025-06-01T10:00:01.000Z"));
            match kind {
                "message" => {
                    m.insert(
                        "message".into(),
                        json!({"role": role, "content": format!("text {n}"), "timestamp": n}),
                    );
                }
                "compaction" => {
                    m.insert("summary".into(), json!("S"));
                    if let Some(s) = fkid {
                        m.insert("firstKeptEntryId".into(), json!(s));
                    }
                    m.insert("firstKeptEntryIndex".into(), fki);
                    m.insert("tokensBefore".into(), json!(n));
                }
                "session" => {
                    m.insert("version".into(), json!(1));
                    m.insert("id".into(), json!(format!("inner-{n}")));
                }
                _ => {
                    m.insert("thinkingLevel".into(), json!("high"));
                }
            }
            if let Some((false, v)) = id {
                m.insert("id".into(), v);
            }
            Value::Object(m)
        })
}

fn non_object() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!([1, 2, 3])),
        Just(json!([])),
        Just(json!(42)),
        Just(json!("a string")),
        Just(json!(true)),
    ]
}

fn line(pi_only: bool) -> BoxedStrategy<Line> {
    if pi_only {
        prop_oneof![
            20 => object().prop_map(Line::Value),
            1 => prop_oneof![Just("{not json"), Just("garbage"), Just("[1,2")].prop_map(Line::Junk),
            1 => prop_oneof![Just(""), Just("   ")].prop_map(Line::Blank),
        ]
        .boxed()
    } else {
        prop_oneof![
            20 => object().prop_map(Line::Value),
            2 => non_object().prop_map(Line::Value),
            1 => (object(), object()).prop_map(|(a, b)| Line::Glued(a, b)),
            1 => prop_oneof![Just("null"), Just("0"), Just("false"), Just("\"\"")].prop_map(Line::Falsy),
            1 => prop_oneof![Just("{not json"), Just("garbage"), Just("[1,2")].prop_map(Line::Junk),
            1 => prop_oneof![Just(""), Just("   ")].prop_map(Line::Blank),
        ]
        .boxed()
    }
}

/// Random session files; `pi_only` keeps to what pi's own migration handles.
pub fn session(pi_only: bool) -> impl Strategy<Value = Session> {
    let before = prop_oneof![
        4 => Just(Vec::new()),
        1 => prop::collection::vec(
            prop_oneof![
                Just(Line::Junk("{oops")),
                Just(Line::Blank("")),
                Just(Line::Falsy("null")),
            ],
            1..3
        ),
    ];
    (
        before,
        header(),
        prop::collection::vec(line(pi_only), 0..40),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            move |(before, header, lines, crlf, no_final_newline)| Session {
                before: if pi_only {
                    before
                        .into_iter()
                        .filter(|l| !matches!(l, Line::Falsy(_)))
                        .collect()
                } else {
                    before
                },
                header,
                lines,
                crlf,
                no_final_newline,
            },
        )
}
