//! The migrator on arbitrary bytes: no panic; two runs give the same bytes; the output of a
//! migration is v3, so migrating it again copies it through unchanged; the one-pass reader
//! agrees with the seekable two-pass one whenever it says it was exact.
#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use pisess_migrate::{migrate_reader, migrate_seekable};

fuzz_target!(|data: &[u8]| {
    let mut first = Vec::new();
    let Ok(outcome) = migrate_seekable(Cursor::new(data), &mut first) else {
        return;
    };
    let mut again = Vec::new();
    let _ = migrate_seekable(Cursor::new(data), &mut again);
    assert_eq!(first, again, "two migrations of one input differ");
    if outcome.migrated {
        let mut twice = Vec::new();
        let second = migrate_seekable(Cursor::new(&first[..]), &mut twice);
        assert!(second.is_ok(), "migrated output does not migrate: {second:?}");
        assert_eq!(first, twice, "migrating the output again changed it");
    }
    let mut single = Vec::new();
    if let Ok(o) = migrate_reader(data, &mut single)
        && o.exact
    {
        assert_eq!(first, single, "one-pass and two-pass migrations differ");
    }
});
