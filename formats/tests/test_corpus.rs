//! The typed view against every generated corpus file: pi's own writer produced these lines,
//! so writing the typed view back must give the same bytes (proof that no field is missed).

use std::fs::File;

use pisess_formats::{Event, SessionReader, Severity};

use crate::common;

#[test]
fn typed_view_reserialises_pi_written_lines_byte_for_byte() {
    let mut checked = 0u64;
    for path in common::jsonl_files(&common::corpus()) {
        let mut version = 0.0;
        let mut mismatches = Vec::new();
        let summary = SessionReader::new(File::open(&path).expect("open corpus file"))
            .read(|ev| {
                match ev {
                    Event::Header(h) => version = h.version(),
                    Event::Record(r, _) if version >= 3.0 => {
                        let entry = r.entry.as_ref().expect("corpus entries fit the typed view");
                        let out = entry.to_json();
                        if out != r.json && mismatches.len() < 3 {
                            mismatches.push(format!(
                                "line {}:\n  file: {}\n  ours: {}",
                                r.line, r.json, out
                            ));
                        }
                        checked += 1;
                    }
                    Event::Problem(p) => {
                        assert!(p.severity() < Severity::Warning, "{}: {p}", path.display());
                    }
                    _ => {}
                }
                Ok::<(), ()>(())
            })
            .expect("read corpus file");
        assert!(summary.header.is_some());
        assert!(
            mismatches.is_empty(),
            "{}:\n{}",
            path.display(),
            mismatches.join("\n")
        );
    }
    assert!(checked > 90_000, "only {checked} entries checked");
}
