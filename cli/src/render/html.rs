//! The HTML export: one self-contained page (inline CSS and JS, nothing fetched) with the
//! session tree and the transcript of one branch.
//!
//! Invariants:
//! - every text from the session (ids, labels, names, message text, tool arguments and
//!   output) goes through [`esc`], in text and in attribute values alike, so a session can
//!   never add markup or script to the page;
//! - as a second line of defence the page carries a Content-Security-Policy that allows only
//!   its own script (by a per-export random nonce), inline styles, and nothing from the
//!   network;
//! - the tree is written with an explicit stack (no recursion): linear runs stay in one list,
//!   only an entry with several children opens nested, collapsible `<details>` blocks (open
//!   on the exported branch), so the nesting depth is the number of branch points on a path,
//!   up to [`MAX_NESTED`] (deeper branches are written in place, under a heading line);
//! - every tree node is an `<li data-id=… data-parent=…>` in the order of pi's own HTML export
//!   (its `flattenTree`): the sibling on the exported branch first, the others as `getTree`
//!   orders them (by timestamp, then file order); roots likewise, the others in file order.

use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};

use pisess_engine::EntryKey;

use super::{Part, Rendered, Title};
use crate::command_error::CommandError;
use crate::commands::tree::{node, on_path_first, sorted_children};
use crate::session_arg::{self as sa, Session};

