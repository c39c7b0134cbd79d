//! `pisess export --format md|html`: the Markdown transcript follows the oracle's path, and the
//! HTML page, rendered by headless Chromium, has the oracle's tree (every node, its parent,
//! pi's order) and shows script-injection strings from a session as text without running them.
//!
//! The HTML tests need a headless Chromium (`chromium`, `chromium-browser`, `google-chrome`,
//! `headless_shell`, or `$PISESS_CHROMIUM`): they FAIL when none is found (`apt-get install -y
//! chromium`; `.ci/run` installs it).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::common::{TestEnv, fixture, oracle};

fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("PISESS_CHROMIUM") {
        return PathBuf::from(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
        "headless_shell",
        "chromium-headless-shell",
    ] {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "no headless Chromium found (chromium, chromium-browser, google-chrome, headless_shell): \
         install one (`apt-get install -y chromium`) or set PISESS_CHROMIUM"
    );
}

/// The DOM after the page's scripts ran, as headless Chromium serialises it.
fn dump_dom(page: &Path, scratch: &Path) -> String {
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
        ])
        .arg(format!(
            "--user-data-dir={}",
            scratch.join("profile").display()
        ))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8(out.stdout).unwrap();
    assert!(dom.contains("</html>"), "no DOM from chromium: {dom}");
    dom
}

fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// Text as Chromium serialises a text node.
fn as_text_node(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Every `data-id="…" data-parent="…"` pair of the DOM, in document order.
fn tree_nodes(dom: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = dom;
    while let Some(i) = rest.find(" data-id=\"") {
        rest = &rest[i + 10..];
        let end = rest.find('"').unwrap();
        let id = unescape(&rest[..end]);
        rest = &rest[end..];
        let p = rest.find(" data-parent=\"").unwrap();
        rest = &rest[p + 14..];
        let end = rest.find('"').unwrap();
        let parent = unescape(&rest[..end]);
        out.push((id, parent));
    }
    out
}

/// Every node of `file` as (id, parentId) in the order pi's own HTML export draws its tree:
/// the `flattenTree` order of pi's tree component (the HTML template's is the same code),
/// read from the component by `pi_tree_layout.mjs` on a copy of the file in `dir`.
fn pi_html_order(file: &Path, dir: &Path) -> Vec<(String, String)> {
    let copy = dir.join("pi-copy.jsonl");
    std::fs::copy(file, &copy).unwrap();
    let pi = &crate::test_tree_layout::pi_layouts(&[(copy, "all")])[0];
    pi["flat"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n[0].as_str().unwrap().to_owned(),
                n[1].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// The oracle's tree nodes as (id, parentId) in its depth-first order.
fn oracle_nodes(tree: &Value) -> Vec<(String, String)> {
    tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["id"].as_str().unwrap().to_owned(),
                n["parentId"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

const SCRIPT: &str = "<script>document.title='pwned-script'</script>";
const IMG: &str = "\"><img src=x onerror=\"document.title='pwned-img'\">";
const ALERT: &str = "<script>alert(1)</script>";
const ATTR: &str = "\"><img src=x onerror=alert(1)>";

/// 02-small-branches with hostile entries appended: a user message, an assistant reply with a
/// tool call, a tool result, a second branch, a label and a session name, and an entry whose
/// id itself is hostile.
fn hostile_session(dir: &Path) -> (PathBuf, String) {
    let src = std::fs::read_to_string(fixture("sessions/02-small-branches.jsonl")).unwrap();
    let last: Value = serde_json::from_str(src.lines().last().unwrap()).unwrap();
    let leaf = last["id"].as_str().unwrap().to_owned();
    let t = "2026-07-27T10:00:00.000Z";
    let ms = 1_785_146_400_000_i64;
    let name = format!("name {SCRIPT}");
    let bad_id = format!("bad{ATTR}");
    let lines = [
        json!({"type":"message","id":"h0000001","parentId":leaf,"timestamp":t,
            "message":{"role":"user","content":format!("look {SCRIPT} and {IMG}"),"timestamp":ms}}),
        json!({"type":"message","id":"h0000002","parentId":"h0000001","timestamp":t,
            "message":{"role":"assistant","content":[
                {"type":"text","text":format!("sure {ALERT} {ATTR}")},
                {"type":"toolCall","id":"c1","name":format!("read{SCRIPT}"),
                 "arguments":{"path":format!("</pre>{IMG}")}}],
             "provider":"x","model":format!("m{ATTR}"),"api":"x","stopReason":"toolUse",
             "usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,
               "cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},
             "timestamp":ms}}),
        json!({"type":"message","id":"h0000003","parentId":"h0000002","timestamp":t,
            "message":{"role":"toolResult","toolCallId":"c1","toolName":"read",
              "content":[{"type":"text","text":format!("</pre></section>{SCRIPT}")}],
              "isError":false,"timestamp":ms}}),
        json!({"type":"message","id":"h0000004","parentId":"h0000001","timestamp":t,
            "message":{"role":"user","content":format!("other branch {IMG}"),"timestamp":ms}}),
        json!({"type":"label","id":"h0000005","parentId":"h0000003","timestamp":t,
            "targetId":"h0000001","label":format!("lab{SCRIPT}")}),
        json!({"type":"session_info","id":"h0000006","parentId":"h0000005","timestamp":t,
            "name":name}),
        json!({"type":"message","id":bad_id,"parentId":"h0000006","timestamp":t,
            "message":{"role":"user","content":format!("last {ALERT}"),"timestamp":ms}}),
    ];
    let mut text = src.clone();
    for l in lines {
        text.push_str(&serde_json::to_string(&l).unwrap());
        text.push('\n');
    }
    let path = dir.join("hostile.jsonl");
    std::fs::write(&path, text).unwrap();
    (path, name)
}

#[test]
fn export_html_renders_in_chromium_with_the_tree_and_injections_as_text() {
    let env = TestEnv::new();
    let (file, name) = hostile_session(env.home.path());
    let page = env.home.path().join("page.html");
    let out = env
        .pisess()
        .args(["export", file.to_str().unwrap(), "--format", "html", "-o"])
        .arg(&page)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = dump_dom(&page, env.home.path());
    let tree = oracle(&["tree", file.to_str().unwrap()]);
    let expect = oracle_nodes(&tree);

    // Our own script ran (so the injected ones had every chance to run too) …
    let ready = format!("data-ready=\"{}\"", expect.len());
    assert!(
        dom.contains(&ready),
        "the page script did not run ({ready})"
    );
    // … and no injected one did: the title is the escaped name, no element was injected.
    let title = &dom[dom.find("<title>").unwrap() + 7..dom.find("</title>").unwrap()];
    assert_eq!(unescape(title), format!("pisess: {name}"));
    assert_eq!(
        dom.matches("<script").count(),
        1,
        "an injected <script> element"
    );
    assert_eq!(dom.matches("<img").count(), 0, "an injected <img> element");
    // The injection strings are shown as text.
    for s in [SCRIPT, IMG, ALERT, ATTR] {
        assert!(dom.contains(&as_text_node(s)), "{s:?} is not shown as text");
    }
    // The tree: every node of the oracle's tree with its parent, in the order of pi's own
    // HTML export.
    let mut got = tree_nodes(&dom);
    assert_eq!(got, pi_html_order(&file, env.home.path()));
    let mut expect = expect;
    got.sort();
    expect.sort();
    assert_eq!(got, expect);
}

#[test]
fn export_html_tree_of_a_many_branch_session_equals_the_oracle_tree() {
    let env = TestEnv::new();
    let page = env.home.path().join("page.html");
    let file = fixture("sessions/04-many-branches.jsonl");
    let out = env
        .pisess()
        .args(["export", file.to_str().unwrap(), "--format", "html", "-o"])
        .arg(&page)
        .output()
        .unwrap();
    assert!(out.status.success());
    let dom = dump_dom(&page, env.home.path());
    let golden: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("golden/sessions/04-many-branches/tree.json")).unwrap(),
    )
    .unwrap();
    // Every node with its parent, in the order pi's own HTML export draws them (its
    // flattenTree: the active branch first), which is not getTree's order here.
    let flat = pi_html_order(&file, env.home.path());
    let mut by_tree = oracle_nodes(&golden);
    assert_ne!(flat, by_tree, "the fixture has no branch to order");
    assert_eq!(tree_nodes(&dom), flat);
    // The same nodes and parents as the oracle's tree.
    let mut got = tree_nodes(&dom);
    got.sort();
    by_tree.sort();
    assert_eq!(got, by_tree);
    // Collapsible: the branches off the exported path are closed, those on it open.
    assert!(dom.contains("<details open=\"\">") || dom.contains("<details open>"));
    assert!(dom.contains("<details>"));
}

/// The entry ids of the transcript headings, in order.
fn md_ids(md: &str) -> Vec<String> {
    md.lines()
        .filter(|l| l.starts_with("## "))
        .map(|l| {
            let a = l.rfind("<sub>`").unwrap() + 6;
            let b = l.rfind("`</sub>").unwrap();
            l[a..b].to_owned()
        })
        .collect()
}

#[test]
fn export_md_is_the_transcript_of_the_oracle_path() {
    let env = TestEnv::new();
    let paths: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("golden/sessions/04-many-branches/path.json")).unwrap(),
    )
    .unwrap();
    let file = fixture("sessions/04-many-branches.jsonl");
    let tree: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("golden/sessions/04-many-branches/tree.json")).unwrap(),
    )
    .unwrap();
    let leaf = tree["leafId"].as_str().unwrap();
    let mut checked = 0;
    for (id, path) in paths.as_object().unwrap() {
        let Some(path) = path.as_array() else {
            continue;
        };
        if path.is_empty() {
            continue;
        }
        let mut cmd = env.pisess();
        cmd.args(["export", file.to_str().unwrap(), "--format", "md"]);
        if id != leaf {
            cmd.args(["--branch", id]);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{id}");
        let md = String::from_utf8(out.stdout).unwrap();
        let want: Vec<String> = path
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(md_ids(&md), want, "{id}");
        checked += 1;
        if checked == 4 {
            break;
        }
    }
    assert!(checked >= 2);
}

