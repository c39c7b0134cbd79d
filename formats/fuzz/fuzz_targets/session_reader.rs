//! The line reader and session reader on arbitrary bytes: every event is produced without a
//! panic, whatever the chunk size (the first byte picks one, so records cross chunk
//! boundaries), and every typed entry writes back as JSON that parses again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pisess_formats::{Event, SessionReader};

fuzz_target!(|data: &[u8]| {
    let Some((&first, body)) = data.split_first() else {
        return;
    };
    let chunk = 1 + usize::from(first) * 7;
    let _ = SessionReader::with_chunk_size(body, chunk).read(|ev| {
        if let Event::Record(r, _) = ev {
            if let Ok(e) = &r.entry {
                let _ = e.entry_type();
                let text = e.to_json();
                assert!(
                    serde_json::from_str::<serde_json::Value>(&text).is_ok(),
                    "typed entry wrote invalid JSON: {text}"
                );
            }
        }
        Ok::<(), std::convert::Infallible>(())
    });
});
