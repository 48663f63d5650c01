//! `list_dir`: a header that counts the entries, then each entry's full path; the cap and the
//! header together; escapes refused.

use super::{Tree, call, call_capped, failed_message, is_not_allowed};
use brokerd::builtin::files::ListDir;
use brokerd::tool::ToolOutput;
use serde_json::json;
use std::fs;
use std::os::unix::fs::symlink;

fn whole(content: String) -> ToolOutput {
    ToolOutput {
        content,
        truncated: false,
    }
}

fn cut(content: String) -> ToolOutput {
    ToolOutput {
        content,
        truncated: true,
    }
}

#[tokio::test]
async fn list_dir_counts_then_gives_full_sorted_paths_with_directories_marked() {
    let t = Tree::new();
    fs::create_dir(t.root.join("b_dir")).unwrap();
    fs::write(t.root.join("a.txt"), "").unwrap();
    fs::write(t.root.join("c.txt"), "").unwrap();
    fs::write(t.root.join("odd\nname"), "").unwrap();
    symlink(&t.outside, t.root.join("z_link")).unwrap();
    let g = t.grant("list_dir");
    let root = t.root.to_str().unwrap();
    let out = call(&ListDir, &g, json!({ "path": root })).await.unwrap();
    // A path with a control character is quoted and escaped whole, so it cannot forge a line.
    let expected = format!(
        "6 entries in {root}:\n{root}/a.txt\n{root}/b_dir/\n{root}/c.txt\n{root}/hello.txt\n\
         \"{root}/odd\\nname\"\n{root}/z_link\n"
    );
    assert_eq!(out, whole(expected));
    let file = call(&ListDir, &g, json!({"path": t.root_str("a.txt")})).await;
    assert!(failed_message(file).contains("not a directory"));
}

#[tokio::test]
async fn list_dir_says_one_entry_and_an_empty_directory() {
    let t = Tree::new();
    fs::create_dir(t.root.join("empty")).unwrap();
    let g = t.grant("list_dir");
    let (root, empty) = (t.root.to_str().unwrap(), t.root_str("empty"));
    let out = call(&ListDir, &g, json!({ "path": root })).await.unwrap();
    let expected = format!("2 entries in {root}:\n{root}/empty/\n{root}/hello.txt\n");
    assert_eq!(out, whole(expected));
    let out = call(&ListDir, &g, json!({ "path": empty })).await.unwrap();
    assert_eq!(out, whole(format!("{empty} is empty.\n")));
    fs::write(t.root.join("empty/only.txt"), "").unwrap();
    let out = call(&ListDir, &g, json!({ "path": empty })).await.unwrap();
    assert_eq!(
        out,
        whole(format!("1 entry in {empty}:\n{empty}/only.txt\n"))
    );
}

#[tokio::test]
async fn list_dir_writes_the_path_without_a_trailing_slash_or_doubled_slashes() {
    let t = Tree::new();
    let g = t.grant("list_dir");
    let root = t.root.to_str().unwrap();
    let expected = format!("1 entry in {root}:\n{root}/hello.txt\n");
    for given in [format!("{root}/"), format!("{root}//"), format!("{root}/.")] {
        let out = call(&ListDir, &g, json!({ "path": given })).await.unwrap();
        assert_eq!(out, whole(expected.clone()), "{given}");
    }
}

#[tokio::test]
async fn list_dir_quotes_a_directory_path_with_a_control_character() {
    let t = Tree::new();
    fs::create_dir(t.root.join("odd\tdir")).unwrap();
    fs::write(t.root.join("odd\tdir/a"), "").unwrap();
    let dir = t.root_str("odd\tdir");
    let g = t.grant("list_dir");
    let out = call(&ListDir, &g, json!({ "path": dir })).await.unwrap();
    let root = t.root.to_str().unwrap();
    let expected = format!("1 entry in \"{root}/odd\\tdir\":\n\"{root}/odd\\tdir/a\"\n");
    assert_eq!(out, whole(expected));
}

#[tokio::test]
async fn list_dir_keeps_the_header_and_whole_lines_within_the_cap() {
    let t = Tree::new();
    fs::remove_file(t.root.join("hello.txt")).unwrap();
    // Names long beside the headers, so that each case below is shorter than the one before
    // whatever the temporary directory's path.
    let [a, b, c] = ['a', 'b', 'c'].map(|ch| ch.to_string().repeat(100));
    for name in [&a, &b, &c] {
        fs::write(t.root.join(name), "").unwrap();
    }
    let g = t.grant("list_dir");
    let root = t.root.to_str().unwrap();
    let line = |name: &str| format!("{root}/{name}\n");
    let full = format!("3 entries in {root}:\n{}{}{}", line(&a), line(&b), line(&c));
    let two = format!(
        "The first 2 entries in {root} (more were left out):\n{}{}",
        line(&a),
        line(&b)
    );
    let one = format!(
        "The first entry in {root} (more were left out):\n{}",
        line(&a)
    );
    let none = format!("{root} is not empty, but no entry fit in the result.\n");
    let cases = [
        (full.len(), whole(full.clone())),
        // The cut header is longer than the whole one, and counts against the cap too.
        (full.len() - 1, cut(two.clone())),
        (two.len(), cut(two.clone())),
        (two.len() - 1, cut(one.clone())),
        (one.len(), cut(one.clone())),
        (one.len() - 1, cut(none.clone())),
        (none.len(), cut(none.clone())),
        (none.len() - 1, cut(String::new())),
        (0, cut(String::new())),
    ];
    for (cap, expected) in cases {
        let args = json!({ "path": root });
        let out = call_capped(&ListDir, &g, args, cap).await.unwrap();
        assert!(out.content.len() <= cap, "{cap}: {out:?}");
        assert_eq!(out, expected, "cap {cap}");
    }
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
