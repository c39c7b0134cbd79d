//! Properties of the migration over random legacy and current files (`arb.rs`), plus a live
//! comparison with pi's own migration (ignored by default: it runs the oracle).

use std::collections::HashSet;
use std::path::PathBuf;

use pisess_formats::js;
use pisess_migrate::{NoteKind, Plan, migrate_values, v1_to_v2, v2_to_v3};
use proptest::prelude::*;
use serde_json::Value;

use crate::arb::{self, Session};
use crate::common;

fn serialise(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for v in values {
        js::write_value(&mut out, v);
        out.push(b'\n');
    }
    out
}

fn plan_of(s: &Session) -> Plan {
    Plan::for_header(s.header.as_object().unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The streaming migration of the file equals the in-memory migration of pi's entry list,
    /// which equals the v1 → v2 step followed by the v2 → v3 step (the direct port of pi's
    /// loops); a v3 file comes out byte for byte.
    #[test]
    fn streaming_equals_in_memory_equals_step_by_step(s in arb::session(false)) {
        let src = s.text();
        let (out, outcome) = common::migrate(&src);
        let plan = plan_of(&s);
        if !plan.rewrite {
            prop_assert!(!outcome.migrated);
            prop_assert_eq!(&out, &src);
            return Ok(());
        }
        prop_assert!(outcome.migrated && outcome.exact);

        let mut values = s.values();
        prop_assert!(migrate_values(&mut values));
        prop_assert_eq!(String::from_utf8(out.clone()).unwrap(),
                        String::from_utf8(serialise(&values)).unwrap());

        let mut steps = s.values();
        if plan.v1_to_v2 {
            v1_to_v2::migrate_values(&mut steps);
        }
        if plan.v2_to_v3 {
            v2_to_v3::migrate_values(&mut steps);
        }
        prop_assert_eq!(&steps, &values);
    }

    /// v1 → v3 directly gives the same file as v1 → v2, written out, then v2 → v3.
    #[test]
    fn v1_to_v3_equals_v1_to_v2_then_v2_to_v3(s in arb::session(false)) {
        prop_assume!(plan_of(&s).v1_to_v2);
        let src = s.text();
        let (direct, _) = common::migrate(&src);
        let mut v2 = s.values();
        v1_to_v2::migrate_values(&mut v2);
        prop_assert_eq!(&v2[0]["version"], &Value::from(2));
        let (two_steps, outcome) = common::migrate(&serialise(&v2));
        prop_assert_eq!(outcome.plan.unwrap().v1_to_v2, false);
        prop_assert_eq!(String::from_utf8(direct).unwrap(), String::from_utf8(two_steps).unwrap());
    }

    /// Migrating is idempotent (the output is v3, which is copied through), deterministic, and
    /// the ids it draws are unique and chain the object entries in file order.
    #[test]
    fn idempotent_deterministic_unique_ids(s in arb::session(false)) {
        let src = s.text();
        let (once, outcome) = common::migrate(&src);
        let (again, _) = common::migrate(&src);
        prop_assert_eq!(&once, &again);
        let (twice, outcome2) = common::migrate(&once);
        prop_assert_eq!(&twice, &once);
        // Only a version that is not a number (pi rewrites those every time) migrates again.
        prop_assert!(!outcome2.migrated || outcome2.plan.unwrap().version.is_nan());

        if outcome.migrated && outcome.plan.unwrap().v1_to_v2 {
            let lines = common::parse_lines(&once);
            let mut seen = HashSet::new();
            let mut prev = Value::Null;
            for v in &lines[1..] {
                let Value::Object(obj) = v else { continue };
                if obj.get("type").and_then(Value::as_str) == Some("session") {
                    continue;
                }
                let id = obj["id"].as_str().unwrap().to_owned();
                prop_assert!(id.len() == 8 || id.len() == 36);
                prop_assert!(seen.insert(id.clone()), "duplicate id {}", id);
                prop_assert_eq!(&obj["parentId"], &prev);
                prev = Value::String(id);
            }
        }
    }

    /// A single pass gives the exact result unless it says it could not.
    #[test]
    fn single_pass_is_exact_or_says_so(s in arb::session(false)) {
        let src = s.text();
        let (exact, _) = common::migrate(&src);
        let (once, outcome) = common::migrate_once(&src);
        let inexact = outcome.notes.iter().any(|n| matches!(n.kind, NoteKind::Inexact { .. }));
        prop_assert_eq!(outcome.exact, !inexact);
        if outcome.exact {
            prop_assert_eq!(String::from_utf8(once).unwrap(), String::from_utf8(exact).unwrap());
        } else {
            prop_assert_ne!(once, exact);
        }
    }
}

/// Live comparison with pi's migration on random files it can handle (objects only, no glued
/// or falsy lines). Run with
/// `cargo test -p pisess-migrate --test runner -- --ignored oracle_fuzz` (optionally
/// `PISESS_ORACLE_FUZZ_CASES=N`).
#[test]
#[ignore = "runs the oracle (node) once per case"]
fn oracle_fuzz() {
    let cases: u32 = std::env::var("PISESS_ORACLE_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let oracle = std::env::var_os("PISESS_ORACLE")
        .map(PathBuf::from)
        .unwrap_or_else(|| common::shared().join("oracle/oracle"));
    let dir = std::env::temp_dir().join(format!("pisess-migrate-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let result = runner.run(&arb::session(true), |s| {
        let src = s.text();
        let path = dir.join("case.jsonl");
        std::fs::write(&path, &src).unwrap();
        let out = std::process::Command::new(&oracle)
            .arg("migrate")
            .arg(&path)
            .args(["--seed", "1"])
            .output()
            .unwrap();
        let pi: Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut pi = pi["entries"].as_array().unwrap().clone();
        let (ours, _) = common::migrate(&src);
        if !plan_of(&s).rewrite {
            // pi leaves v3 files alone; pisess copies them through.
            prop_assert_eq!(ours, src);
            return Ok(());
        }
        let mut ours = common::parse_lines(&ours);
        common::normalize(&mut pi);
        common::normalize(&mut ours);
        let pi: Vec<_> = pi.iter().map(js::to_string).collect();
        let ours: Vec<_> = ours.iter().map(js::to_string).collect();
        prop_assert_eq!(ours, pi);
        Ok(())
    });
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = result {
        panic!("{e}");
    }
}