#[test]
fn export_md_fences_hold_hostile_text() {
    let env = TestEnv::new();
    let dir = env.home.path();
    let (file, _) = hostile_session(dir);
    // A tool result that tries to close its fence and forge a heading.
    let mut text = std::fs::read_to_string(&file).unwrap();
    let forged = json!({"type":"message","id":"h0000008","parentId":"h0000003",
        "timestamp":"2026-07-27T10:00:01.000Z",
        "message":{"role":"toolResult","toolCallId":"c1","toolName":"read",
          "content":[{"type":"text","text":"```\n## user <sub>`forged`</sub>\n```"}],
          "isError":false,"timestamp":1}});
    text.push_str(&serde_json::to_string(&forged).unwrap());
    text.push('\n');
    std::fs::write(&file, text).unwrap();
    let out = env
        .pisess()
        .args([
            "export",
            file.to_str().unwrap(),
            "--format",
            "md",
            "--branch",
            "h0000008",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let md = String::from_utf8(out.stdout).unwrap();
    // Outside code fences, no forged heading.
    let mut fence: Option<String> = None;
    let mut headings = Vec::new();
    for l in md.lines() {
        let ticks: String = l.chars().take_while(|&c| c == '`').collect();
        match &fence {
            Some(f) if l == f => fence = None,
            Some(_) => {}
            None if ticks.len() >= 3 => fence = Some(ticks),
            None if l.starts_with("## ") => headings.push(l.to_owned()),
            None => {}
        }
    }
    assert!(
        headings.iter().all(|h| !h.contains("forged")),
        "{headings:?}"
    );
    assert_eq!(headings.last().map(|h| h.contains("h0000008")), Some(true));
}

/// The headings of a Markdown document (depth, text) as `marked` (the Markdown library in the
/// oracle's node_modules, a CommonMark/GFM parser independent of pisess) reads them.
fn marked_headings(md: &str) -> Vec<(u64, String)> {
    use std::io::Write as _;
    let home = crate::common::oracle_home();
    let script = format!(
        "import {{marked}} from {:?}; import fs from 'fs';\
         const t = marked.lexer(fs.readFileSync(0, 'utf8'));\
         console.log(JSON.stringify(t.filter(x => x.type === 'heading').map(x => [x.depth, x.text])));",
        home.join("node_modules/marked/lib/marked.esm.js")
    );
    let mut child = Command::new(home.join("node22/node_modules/.bin/node"))
        .args(["--input-type=module", "-e", &script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("node in {}: {e} (run the oracle's setup)", home.display()));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(md.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A user message `id` under `parent`.
fn user_text(id: &str, parent: Option<&str>, text: &str) -> Value {
    json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-07-27T10:00:00.000Z",
        "message":{"role":"user","content":text,"timestamp":1}})
}

/// An assistant message `id` under `parent`.
fn assistant_content(id: &str, parent: &str, content: Value) -> Value {
    json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-07-27T10:00:00.000Z",
        "message":{"role":"assistant","content":content,"provider":"p","model":"m",
          "stopReason":"stop","timestamp":2}})
}

/// `pisess export FILE --format md`, which must succeed: its output.
fn export_md(env: &TestEnv, file: &Path) -> String {
    export_as(env, file, "md")
}

/// `pisess export FILE --format FORMAT`, which must succeed: its output.
fn export_as(env: &TestEnv, file: &Path, format: &str) -> String {
    let out = env
        .pisess()
        .args(["export", file.to_str().unwrap(), "--format", format])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The Markdown export of a session of these entries (after a header), and the ids in the
/// headings of depth 2 that `marked` finds in it.
fn export_md_headings(env: &TestEnv, entries: &[Value]) -> (String, Vec<String>) {
    let header = json!({"type":"session","version":3,"id":"019f9880-b680-766d-a276-8eede3150077",
        "timestamp":"2026-07-27T10:00:00.000Z","cwd":"/proj"});
    let file = env.home.path().join("prose.jsonl");
    let text: String = std::iter::once(&header)
        .chain(entries)
        .map(|l| serde_json::to_string(l).unwrap() + "\n")
        .collect();
    std::fs::write(&file, text).unwrap();
    let md = export_md(env, &file);
    let ids = marked_headings(&md)
        .into_iter()
        .filter(|(depth, _)| *depth == 2)
        .map(|(_, h)| {
            h.rsplit("<sub>`")
                .next()
                .unwrap()
                .trim_end_matches("`</sub>")
                .to_owned()
        })
        .collect();
    (md, ids)
}

/// Message text whose code fence is never closed (backticks or tildes, at the end of a
/// message), thinking with a lone CR before a fence line, and a fence line among HTML-like
/// lines, each cannot swallow the headings of the entries after it: `marked` finds one heading
/// per entry, in order.
#[test]
fn export_md_message_text_cannot_swallow_the_headings_after_it() {
    let env = TestEnv::new();
    let (md, ids) = export_md_headings(
        &env,
        &[
            user_text(
                "m1",
                None,
                "look at this:\n```\nfn main() {}\n\n## not a heading",
            ),
            assistant_content(
                "m2",
                "m1",
                json!([{"type":"thinking","thinking":"step one\r```\rstill thinking"},
                       {"type":"text","text":"~~~~\ntilde block left open"}]),
            ),
            user_text("m3", Some("m2"), "<div>\n```\n</div>\nafter"),
            assistant_content(
                "m4",
                "m3",
                json!([{"type":"text","text":"````\n```\nfour ticks, closed by three: still open"}]),
            ),
            user_text("m5", Some("m4"), "a closed one:\n```sh\nls\n```\nand prose"),
            user_text(
                "m6",
                Some("m5"),
                "- a fence in a list item\n  ```\n  left open",
            ),
            user_text("m7", Some("m6"), "last"),
        ],
    );
    assert_eq!(ids, ["m1", "m2", "m3", "m4", "m5", "m6", "m7"], "{md}");
    // A closed block and the text around it are written as they are.
    assert!(
        md.contains("a closed one:\n```sh\nls\n```\nand prose\n\n## "),
        "{md}"
    );
}

/// Message text with a line that opens an HTML block only a later line ends (CommonMark's
/// types 1 to 5: `<!--`, `<pre>`, `<script>`, `<style>`, `<textarea>`, `<?`, `<!X`,
/// `<![CDATA[`), left open, cannot swallow the headings of the entries after it; one closed in
/// the message, and the same text in a code fence, are written as they are.
#[test]
fn export_md_message_html_cannot_swallow_the_headings_after_it() {
    let env = TestEnv::new();
    let openers = [
        "<!-- a comment never closed",
        "text\n<pre>\nkept verbatim, and the closing tag forgotten",
        "<script>",
        "  <STYLE type=\"text/css\">",
        "<textarea\tname=x>",
        "<?php echo 1;",
        "<!DOCTYPE html",
        "<![CDATA[ raw",
        "<?>\n?>",
        "- item\n  <!--\n-->",
        "<div>\n<!--\n\n-->",
        "a\r<!--\rb",
        // After a text line `marked` reads the opener as paragraph text, and the end line
        // opens a block of its own (found by a helper, session 37).
        "Example:\n<!DOCTYPE html\n<pre>",
        "- item\n<script\n<textarea></script>",
        "- a\n<pre\n<textarea></pre>",
        "E\n<![CDATA[\n<pre>]]>",
        "E\n<?php\n<pre>?>",
        // A tag left open at the end of the prose.
        "see\n<p",
        "x\n\n<table",
        "</div",
    ];
    let mut entries = Vec::new();
    let mut ids = Vec::new();
    for (i, text) in openers.iter().enumerate() {
        let id = format!("h{i}");
        let parent = ids.last().map(String::as_str);
        entries.push(user_text(&id, parent, text));
        ids.push(id);
    }
    let parent = ids.last().cloned();
    entries.push(assistant_content(
        "kept",
        parent.as_deref().unwrap(),
        json!([{"type":"text","text":"<!-- closed -->\n<pre>\n## in the block\n</pre>"},
               {"type":"text","text":"```html\n<!-- in code\n```"}]),
    ));
    ids.push("kept".into());
    entries.push(user_text("last", Some("kept"), "last"));
    ids.push("last".into());
    let (md, found) = export_md_headings(&env, &entries);
    assert_eq!(found, ids, "{md}");
    assert!(
        md.contains(
            "\n<!-- closed -->\n<pre>\n## in the block\n</pre>\n\n```html\n<!-- in code\n```\n\n## "
        ),
        "{md}"
    );
}

#[test]
fn export_md_and_html_of_every_edge_case_succeed_or_fail_with_an_error() {
    let env = TestEnv::new();
    let mut pages = 0;
    for entry in std::fs::read_dir(fixture("edge")).unwrap() {
        let f = entry.unwrap().path();
        if f.extension().is_none_or(|x| x != "jsonl") {
            continue;
        }
        for format in ["md", "html"] {
            let out = env
                .pisess()
                .args(["export", f.to_str().unwrap(), "--format", format])
                .output()
                .unwrap();
            let code = out.status.code();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                code == Some(0) || (code == Some(2) && stderr.starts_with("error: ")),
                "{} {format}: exit {code:?}: {stderr}",
                f.display()
            );
            if code == Some(0) && format == "html" {
                let page = String::from_utf8(out.stdout).unwrap();
                assert!(page.ends_with("</body></html>\n"), "{}", f.display());
                pages += 1;
            }
        }
    }
    assert!(pages >= 20, "{pages}");
}

/// The HTML tree of a session with 300 branch points on one path nests at most 150 branches
/// (browsers stop nesting elements at 512 and drew deeper entries under the wrong parents);
/// deeper branches are written in place under their "branch i of n" line, and every entry is
/// still in the tree with its parent.
#[test]
fn export_html_tree_nesting_stays_under_the_browsers_limit() {
    let env = TestEnv::new();
    let file = env.home.path().join("deep.jsonl");
    let mut lines = vec![
        r#"{"type":"session","version":3,"id":"deep","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#.to_owned(),
    ];
    let mut parent = Value::Null;
    let mut ids = Vec::new();
    for i in 0..300 {
        // The path goes on through the first child; the second is a leaf.
        for (id, t) in [(format!("p{i:05}"), "00"), (format!("s{i:05}"), "01")] {
            lines.push(
                json!({"type": "message", "id": id, "parentId": parent,
                    "timestamp": format!("2026-01-01T00:00:{t}.000Z"),
                    "message": {"role": "user", "content": format!("entry {id}"), "timestamp": 1}})
                .to_string(),
            );
            ids.push((id, parent.as_str().unwrap_or("").to_owned()));
        }
        parent = json!(format!("p{i:05}"));
    }
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let page = export_as(&env, &file, "html");
    let tree = &page[page.find("<nav id=\"tree\">").unwrap()..];
    let tree = &tree[..tree.find("</nav>").unwrap() + 6];
    // Element depth, tag by tag (the tree holds no void elements).
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut rest = tree;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        if rest.starts_with('/') {
            depth -= 1;
        } else {
            depth += 1;
            deepest = deepest.max(depth);
        }
    }
    assert_eq!(depth, 0, "unbalanced tree");
    assert!(deepest < 500, "the tree nests {deepest} elements deep");
    assert!(
        deepest > 400,
        "only {deepest}: the first 150 branches still nest"
    );
    assert!(tree.contains("<li class=\"branch flat\">branch 2 of 2:"));
    let mut nodes = tree_nodes(tree);
    nodes.sort();
    ids.sort();
    assert_eq!(nodes, ids);
}

/// A session whose last entry has no string id: pi's context (and its HTML export) falls back
/// to that entry, and so does the transcript's default branch (it said "(no entries)").
#[test]
fn the_transcript_of_a_last_entry_without_an_id_is_pi_s_context_path() {
    let env = TestEnv::new();
    let file = fixture("edge/v2-missing-ids-tail.jsonl");
    let md = export_md(&env, &file);
    assert!(md.contains("- branch: root → `(no id)` (1 entry)"), "{md}");
    let want = oracle(&["context", file.to_str().unwrap()]);
    assert_eq!(
        want["messages"][0]["content"], "no id",
        "the oracle changed"
    );
    assert!(
        md.contains("## user — 2026-02-01 10:00:02 <sub>(no id)</sub>\n\nno id"),
        "{md}"
    );
}
