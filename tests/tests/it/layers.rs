#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The module structure stays as docs/ARCHITECTURE.md draws it (issue 14): no crate's
//! top-level modules import each other in a loop, and loopd's modules sit in layers that only
//! import downwards. A module is said to import another when its text names `crate::other`
//! (as `use` lines and paths do); inline `#[cfg(test)] mod` blocks and comments do not count.
//! Test files count as the module they sit in (`engine/tests/faults.rs` is `engine`), so a unit test
//! imports only its own layer and those below; loopd's tests that need a higher layer to set
//! up what they check live in its top-level `tests` module, the top layer.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// loopd's layers, bottom first. A module imports only modules of its own layer or below, and
/// no two modules of one layer import each other in a loop (checked by the cycle test). A new
/// module must be placed here.
const LOOPD_LAYERS: &[(&str, &[&str])] = &[
    (
        "foundation",
        &[
            "text", "outcome", "blocking", "journal", "config", "session", "llama", "signin",
            "zone",
        ],
    ),
    ("models", &["kv", "route"]),
    ("tools", &["tools", "broker"]),
    (
        "results and notes",
        &["outputs", "untrusted", "undone", "toolset", "memory"],
    ),
    ("context", &["baseline", "budget", "runtime"]),
    ("accounts", &["meter"]),
    ("epoch work", &["summarise", "compact"]),
    ("turn", &["turn"]),
    ("local tools that run turns", &["subagent"]),
    ("serving", &["api", "heartbeat", "schedule", "web"]),
    ("engine", &["engine"]),
    ("daemon", &["daemon"]),
    ("cross-layer tests", &["tests"]),
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The source without comments and without an inline test module (`#[cfg(test)] mod x {`, to
/// the end of the file, as such a module always ends its file in this workspace).
fn code_of(text: &str) -> String {
    let inline_tests = text.match_indices("#[cfg(test)]\nmod ").find(|(at, _)| {
        text[*at..]
            .lines()
            .nth(1)
            .is_some_and(|line| line.trim_end().ends_with('{'))
    });
    let text = match inline_tests {
        Some((at, _)) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names that follow `crate::` in `code`.
fn crate_paths(code: &str) -> BTreeSet<String> {
    code.match_indices("crate::")
        .filter(|(at, _)| {
            // `crate::` itself, not the end of a longer name such as `mycrate::`.
            code[..*at]
                .chars()
                .next_back()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
        })
        .map(|(at, m)| {
            code[at + m.len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect::<String>()
        })
        .filter(|name| !name.is_empty())
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Each top-level module of the crate at `src` and the top-level modules it imports.
fn imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let tops: BTreeSet<String> = files.iter().filter_map(|f| top_module(src, f)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let Some(me) = top_module(src, file) else {
            continue;
        };
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        let deps = graph.entry(me.clone()).or_default();
        deps.extend(
            crate_paths(&code)
                .into_iter()
                .filter(|d| *d != me && tops.contains(d)),
        );
    }
    graph
}

/// The top-level module a file belongs to (`None`: the crate root, `lib.rs` or `main.rs`).
fn top_module(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    match first.strip_suffix(".rs") {
        Some("lib" | "main") => None,
        Some(name) => Some(name.to_string()),
        None => Some(first),
    }
}

/// A loop of imports in `graph`, if there is one: the modules on it, the first repeated last.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

fn crate_sources() -> Vec<PathBuf> {
    let root = workspace();
    let mut sources: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .filter(|src| src.is_dir())
        .collect();
    sources.push(root.join("tests/src"));
    sources.sort();
    sources
}

#[test]
fn no_crate_has_an_import_loop_between_its_modules() {
    for src in crate_sources() {
        let graph = imports(&src);
        assert!(
            find_cycle(&graph).is_none(),
            "{}: modules import each other in a loop: {}",
            src.display(),
            find_cycle(&graph).unwrap().join(" -> ")
        );
    }
}

#[test]
fn the_cycle_check_finds_a_loop() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(find_cycle(&graph).unwrap(), ["a", "b", "c", "a"]);
    let code = code_of("use crate::x;\n// crate::y\nfn f() { mycrate::z(); crate::w::v(); }\n");
    assert_eq!(
        crate_paths(&code),
        BTreeSet::from(["x".to_string(), "w".to_string()])
    );
}

#[test]
fn loopd_modules_only_import_their_own_layer_or_below() {
    let graph = imports(&workspace().join("crates/loopd/src"));
    let layer_of: BTreeMap<&str, usize> = LOOPD_LAYERS
        .iter()
        .enumerate()
        .flat_map(|(i, (_, modules))| modules.iter().map(move |m| (*m, i)))
        .collect();
    let unplaced: Vec<&String> = graph
        .keys()
        .filter(|m| !layer_of.contains_key(m.as_str()))
        .collect();
    assert!(
        unplaced.is_empty(),
        "loopd modules in no layer (place them in LOOPD_LAYERS and docs/ARCHITECTURE.md): {unplaced:?}"
    );
    let mut upward = Vec::new();
    for (module, deps) in &graph {
        let mine = layer_of[module.as_str()];
        for dep in deps {
            let theirs = layer_of[dep.as_str()];
            if theirs > mine {
                upward.push(format!(
                    "{module} ({}) imports {dep} ({})",
                    LOOPD_LAYERS[mine].0, LOOPD_LAYERS[theirs].0
                ));
            }
        }
    }
    assert!(upward.is_empty(), "imports that go up a layer: {upward:#?}");
}
