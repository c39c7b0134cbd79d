//! Context projection on arbitrary trees: the input's lines become entries (pi's loader rules,
//! no migration), and for the last entry and up to 32 others the path is built (cycles are an
//! error, not a hang) and projected into pi's context, its `convertToLlm` view, the compaction
//! cut report and the file lists. No panic, no unbounded loop.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pisess_engine::agent::path::{EntryIndex, id_of};
use pisess_engine::agent::report::{context_report, cut_report, fileops_report};
use pisess_engine::agent::tokens::CompactionSettings;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (_header, entries) = pisess_engine::agent::parse_session_text(text);
    let index = EntryIndex::new(&entries);
    let step = (entries.len() / 32).max(1);
    let leaves = std::iter::once(None).chain(entries.iter().step_by(step).map(id_of));
    for leaf in leaves {
        let Ok(path) = index.path(leaf) else {
            continue;
        };
        let _ = context_report(leaf, &path, true);
        let _ = cut_report(leaf, &path, CompactionSettings::default(), true, Some(8000.0));
        let _ = fileops_report(leaf, &path);
    }
});
