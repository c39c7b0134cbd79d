//! Where pi keeps session files (spec §1.2, §1.3).
//!
//! Invariants: these functions only compute paths; they never touch the file system except to
//! read environment variables and the home directory. Which folder pi uses on this machine
//! (variables, settings files) is [`crate::session_folder`]'s.

use std::path::{Path, PathBuf};

/// pi's agent directory: `$PI_CODING_AGENT_DIR` (as pi's `normalizePath` reads it: `~`
/// expanded, a `file://` URL as its path), else `~/.pi/agent`.
pub fn agent_dir() -> Option<PathBuf> {
    match std::env::var_os("PI_CODING_AGENT_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => Some(normalize_os(&dir)),
        None => home().map(|h| h.join(".pi").join("agent")),
    }
}

/// The per-project folder name for a working directory: `--` + the path without its leading
/// separator, with `/`, `\` and `:` replaced by `-`, + `--`.
pub fn project_dir_name(cwd: &str) -> String {
    let trimmed = cwd.strip_prefix(['/', '\\']).unwrap_or(cwd);
    let body: String = trimmed
        .chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | ':') {
                '-'
            } else {
                c
            }
        })
        .collect();
    format!("--{body}--")
}

/// The file name pi gives a session: the header timestamp with `:` and `.` replaced by `-`,
/// `_`, the session id, `.jsonl`.
pub fn session_file_name(timestamp: &str, session_id: &str) -> String {
    let ts: String = timestamp
        .chars()
        .map(|c| if matches!(c, ':' | '.') { '-' } else { c })
        .collect();
    format!("{ts}_{session_id}.jsonl")
}

/// pi's `normalizePath` of a configured folder (a variable, a setting): `~` and `~/…` expanded with the home folder, a
/// `file://` URL turned into its path; anything else as it is.
pub fn normalize(s: &str) -> PathBuf {
    if let Some(p) = s.strip_prefix("file://").and_then(file_url_path) {
        return p;
    }
    expand_tilde(Path::new(s))
}

/// The path of a `file://` URL (what follows the scheme): an empty or `localhost` host, the
/// path percent-decoded, query and fragment dropped. `None` for what Node's `fileURLToPath`
/// refuses (another host, an encoded `/`); [`file_url_refusal`] says why.
pub fn file_url_path(rest: &str) -> Option<PathBuf> {
    parse_file_url(rest).ok()
}

/// Why Node's `fileURLToPath` refuses `url`, a `file://` URL, in Node's words; `None` when it
/// reads it, and for text that is no `file://` URL. pi reads a session's `cwd` that way when it
/// opens the session, so a session whose `cwd` it refuses is one pi cannot open. (A path that
/// decodes to bytes that are not UTF-8 is refused here, as Node's `decodeURIComponent` refuses
/// it, though [`file_url_path`] gives those bytes.)
pub fn file_url_refusal(url: &str) -> Option<&'static str> {
    match parse_file_url(url.strip_prefix("file://")?) {
        Err(why) => Some(why),
        Ok(p) if p.to_str().is_none() => Some("URI malformed"),
        Ok(_) => None,
    }
}

fn parse_file_url(rest: &str) -> Result<PathBuf, &'static str> {
    // The URL parser drops ASCII tabs and line breaks wherever they are.
    let rest: String = rest
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    // The URL parser reads `\` as `/` in a file URL, and folds `.` and `..` segments (also
    // written `%2e`) before the path is decoded.
    let rest = rest.replace('\\', "/");
    // A URL of a host alone (`file://`, `file://localhost`) names the root.
    let (host, path) = match rest.find('/') {
        Some(slash) => rest.split_at(slash),
        None => (rest.as_str(), "/"),
    };
    if !(host.is_empty() || host.eq_ignore_ascii_case("localhost")) {
        return Err("File URL host must be \"localhost\" or empty");
    }
    let mut segments: Vec<&str> = Vec::new();
    for seg in path.split('/').skip(1) {
        match seg.to_ascii_lowercase().as_str() {
            "." | "%2e" => {}
            ".." | ".%2e" | "%2e." | "%2e%2e" => {
                segments.pop();
            }
            _ => segments.push(seg),
        }
    }
    let path = format!("/{}", segments.join("/"));
    let mut out = Vec::with_capacity(path.len());
    let b = path.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                let byte = (h * 16 + l) as u8;
                if byte == b'/' {
                    return Err("File URL path must not include encoded / characters");
                }
                out.push(byte);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        Ok(PathBuf::from(std::ffi::OsString::from_vec(out)))
    }
    #[cfg(not(unix))]
    {
        String::from_utf8(out)
            .map(PathBuf::from)
            .map_err(|_| "URI malformed")
    }
}

