#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The documents an owner follows (`README.md`, `docs/*.md`) speak for themselves: no internal
//! issue numbers ("(issue 34)", "issues #2, #3", "issue-22"), which mean nothing to a reader
//! without the tracker, and no `example.invalid` where the owner must put something real. A
//! GitHub repository's own issue (`prometheus/client_rust issue 194`) is a public reference and
//! stays.

use e2e::workspace_root;

/// Documents under `docs/` left out, each with why.
const NOT_CHECKED: &[&str] = &[
    // The evaluation suite's record of measured runs: each run is named by its commit and by the
    // issue that asked for the measurement, as a lab notebook is, and stays as it was written.
    "evals.md",
];

/// `README.md` and every `docs/*.md` but [`NOT_CHECKED`]: (path from the root, text).
fn owner_docs() -> Vec<(String, String)> {
    let root = workspace_root();
    let mut names: Vec<String> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md") && !NOT_CHECKED.contains(&name.as_str()))
        .collect();
    names.sort();
    let mut paths = vec!["README.md".to_string()];
    paths.extend(names.into_iter().map(|name| format!("docs/{name}")));
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(root.join(&path)).unwrap();
            (path, text)
        })
        .collect()
}

/// The line (from 1) that byte `at` of `text` is on, and that line.
fn line_at(text: &str, at: usize) -> (usize, &str) {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    (text[..at].matches('\n').count() + 1, &text[start..end])
}

/// Where `text` names an internal issue by number: "issue 34", "issues #2", "issue-22", an
/// "issue" at a line's end followed by the number on the next, or a bare "#5". Byte offsets.
fn internal_issue_refs(text: &str) -> Vec<usize> {
    let lower = text.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let mut found = Vec::new();
    for (at, _) in lower.match_indices("issue") {
        if at > 0 && bytes[at - 1].is_ascii_alphanumeric() {
            continue;
        }
        let mut next = at + "issue".len();
        if bytes.get(next) == Some(&b's') {
            next += 1;
        }
        while matches!(bytes.get(next), Some(b' ' | b'\t' | b'\n' | b'-')) {
            next += 1;
        }
        if bytes.get(next) == Some(&b'#') {
            next += 1;
        }
        if !bytes.get(next).is_some_and(u8::is_ascii_digit) {
            continue;
        }
        // The word before: a repository ("owner/name issue 194") makes it a public reference.
        let before = lower[..at].trim_end();
        let word = before.rsplit(char::is_whitespace).next().unwrap_or("");
        if word.contains('/') {
            continue;
        }
        found.push(at);
    }
    for (at, _) in lower.match_indices('#') {
        let after_digit = bytes.get(at + 1).is_some_and(u8::is_ascii_digit);
        let starts_word = at == 0 || matches!(bytes[at - 1], b' ' | b'\t' | b'\n' | b'(' | b',');
        if after_digit && starts_word && !found.iter().any(|&f| f < at && at - f <= 8) {
            found.push(at);
        }
    }
    found.sort_unstable();
    found
}

#[test]
fn the_owners_docs_name_no_internal_issue_numbers() {
    let mut bad = Vec::new();
    for (path, text) in owner_docs() {
        for at in internal_issue_refs(&text) {
            let (line, content) = line_at(&text, at);
            bad.push(format!("{path}:{line}: {}", content.trim()));
        }
    }
    assert!(
        bad.is_empty(),
        "internal issue numbers in the docs (say what was meant instead):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_owners_docs_leave_no_example_invalid_placeholder() {
    let mut bad = Vec::new();
    for (path, text) in owner_docs() {
        for (at, _) in text.match_indices("example.invalid") {
            let (line, content) = line_at(&text, at);
            bad.push(format!("{path}:{line}: {}", content.trim()));
        }
    }
    assert!(
        bad.is_empty(),
        "example.invalid in the docs (say plainly what the owner puts there):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_checks_catch_every_form_and_spare_public_references() {
    for text in [
        "labels (issue 11) and",
        "Issue 34 measures",
        "issues #2, #3 and",
        "the issue-22 work",
        "What issue\n11 added",
        "issues 15–22 added",
        "(until #5, loopd",
        "issue 33.9",
    ] {
        assert!(
            !internal_issue_refs(text).is_empty(),
            "not caught: {text:?}"
        );
    }
    for text in [
        "the classic format (prometheus/client_rust issue 194).",
        "what the issue's wording measures",
        "a `#[cfg(test)]` module",
        "## Headings",
        "tissue 5",
        "a token may be issued 5 times",
    ] {
        assert!(
            internal_issue_refs(text).is_empty(),
            "wrongly caught: {text:?}"
        );
    }
    assert_eq!(internal_issue_refs("x\nissues #2, #3").len(), 2);
    assert_eq!(line_at("a\nb issue 4\nc", 4), (2, "b issue 4"));
}
