//! `write_file`: atomic writes, overwrite rules, escapes refused, the content limit.

use super::{Tree, call, failed_message, invalid_message, is_not_allowed};
use brokerd::builtin::files::{MAX_WRITE_BYTES, WriteFile};
use serde_json::json;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn write_file_creates_a_file_and_leaves_no_temporary_file() {
    let t = Tree::new();
    let path = t.root_str("new.txt");
    let out = call(
        &WriteFile,
        &t.grant("write_file"),
        json!({"path": path, "content": "héllo"}),
    )
    .await
    .unwrap();
    let written = fs::canonicalize(t.root.join("new.txt")).unwrap();
    assert_eq!(
        out.content,
        format!("wrote 6 bytes to {}", written.display())
    );
    assert!(!out.truncated);
    assert_eq!(fs::read_to_string(&path).unwrap(), "héllo");
    assert_eq!(names(&t.root), ["hello.txt", "new.txt"]);
}

#[tokio::test]
async fn write_file_refuses_an_existing_file_without_overwrite() {
    let t = Tree::new();
    let g = t.grant("write_file");
    let path = t.root_str("hello.txt");
    for args in [
        json!({"path": path, "content": "x"}),
        json!({"path": path, "content": "x", "overwrite": false}),
    ] {
        let m = failed_message(call(&WriteFile, &g, args).await);
        assert!(
            m.contains("already exists") && m.contains("overwrite"),
            "{m}"
        );
    }
    assert_eq!(fs::read_to_string(&path).unwrap(), "hello\n");
    assert_eq!(names(&t.root), ["hello.txt"]);
}

#[tokio::test]
async fn write_file_overwrites_when_asked_and_keeps_the_permissions() {
    let t = Tree::new();
    let path = t.root.join("hello.txt");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
    let args = json!({"path": path, "content": "new", "overwrite": true});
    call(&WriteFile, &t.grant("write_file"), args)
        .await
        .unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "new");
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o640
    );
    assert_eq!(names(&t.root), ["hello.txt"]);
}

#[tokio::test]
async fn write_file_never_keeps_setuid_setgid_or_sticky_bits() {
    let t = Tree::new();
    let path = t.root.join("hello.txt");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o7750)).unwrap();
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
        0o7750
    );
    let args = json!({"path": path, "content": "new", "overwrite": true});
    call(&WriteFile, &t.grant("write_file"), args)
        .await
        .unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "new");
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
        0o750
    );
}

#[tokio::test]
async fn write_file_refuses_dot_dot_and_symlink_escapes() {
    let t = Tree::new();
    symlink(&t.outside, t.root.join("linkdir")).unwrap();
    symlink(t.outside.join("secret.txt"), t.root.join("link.txt")).unwrap();
    let g = t.grant("write_file");
    for rel in [
        "../outside/new.txt",
        "../outside/secret.txt",
        "linkdir/new.txt",
        "link.txt",
        "..",
    ] {
        let path = t.root_str(rel);
        let r = call(
            &WriteFile,
            &g,
            json!({"path": path, "content": "pwned", "overwrite": true}),
        )
        .await;
        assert!(is_not_allowed(&r, &path), "{rel}: {r:?}");
    }
    assert_eq!(names(&t.outside), ["secret.txt"]);
    assert_eq!(
        fs::read_to_string(t.outside.join("secret.txt")).unwrap(),
        "secret\n"
    );
}

#[tokio::test]
async fn write_file_never_writes_through_a_dangling_symlink() {
    let t = Tree::new();
    symlink(t.outside.join("planted.txt"), t.root.join("dangling")).unwrap();
    let g = t.grant("write_file");
    let path = t.root_str("dangling");
    let m = failed_message(call(&WriteFile, &g, json!({"path": path, "content": "x"})).await);
    assert!(m.contains("already exists"), "{m}");
    // With overwrite the link itself is replaced by a file; nothing appears outside.
    call(
        &WriteFile,
        &g,
        json!({"path": path, "content": "x", "overwrite": true}),
    )
    .await
    .unwrap();
    assert!(
        !fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(names(&t.outside), ["secret.txt"]);
}

#[tokio::test]
async fn write_file_needs_an_existing_directory_and_a_file_target() {
    let t = Tree::new();
    let g = t.grant("write_file");
    let m = failed_message(
        call(
            &WriteFile,
            &g,
            json!({"path": t.root_str("no/such/x.txt"), "content": ""}),
        )
        .await,
    );
    assert!(m.contains("directory does not exist"), "{m}");
    fs::create_dir(t.root.join("d")).unwrap();
    let m = failed_message(
        call(
            &WriteFile,
            &g,
            json!({"path": t.root_str("d"), "content": "", "overwrite": true}),
        )
        .await,
    );
    assert!(m.contains("not a regular file"), "{m}");
    assert!(t.root.join("d").is_dir());
}

#[tokio::test]
async fn write_file_limits_the_content_size() {
    let t = Tree::new();
    let content = "x".repeat(MAX_WRITE_BYTES + 1);
    let r = call(
        &WriteFile,
        &t.grant("write_file"),
        json!({"path": t.root_str("big"), "content": content}),
    )
    .await;
    assert!(invalid_message(r).contains("\"content\""));
    assert!(!t.root.join("big").exists());
    let content = "x".repeat(MAX_WRITE_BYTES);
    call(
        &WriteFile,
        &t.grant("write_file"),
        json!({"path": t.root_str("big"), "content": content}),
    )
    .await
    .unwrap();
    assert_eq!(
        fs::metadata(t.root.join("big")).unwrap().len(),
        MAX_WRITE_BYTES as u64
    );
}
