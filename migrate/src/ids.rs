//! Deterministic entry ids for the v1 → v2 step.
//!
//! pi draws each new id from `crypto.randomUUID().slice(0, 8)` (spec §1.4): 8 lowercase hex
//! digits, re-drawn up to 100 times on a collision, then a whole 36-character UUID. pisess keeps
//! that shape but derives every candidate from a hash, so migrating the same file twice gives the
//! same bytes:
//!
//! ```text
//! candidate(attempt) = blake3("pisess-migrate v1 id\0" ‖ session id ‖ "\0"
//!                             ‖ index as u64 LE ‖ attempt as u32 LE)
//! attempt < 100:  the first 4 bytes as 8 lowercase hex digits
//! attempt ≥ 100:  the first 16 bytes as a version-4-shaped UUID (8-4-4-4-12 lowercase hex)
//! ```
//!
//! `index` is the entry's position in pi's entry list (header = 0). Invariants:
//! - a drawn id never equals an id drawn before by the same [`IdDrawer`], nor one reserved with
//!   [`IdDrawer::reserve`] (ids already present in the file): candidates that collide are skipped;
//! - the result depends only on the session id, the index and the set of ids that collided, so
//!   it is reproducible from the file alone.

use std::collections::HashSet;
use std::fmt;

/// Attempts with the short (8 hex digit) form before falling back to the UUID form, as in pi.
pub const SHORT_ATTEMPTS: u32 = 100;

const DOMAIN: &[u8] = b"pisess-migrate v1 id\0";

/// An id drawn for an entry: the usual 8 hex digits, or the rare UUID-shaped fallback.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DrawnId {
    /// 8 lowercase hex digits: the big-endian hex of this number.
    Short(u32),
    /// The 36-character fallback.
    Long(Box<str>),
}

impl fmt::Display for DrawnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Short(n) => write!(f, "{n:08x}"),
            Self::Long(s) => f.write_str(s),
        }
    }
}

impl DrawnId {
    /// The id as a `String`.
    pub fn to_id_string(&self) -> String {
        self.to_string()
    }
}

/// The hash behind candidate `attempt` for entry `index` of session `session_id`.
pub fn candidate_hash(session_id: &str, index: u64, attempt: u32) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(DOMAIN);
    h.update(session_id.as_bytes());
    h.update(b"\0");
    h.update(&index.to_le_bytes());
    h.update(&attempt.to_le_bytes());
    *h.finalize().as_bytes()
}

/// Candidate number `attempt` for entry `index` (before any collision check).
pub fn candidate(session_id: &str, index: u64, attempt: u32) -> DrawnId {
    let hash = candidate_hash(session_id, index, attempt);
    if attempt < SHORT_ATTEMPTS {
        DrawnId::Short(u32::from_be_bytes([hash[0], hash[1], hash[2], hash[3]]))
    } else {
        DrawnId::Long(uuid_shaped(&hash).into_boxed_str())
    }
}

/// Formats the first 16 bytes of `hash` as a version-4, variant-1 UUID.
fn uuid_shaped(hash: &[u8; 32]) -> String {
    let mut b = [0u8; 16];
    b.copy_from_slice(&hash[..16]);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let mut s = String::with_capacity(36);
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{byte:02x}"));
    }
    s
}

/// Draws unique deterministic ids for the entries of one session.
#[derive(Debug, Clone)]
pub struct IdDrawer {
    session_id: String,
    short: HashSet<u32>,
    long: HashSet<Box<str>>,
}

impl IdDrawer {
    /// A drawer for the session whose header id is `session_id`.
    pub fn new(session_id: &str) -> Self {
        Self {
            session_id: session_id.to_owned(),
            short: HashSet::new(),
            long: HashSet::new(),
        }
    }

    /// Marks `id` as taken (an id already present in the file).
    pub fn reserve(&mut self, id: &str) {
        match parse_short(id) {
            Some(n) => {
                self.short.insert(n);
            }
            None => {
                self.long.insert(id.into());
            }
        }
    }

    /// Whether `id` is taken.
    pub fn is_taken(&self, id: &DrawnId) -> bool {
        match id {
            DrawnId::Short(n) => self.short.contains(n),
            DrawnId::Long(s) => self.long.contains(s),
        }
    }

    /// Draws the id of entry `index`: the first candidate not taken, which is then taken.
    pub fn draw(&mut self, index: u64) -> DrawnId {
        let mut attempt = 0u32;
        loop {
            let id = candidate(&self.session_id, index, attempt);
            if !self.is_taken(&id) {
                match &id {
                    DrawnId::Short(n) => self.short.insert(*n),
                    DrawnId::Long(s) => self.long.insert(s.clone()),
                };
                return id;
            }
            // 2^32 short ids and 2^122 long ones: this ends long before the counter could wrap.
            attempt = attempt.saturating_add(1);
        }
    }
}

/// The number behind an 8-lowercase-hex-digit id, if `id` has that shape.
pub fn parse_short(id: &str) -> Option<u32> {
    if id.len() != 8 || !id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    u32::from_str_radix(id, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_deterministic_and_shaped_like_pis() {
        let a = IdDrawer::new("s").draw(1).to_string();
        let b = IdDrawer::new("s").draw(1).to_string();
        assert_eq!(a, b);
        assert_eq!(a.len(), 8);
        assert!(parse_short(&a).is_some());
        assert_ne!(a, IdDrawer::new("s").draw(2).to_string());
        assert_ne!(a, IdDrawer::new("t").draw(1).to_string());
    }

    #[test]
    fn collisions_draw_the_next_attempt() {
        let first = candidate("s", 5, 0);
        let second = candidate("s", 5, 1);
        let mut d = IdDrawer::new("s");
        d.reserve(&first.to_string());
        assert_eq!(d.draw(5), second);
        // The same index again cannot repeat an id already drawn.
        let third = d.draw(5);
        assert_eq!(third, candidate("s", 5, 2));
    }

    #[test]
    fn after_100_collisions_the_id_is_uuid_shaped() {
        let mut d = IdDrawer::new("s");
        for attempt in 0..SHORT_ATTEMPTS {
            d.reserve(&candidate("s", 9, attempt).to_string());
        }
        let id = d.draw(9).to_string();
        assert_eq!(id.len(), 36);
        let parts: Vec<_> = id.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12]);
        assert_eq!(&id[14..15], "4");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"));
        // A reserved long id is skipped too.
        let mut d2 = d.clone();
        d2.reserve(&candidate("s", 10, 100).to_string());
        for attempt in 0..SHORT_ATTEMPTS {
            d2.reserve(&candidate("s", 10, attempt).to_string());
        }
        assert_eq!(d2.draw(10), candidate("s", 10, 101));
    }

    #[test]
    fn short_parse_accepts_only_lowercase_hex() {
        assert_eq!(parse_short("0000002a"), Some(42));
        assert_eq!(parse_short("0000002A"), None);
        assert_eq!(parse_short("2a"), None);
        assert_eq!(parse_short("+000002a"), None);
    }
}