/// HTML-escapes text for element content and for quoted attribute values.
pub fn esc(t: &str) -> String {
    let mut out = String::with_capacity(t.len() + 16);
    for c in t.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\0' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// A random nonce for the page's own script.
pub fn nonce() -> String {
    let a = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(a);
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("{a:016x}{:016x}", h.finish())
}

const STYLE: &str = r"
body{font:14px/1.45 system-ui,sans-serif;margin:0;display:flex;color:#1d1d1f;background:#fafafa}
nav{width:38%;min-width:280px;max-height:100vh;overflow:auto;position:sticky;top:0;
  border-right:1px solid #ddd;padding:8px 12px;box-sizing:border-box;background:#fff}
main{flex:1;padding:8px 24px;max-width:60em}
header dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0 0 12px}
header dt{color:#666}
ul.tree{list-style:none;margin:0;padding:0 0 0 14px}
nav>ul.tree{padding-left:0}
ul.tree li{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
ul.tree li.branch{white-space:normal}
ul.tree li.on>a,ul.tree li.on>span{color:#0a6b1f}
ul.tree li.target>a{font-weight:bold}
ul.tree code{color:#8a6d00}
summary{cursor:pointer;color:#555}
mark{background:#f3e1ff;border-radius:3px;padding:0 3px}
section.entry{border-left:3px solid #ccc;padding:2px 12px;margin:12px 0;background:#fff}
section.user{border-color:#3a7bd5}section.assistant{border-color:#0a6b1f}
section.toolResult{border-color:#999}section.compaction,section.branch_summary{border-color:#c77c00}
section h3{font-size:13px;margin:6px 0;color:#444}
section h3 code{color:#8a6d00;font-weight:normal}
.text{white-space:pre-wrap;word-wrap:break-word}
pre{white-space:pre-wrap;word-wrap:break-word;background:#f4f4f4;padding:6px;margin:4px 0;
  max-height:30em;overflow:auto}
.thinking{color:#666;font-style:italic}
.note{color:#666}
button{font-size:12px;margin:0 4px 8px 0}
";

const SCRIPT: &str = r"
(function () {
  var d = document;
  var all = d.querySelectorAll('#tree details');
  d.getElementById('expand').addEventListener('click', function () {
    all.forEach(function (x) { x.open = true; });
  });
  d.getElementById('collapse').addEventListener('click', function () {
    all.forEach(function (x) { x.open = false; });
  });
  d.querySelectorAll('#tree a').forEach(function (a) {
    a.addEventListener('click', function () {
      var s = d.getElementById(a.getAttribute('href').slice(1));
      if (s) { s.scrollIntoView(); }
    });
  });
  d.documentElement.setAttribute('data-ready',
    String(d.querySelectorAll('#tree li[data-id]').length));
})();
";

/// Writes the page head and the session facts.
pub fn begin(out: &mut dyn Write, t: &Title, nonce: &str) -> io::Result<()> {
    let name = t.name.as_deref().unwrap_or(&t.session_id);
    write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; script-src 'nonce-{nonce}'; img-src data:\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>pisess: {}</title>\n<style>{STYLE}</style></head>\n<body>\n",
        esc(name)
    )?;
    Ok(())
}

/// Writes the tree: every entry of the session, the exported branch open and marked.
pub fn tree(
    out: &mut dyn Write,
    session: &Session,
    on_path: &HashSet<EntryKey>,
    target: Option<EntryKey>,
    labels: &sa::LabelMap,
) -> Result<(), CommandError> {
    enum Step {
        Node(super::super::commands::tree::Node),
        /// Opens a nested, collapsible branch.
        Open(String),
        /// Closes the innermost one.
        Close,
        /// A branch's heading written in place, past [`MAX_NESTED`].
        Flat(String),
    }
    writeln!(
        out,
        "<nav id=\"tree\"><button id=\"expand\" type=\"button\">expand all</button>\
         <button id=\"collapse\" type=\"button\">collapse all</button>"
    )?;
    writeln!(out, "<ul class=\"tree\">")?;
    let mut roots = session.snap.roots(session.key)?;
    on_path_first(&mut roots, |r| on_path.contains(r));
    let many = roots.len() > 1;
    let mut stack: Vec<Step> = Vec::new();
    for r in roots.into_iter().rev() {
        let nd = node(session, r)?;
        if many {
            stack.push(Step::Close);
            let open = if on_path.contains(&r) { " open" } else { "" };
            stack.push(Step::Node(nd));
            stack.push(Step::Open(format!(
                "<li class=\"branch\"><details{open}><summary>root</summary><ul class=\"tree\">\n"
            )));
        } else {
            stack.push(Step::Node(nd));
        }
    }
    let width = 120;
    // Branches open now.
    let mut nested = 0usize;
    while let Some(step) = stack.pop() {
        let nd = match step {
            Step::Open(s) => {
                nested += 1;
                out.write_all(s.as_bytes())?;
                continue;
            }
            Step::Close => {
                nested = nested.saturating_sub(1);
                out.write_all(b"</ul></details></li>\n")?;
                continue;
            }
            Step::Flat(s) => {
                out.write_all(s.as_bytes())?;
                continue;
            }
            Step::Node(nd) => nd,
        };
        let v = session.value(nd.key)?;
        let parent = v.get("parentId").and_then(|p| p.as_str()).unwrap_or("");
        let on = on_path.contains(&nd.key);
        let mut class = String::from("n");
        if on {
            class.push_str(" on");
        }
        if Some(nd.key) == target {
            class.push_str(" target");
        }
        let text = sa::clip(&sa::summary(&v), width);
        let body = format!(
            "<code>{}</code> <b>{}</b> {}",
            esc(sa::short_id(&nd.id)),
            esc(sa::kind(&v)),
            esc(&text)
        );
        let label = labels
            .get(&nd.id)
            .map(|l| format!(" <mark>{}</mark>", esc(l)))
            .unwrap_or_default();
        let line = if on {
            format!("<a href=\"#e-{}\">{body}</a>", esc(&nd.id))
        } else {
            format!("<span>{body}</span>")
        };
        writeln!(
            out,
            "<li class=\"{class}\" data-id=\"{}\" data-parent=\"{}\">{line}{label}</li>",
            esc(&nd.id),
            esc(parent)
        )?;
        let mut children = sorted_children(session, nd.key)?;
        on_path_first(&mut children, |c| on_path.contains(&c.key));
        let n = children.len();
        if n == 1 {
            stack.extend(children.into_iter().map(Step::Node));
            continue;
        }
        for (i, c) in children.into_iter().enumerate().rev() {
            let open = if on_path.contains(&c.key) {
                " open"
            } else {
                ""
            };
            let first = session.value(c.key)?;
            let summary = format!(
                "branch {} of {n}: {} {}",
                i + 1,
                sa::kind(&first),
                sa::clip(&sa::summary(&first), 60)
            );
            if nested >= MAX_NESTED {
                stack.push(Step::Node(c));
                stack.push(Step::Flat(format!(
                    "<li class=\"branch flat\">{}</li>\n",
                    esc(&summary)
                )));
                continue;
            }
            stack.push(Step::Close);
            stack.push(Step::Node(c));
            stack.push(Step::Open(format!(
                "<li class=\"branch\"><details{open}><summary>{}</summary><ul class=\"tree\">\n",
                esc(&summary)
            )));
        }
    }
    writeln!(out, "</ul></nav>")?;
    Ok(())
}

/// How many branches the tree nests at most; deeper ones are written in place, each headed by
/// its "branch i of n" line (`data-parent` still says where each entry hangs). A branch nests
/// three elements (`li`, `details`, `ul`), and browsers stop nesting at 512 (the HTML
/// standard's parser: deeper elements become siblings), which drew the tree of a session with
/// ~170 branch points on one path under the wrong parents.
const MAX_NESTED: usize = 150;

/// Writes the session facts at the top of the transcript.
pub fn facts(out: &mut dyn Write, t: &Title) -> io::Result<()> {
    let name = t.name.as_deref().unwrap_or(&t.session_id);
    writeln!(
        out,
        "<main id=\"transcript\"><header><h1>{}</h1><dl>",
        esc(name)
    )?;
    for (k, v) in [
        ("session", t.session_id.as_str()),
        ("folder", t.cwd.as_str()),
        ("file", t.file.as_str()),
        ("created", t.created.as_str()),
        (
            "branch",
            &if t.entries == 0 {
                "(no entries)".to_owned()
            } else {
                format!("root → {} ({} entries)", t.branch_id, t.entries)
            },
        ),
    ] {
        writeln!(out, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(v))?;
    }
    writeln!(out, "</dl></header>")
}

/// Writes one transcript entry.
pub fn entry(out: &mut dyn Write, r: &Rendered, label: Option<&str>) -> io::Result<()> {
    let label = label
        .map(|l| format!(" <mark>{}</mark>", esc(l)))
        .unwrap_or_default();
    writeln!(
        out,
        "<section class=\"entry {}\" id=\"e-{}\"><h3>{}{label} <code>{}</code> {}</h3>",
        esc(&r.kind),
        esc(&r.id),
        esc(&r.kind),
        esc(&r.id),
        esc(&r.meta)
    )?;
    for p in &r.parts {
        match p {
            Part::Text(t) => writeln!(out, "<div class=\"text\">{}</div>", esc(t.trim_end()))?,
            Part::Thinking(t) => writeln!(
                out,
                "<details class=\"thinking\"><summary>thinking</summary>\
                 <div class=\"text\">{}</div></details>",
                esc(t.trim_end())
            )?,
            Part::ToolCall { name, args } => writeln!(
                out,
                "<div class=\"call\">tool call <b>{}</b><pre>{}</pre></div>",
                esc(name),
                esc(args)
            )?,
            Part::Code { caption, text } => writeln!(
                out,
                "<div class=\"code\"><span class=\"note\">{}</span><pre>{}</pre></div>",
                esc(caption),
                esc(text)
            )?,
            Part::Image(m) => writeln!(
                out,
                "<p class=\"note\">[{} image, not included]</p>",
                esc(m)
            )?,
            Part::Note(n) => writeln!(out, "<p class=\"note\">{}</p>", esc(n))?,
        }
    }
    writeln!(out, "</section>")
}

/// Closes the page.
pub fn end(out: &mut dyn Write, nonce: &str) -> io::Result<()> {
    writeln!(
        out,
        "</main>\n<script nonce=\"{nonce}\">{SCRIPT}</script>\n</body></html>"
    )
}

#[cfg(test)]
mod tests {
    use super::esc;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            esc("<script>alert(1)</script>"),
            "&lt;script&gt;alert(1)&lt;/script&gt;"
        );
        assert_eq!(
            esc("\"><img src=x onerror='a'>&"),
            "&quot;&gt;&lt;img src=x onerror=&#39;a&#39;&gt;&amp;"
        );
    }
}
