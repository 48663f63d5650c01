//! The file tools `read_file`, `list_dir` and `write_file`: paths under the grant's roots only
//! (no `..` or symlink escape), argument checking, caps, listing format, atomic writes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use brokerd::builtin::files::{ListDir, ReadFile, WriteFile};
use brokerd::config::Grant;
use brokerd::tool::{CallContext, Tool, ToolError, ToolOutput};
use serde_json::{Value, json};
use std::fs;
use std::os::unix::fs::symlink;
use std::path::PathBuf;

mod race;
mod write_file;

/// A result cap large enough for every test that does not test the cap.
const BIG_CAP: usize = 1 << 20;
/// A call time limit no test comes near.
const TIMEOUT_MS: u64 = 10_000;

/// A temporary tree: `root/` (granted) holding `hello.txt`, and `outside/` (not granted)
/// holding `secret.txt`.
struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

impl Tree {
    fn new() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let outside = dir.path().join("outside");
        fs::create_dir(&root).unwrap();
        fs::create_dir(&outside).unwrap();
        fs::write(root.join("hello.txt"), "hello\n").unwrap();
        fs::write(outside.join("secret.txt"), "secret\n").unwrap();
        Tree {
            _dir: dir,
            root,
            outside,
        }
    }

    fn grant(&self, tool: &str) -> Grant {
        serde_json::from_value(json!({"tool": tool, "paths": [self.root]})).unwrap()
    }

    fn root_str(&self, rel: &str) -> String {
        format!("{}/{rel}", self.root.display())
    }
}

async fn call_capped(
    tool: &dyn Tool,
    grant: &Grant,
    args: Value,
    cap: usize,
) -> Result<ToolOutput, ToolError> {
    let ctx = CallContext {
        grant,
        result_cap_bytes: cap,
        timeout_ms: TIMEOUT_MS,
        secrets: &brokerd::secrets::Secrets::default(),
        record: None,
    };
    tool.call(&args, ctx).await
}

async fn call(tool: &dyn Tool, grant: &Grant, args: Value) -> Result<ToolOutput, ToolError> {
    call_capped(tool, grant, args, BIG_CAP).await
}

fn is_not_allowed(r: &Result<ToolOutput, ToolError>, path: &str) -> bool {
    matches!(r, Err(ToolError::PathNotAllowed(m)) if m.contains(path))
}

fn invalid_message(r: Result<ToolOutput, ToolError>) -> String {
    match r {
        Err(ToolError::InvalidArguments(m)) => m,
        other => panic!("expected InvalidArguments, got {other:?}"),
    }
}

fn failed_message(r: Result<ToolOutput, ToolError>) -> String {
    match r {
        Err(ToolError::Failed(m)) => m,
        other => panic!("expected Failed, got {other:?}"),
    }
}