/// [`normalize`] of a variable's value; one that is not UTF-8 only has `~` expanded.
pub fn normalize_os(s: &std::ffi::OsStr) -> PathBuf {
    match s.to_str() {
        Some(s) => normalize(s),
        None => expand_tilde(Path::new(s)),
    }
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// `~` or a leading `~/` replaced by `$HOME` (pi's `normalizePath`); anything else as it is.
pub(crate) fn expand_tilde(p: &Path) -> PathBuf {
    match p.strip_prefix("~") {
        Ok(rest) => home().map_or_else(|| p.to_path_buf(), |h| h.join(rest)),
        Err(_) => p.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_urls_decode_as_node_does() {
        assert_eq!(
            file_url_path("/home/me/pi%20sessions"),
            Some(PathBuf::from("/home/me/pi sessions"))
        );
        assert_eq!(
            file_url_path("localhost/srv/s?x=1#y"),
            Some(PathBuf::from("/srv/s"))
        );
        assert_eq!(file_url_path("example.com/srv"), None);
        assert_eq!(
            file_url_path("/h/nonexist/../sd%20x/./%2E%2e/y\\z"),
            Some(PathBuf::from("/h/y/z"))
        );
        assert_eq!(file_url_path("/a%2Fb"), None);
        // As Node's `fileURLToPath` gives them: a host alone is the root, tabs and line
        // breaks are dropped.
        assert_eq!(file_url_path(""), Some(PathBuf::from("/")));
        assert_eq!(file_url_path("localhost"), Some(PathBuf::from("/")));
        assert_eq!(file_url_path("localhost?x"), Some(PathBuf::from("/")));
        assert_eq!(file_url_path("/a\tb"), Some(PathBuf::from("/ab")));
        assert_eq!(file_url_path("/a\nb/c"), Some(PathBuf::from("/ab/c")));
        assert_eq!(file_url_path("LOCALHOST/z"), Some(PathBuf::from("/z")));
        assert_eq!(normalize("relative/dir"), PathBuf::from("relative/dir"));
    }

    #[test]
    fn refused_file_urls_are_named_with_node_s_reason() {
        // What `node -e 'url.fileURLToPath(u)'` says of each.
        assert_eq!(
            file_url_refusal("file://host/x"),
            Some("File URL host must be \"localhost\" or empty")
        );
        for u in ["file:///a%2Fb", "file:///a%2fb"] {
            assert_eq!(
                file_url_refusal(u),
                Some("File URL path must not include encoded / characters")
            );
        }
        for u in ["file:///tmp/%ff", "file:///tmp/%e2%82"] {
            assert_eq!(file_url_refusal(u), Some("URI malformed"));
        }
        for u in [
            "file:///srv/p%20q",
            "file://localhost/x",
            "file://LOCALHOST/y",
            "file:///a%5Cb",
            "/plain/path",
            "relative",
            "",
        ] {
            assert_eq!(file_url_refusal(u), None, "{u}");
        }
    }

    #[test]
    fn names_follow_pi() {
        assert_eq!(
            project_dir_name("/home/dev/projects/acme-api"),
            "--home-dev-projects-acme-api--"
        );
        assert_eq!(project_dir_name("C:\\Users\\me\\p"), "--C--Users-me-p--");
        assert_eq!(
            session_file_name(
                "2026-01-06T09:00:00.000Z",
                "019b9288-d680-708f-949b-6f772632716c"
            ),
            "2026-01-06T09-00-00-000Z_019b9288-d680-708f-949b-6f772632716c.jsonl"
        );
    }
}