/// A tool, its name, its keys and its required keys.
type SchemaCase<'a> = (&'a dyn Tool, &'a str, &'a [&'a str], &'a [&'a str]);

#[test]
fn schemas_name_exactly_their_keys() {
    let tools: [SchemaCase; 3] = [
        (&ReadFile, "read_file", &["path"], &["path"]),
        (&ListDir, "list_dir", &["path"], &["path"]),
        (
            &WriteFile,
            "write_file",
            &["path", "content", "overwrite"],
            &["path", "content"],
        ),
    ];
    for (tool, name, keys, required) in tools {
        let schema = tool.schema();
        assert_eq!(schema.name, name);
        assert!(!schema.description.is_empty());
        let p = &schema.parameters;
        assert_eq!(p["type"], "object");
        assert_eq!(p["additionalProperties"], false);
        let mut props: Vec<&str> = p["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        props.sort_unstable();
        let mut keys = keys.to_vec();
        keys.sort_unstable();
        assert_eq!(props, keys, "{name}");
        assert_eq!(p["required"], json!(required), "{name}");
    }
    let write = WriteFile.schema();
    assert_eq!(
        write.parameters["properties"]["overwrite"]["type"],
        "boolean"
    );
}

#[tokio::test]
async fn read_file_reads_an_allowed_file() {
    let t = Tree::new();
    let out = call(
        &ReadFile,
        &t.grant("read_file"),
        json!({"path": t.root_str("hello.txt")}),
    )
    .await
    .unwrap();
    assert_eq!(
        out,
        ToolOutput {
            content: "hello\n".to_string(),
            truncated: false
        }
    );
}

#[tokio::test]
async fn read_file_refuses_a_dot_dot_escape() {
    let t = Tree::new();
    let path = t.root_str("../outside/secret.txt");
    let r = call(&ReadFile, &t.grant("read_file"), json!({ "path": path })).await;
    // The message names the path as given, never the roots.
    let expected = format!("{path} is outside the allowed paths");
    assert!(
        matches!(&r, Err(ToolError::PathNotAllowed(m)) if *m == expected),
        "{r:?}"
    );
}

#[tokio::test]
async fn read_file_refuses_a_symlink_that_points_outside() {
    let t = Tree::new();
    symlink(t.outside.join("secret.txt"), t.root.join("link.txt")).unwrap();
    symlink(&t.outside, t.root.join("linkdir")).unwrap();
    for rel in ["link.txt", "linkdir/secret.txt"] {
        let path = t.root_str(rel);
        let r = call(&ReadFile, &t.grant("read_file"), json!({ "path": path })).await;
        assert!(is_not_allowed(&r, &path), "{rel}: {r:?}");
    }
}

#[tokio::test]
async fn read_file_follows_a_symlink_that_stays_inside() {
    let t = Tree::new();
    fs::create_dir(t.root.join("sub")).unwrap();
    symlink(t.root.join("hello.txt"), t.root.join("sub/alias.txt")).unwrap();
    let path = t.root_str("sub/../sub/alias.txt");
    let out = call(&ReadFile, &t.grant("read_file"), json!({ "path": path }))
        .await
        .unwrap();
    assert_eq!(out.content, "hello\n");
}

#[tokio::test]
async fn read_file_refuses_a_file_with_more_than_one_hard_link() {
    let t = Tree::new();
    // A hard link inside the root to a file outside it: no path check can see where it leads.
    fs::hard_link(t.outside.join("secret.txt"), t.root.join("hard.txt")).unwrap();
    let path = t.root_str("hard.txt");
    let r = call(&ReadFile, &t.grant("read_file"), json!({ "path": path })).await;
    assert!(
        matches!(&r, Err(ToolError::PathNotAllowed(m)) if m.contains(&path) && m.contains("hard link")),
        "{r:?}"
    );
    // Two links both inside the root are refused alike: the count cannot say where the other is.
    fs::hard_link(t.root.join("hello.txt"), t.root.join("hello2.txt")).unwrap();
    let path = t.root_str("hello2.txt");
    let r = call(&ReadFile, &t.grant("read_file"), json!({ "path": path })).await;
    assert!(is_not_allowed(&r, &path), "{r:?}");
}

#[tokio::test]
async fn read_file_fails_clearly_on_a_missing_file_or_a_directory() {
    let t = Tree::new();
    let g = t.grant("read_file");
    let missing = call(&ReadFile, &g, json!({"path": t.root_str("nope.txt")})).await;
    assert!(failed_message(missing).contains("no such file"));
    let dir = call(&ReadFile, &g, json!({"path": t.root.to_str().unwrap()})).await;
    assert!(failed_message(dir).contains("is a directory"));
    // A missing path outside the roots is not allowed (its existence is not told).
    let path = format!("{}/nope.txt", t.outside.display());
    let r = call(&ReadFile, &g, json!({ "path": path })).await;
    assert!(is_not_allowed(&r, &path), "{r:?}");
}

#[tokio::test]
async fn arguments_that_do_not_fit_the_schema_are_invalid() {
    let t = Tree::new();
    let g = t.grant("read_file");
    let path = t.root_str("hello.txt");
    let cases = [
        (json!({}), "missing key \"path\""),
        (json!({"path": path, "extra": 1}), "unknown key \"extra\""),
        (
            json!({"path": 7}),
            "key \"path\" must be a string, not a number",
        ),
        (json!([path]), "must be a JSON object"),
        (Value::Null, "must be a JSON object"),
        (json!({"path": "hello.txt"}), "must be an absolute path"),
    ];
    for (args, expected) in cases {
        let m = invalid_message(call(&ReadFile, &g, args.clone()).await);
        assert!(m.contains(expected), "{args}: {m}");
    }
    let w = t.grant("write_file");
    let cases = [
        (json!({"path": path}), "missing key \"content\""),
        (
            json!({"path": path, "content": "x", "overwrite": "yes"}),
            "key \"overwrite\" must be a boolean",
        ),
        (
            json!({"path": path, "content": "x", "mode": "0777"}),
            "unknown key \"mode\"",
        ),
    ];
    for (args, expected) in cases {
        let m = invalid_message(call(&WriteFile, &w, args.clone()).await);
        assert!(m.contains(expected), "{args}: {m}");
    }
    let m = invalid_message(call(&ListDir, &t.grant("list_dir"), json!({"dir": "/"})).await);
    assert!(m.contains("unknown key \"dir\""), "{m}");
}

#[tokio::test]
async fn read_file_cuts_at_the_cap_on_a_character_boundary() {
    let t = Tree::new();
    let g = t.grant("read_file");
    // "ab" then "é" (2 bytes) across the 3-byte cap, then more.
    fs::write(t.root.join("utf8.txt"), "abécd").unwrap();
    let args = json!({"path": t.root_str("utf8.txt")});
    let out = call_capped(&ReadFile, &g, args.clone(), 3).await.unwrap();
    assert_eq!(
        out,
        ToolOutput {
            content: "ab".to_string(),
            truncated: true
        }
    );
    let out = call_capped(&ReadFile, &g, args.clone(), 4).await.unwrap();
    assert_eq!(
        out,
        ToolOutput {
            content: "abé".to_string(),
            truncated: true
        }
    );
    let out = call_capped(&ReadFile, &g, args, 6).await.unwrap();
    assert_eq!(
        out,
        ToolOutput {
            content: "abécd".to_string(),
            truncated: false
        }
    );
    // A file far larger than the cap is cut at it.
    fs::write(t.root.join("big.txt"), "x".repeat(100_000)).unwrap();
    let out = call_capped(&ReadFile, &g, json!({"path": t.root_str("big.txt")}), 1000)
        .await
        .unwrap();
    assert_eq!((out.content.len(), out.truncated), (1000, true));
}

#[tokio::test]
async fn read_file_shows_invalid_utf8_as_replacement_characters() {
    let t = Tree::new();
    fs::write(t.root.join("bin"), b"a\xff\xfeb").unwrap();
    let out = call(
        &ReadFile,
        &t.grant("read_file"),
        json!({"path": t.root_str("bin")}),
    )
    .await
    .unwrap();
    assert_eq!(out.content, "a\u{fffd}\u{fffd}b");
}

#[tokio::test]
async fn list_dir_lists_sorted_with_directories_marked() {
    let t = Tree::new();
    fs::create_dir(t.root.join("b_dir")).unwrap();
    fs::write(t.root.join("a.txt"), "").unwrap();
    fs::write(t.root.join("c.txt"), "").unwrap();
    fs::write(t.root.join("odd\nname"), "").unwrap();
    symlink(&t.outside, t.root.join("z_link")).unwrap();
    let g = t.grant("list_dir");
    let out = call(&ListDir, &g, json!({"path": t.root.to_str().unwrap()}))
        .await
        .unwrap();
    assert_eq!(
        out,
        ToolOutput {
            content: "a.txt\nb_dir/\nc.txt\nhello.txt\n\"odd\\nname\"\nz_link\n".to_string(),
            truncated: false
        }
    );
    let empty = call(&ListDir, &g, json!({"path": t.root_str("b_dir")}))
        .await
        .unwrap();
    assert_eq!(
        empty,
        ToolOutput {
            content: String::new(),
            truncated: false
        }
    );
    let file = call(&ListDir, &g, json!({"path": t.root_str("a.txt")})).await;
    assert!(failed_message(file).contains("not a directory"));
}

#[tokio::test]
async fn list_dir_keeps_whole_lines_within_the_cap() {
    let t = Tree::new();
    for name in ["aaa", "bbb", "ccc"] {
        fs::write(t.root.join(name), "").unwrap();
    }
    let g = t.grant("list_dir");
    let args = json!({"path": t.root.to_str().unwrap()});
    // "aaa\nbbb\n" is 8 bytes; "ccc\n" would pass a cap of 10.
    let out = call_capped(&ListDir, &g, args, 10).await.unwrap();
    assert_eq!(
        out,
        ToolOutput {
            content: "aaa\nbbb\n".to_string(),
            truncated: true
        }
    );
}

#[tokio::test]
async fn list_dir_refuses_dot_dot_and_symlink_escapes() {
    let t = Tree::new();
    symlink(&t.outside, t.root.join("linkdir")).unwrap();
    let g = t.grant("list_dir");
    for rel in ["..", "../outside", "linkdir"] {
        let path = t.root_str(rel);
        let r = call(&ListDir, &g, json!({ "path": path })).await;
        assert!(is_not_allowed(&r, &path), "{rel}: {r:?}");
    }
}

#[tokio::test]
async fn a_root_that_is_one_file_grants_that_file_only() {
    let t = Tree::new();
    let file = t.root.join("hello.txt");
    fs::write(t.root.join("sibling.txt"), "not granted\n").unwrap();
    let grant: Grant =
        serde_json::from_value(json!({"tool": "read_file", "paths": [file]})).unwrap();
    let read = call(&ReadFile, &grant, json!({"path": file}))
        .await
        .unwrap();
    assert_eq!(read.content, "hello\n");
    let sibling = t.root_str("sibling.txt");
    let r = call(&ReadFile, &grant, json!({"path": sibling})).await;
    assert!(is_not_allowed(&r, &sibling), "{r:?}");
}
