//! Paths in words: the paths the owner's words hold ([`OwnerPaths`]), the paths a call's
//! arguments name ([`named`]), and whether one covers another, compared on path components
//! after lexical normalisation ([`Path`]). Nothing here touches the file system: symlinks are
//! brokerd's to refuse (`openat2` beneath a root), this only asks who wrote the path.

use serde_json::{Map, Value};

/// Characters a word of the owner's may be wrapped in (quotes, brackets) or end with (a
/// sentence's punctuation), trimmed before it is read as a path.
const OWNER_WORD_WRAPPERS: &[char] = &[
    '"', '\'', '`', '(', ')', '[', ']', '{', '}', '<', '>', '.', ',', ';', ':', '!', '?',
];
/// Quote marks whose quoted text the owner may give as one path (with its spaces).
const QUOTES: [char; 2] = ['"', '`'];

/// A path, normalised lexically: `.` and empty components dropped, `..` taking the component
/// before it away (above the root of an absolute path it stays at the root; a relative path
/// keeps the `..` it starts with).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path {
    /// Whether it starts at `/`.
    absolute: bool,
    /// Its components, in order.
    parts: Vec<String>,
}

impl Path {
    /// `text` as a normalised path.
    pub fn new(text: &str) -> Path {
        Path::new_beneath(
            Path {
                absolute: text.starts_with('/'),
                parts: Vec::new(),
            },
            text,
        )
    }

    /// `text` resolved against `base` (an absolute `text` ignores it), normalised.
    pub fn new_beneath(base: Path, text: &str) -> Path {
        let mut path = if text.starts_with('/') {
            Path {
                absolute: true,
                parts: Vec::new(),
            }
        } else {
            base
        };
        for part in text.split('/') {
            match part {
                "" | "." => {}
                ".." => match path.parts.last().map(String::as_str) {
                    Some(last) if last != ".." => {
                        path.parts.pop();
                    }
                    _ if path.absolute => {}
                    _ => path.parts.push("..".to_string()),
                },
                part => path.parts.push(part.to_string()),
            }
        }
        path
    }

    /// The folder holding `self`; `None` for a path with no component.
    fn parent(&self) -> Option<Path> {
        let (_, holding) = self.parts.split_last()?;
        Some(Path {
            absolute: self.absolute,
            parts: holding.to_vec(),
        })
    }

    /// Whether `self` is `other` or lies beneath it.
    fn is_within(&self, other: &Path) -> bool {
        self.absolute == other.absolute && self.parts.starts_with(&other.parts)
    }
}

/// A path the owner wrote, and what it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Given {
    /// The path.
    path: Path,
    /// Written as a file (its last component has a name and an extension, `total.txt`, and no
    /// `/` follows it): it covers that file only, nothing beneath it.
    file: bool,
}

impl Given {
    /// Whether it covers `path`: `path` is it, or lies beneath it as a folder.
    fn covers(&self, path: &Path) -> bool {
        path.is_within(&self.path) && (!self.file || path.parts.len() == self.path.parts.len())
    }
}

/// The paths the owner's words hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnerPaths {
    given: Vec<Given>,
}

impl OwnerPaths {
    /// The paths of `texts`: each word holding a `/` (after trimming [`OWNER_WORD_WRAPPERS`],
    /// and after the `=` of `--output=/x` or `of=/x`), and each text in double quotes or
    /// backticks holding a `/` (a path with spaces). The root alone, or a path with no
    /// component, covers nothing.
    pub fn from_words<'a>(texts: impl IntoIterator<Item = &'a str>) -> OwnerPaths {
        let mut given = Vec::new();
        for text in texts {
            let quoted = text
                .split(QUOTES)
                .skip(1)
                .step_by(2)
                .map(|quote| quote.trim().trim_end_matches(OWNER_WORD_WRAPPERS));
            let words = text
                .split_whitespace()
                .map(|word| after_option(word.trim_matches(OWNER_WORD_WRAPPERS)));
            for candidate in quoted.chain(words) {
                if !candidate.contains('/') {
                    continue;
                }
                let path = Path::new(candidate);
                if path.parts.is_empty() || given.iter().any(|g: &Given| g.path == path) {
                    continue;
                }
                let file = !candidate.ends_with('/')
                    && path
                        .parts
                        .last()
                        .is_some_and(|last| last.find('.').is_some_and(|at| at > 0));
                given.push(Given { path, file });
            }
        }
        OwnerPaths { given }
    }

    /// Whether `path` is a path the owner gave, or lies beneath a folder the owner gave.
    pub fn covers(&self, path: &Path) -> bool {
        self.given.iter().any(|g| g.covers(path))
    }

    /// The components of `path` beneath the deepest path the owner gave that covers it: the
    /// names the owner did not write (empty when the owner gave `path` itself); `None` when
    /// nothing the owner gave covers it.
    pub fn names_beneath<'a>(&self, path: &'a Path) -> Option<&'a [String]> {
        let depth = self
            .given
            .iter()
            .filter(|g| g.covers(path))
            .map(|g| g.path.parts.len())
            .max()?;
        path.parts.get(depth..)
    }
}

/// A path a call names: as the model wrote it, and what it resolves to (`None`: it cannot be
/// covered, as a `..` inside a shell line's word).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// As written, for the refusal.
    pub written: String,
    /// Normalised, resolved against `cwd` where relative and a `cwd` is given.
    pub path: Option<Path>,
    /// Whether it is a `cwd` (see [`refused`]).
    pub cwd: bool,
    /// A relative path resolved against a `cwd`, as written (normalised, with no `..`): the
    /// owner may have written it word for word (`sed -i s/bread/butter/ /r/a.txt`), and what
    /// the owner wrote is the owner's whatever `cwd` the model added (see [`refused`]).
    pub relative: Option<Path>,
}

/// The first of `named` (one call's paths) that `owner` does not cover, if any. A `cwd` is
/// also allowed when it is the folder directly holding another path of the same call that
/// the owner covers: a small model told to run `wc -l /r/work/a.txt` fills the optional `cwd`
/// with `/r/work` (issue 34's suite: most `exec` tasks of both Qwen models were refused so).
/// It gives the call nothing the owner did not: a relative element holding a `/` is still
/// resolved against it and judged, and one without a `/` is never judged (module doc), so
/// a `cwd` with no owner-given path of its own beside it stays refused. A relative element
/// is also allowed as written when the owner's words cover it so (it was allowed so without
/// a `cwd`, where the program resolves it against the default one): the Qwen 1.5B, told to
/// run `sed -i s/bread/butter/ /r/work/a.txt`, added `cwd` `/r/work`, and the sed expression,
/// resolved to `/r/work/s/bread/butter`, was refused.
pub fn refused<'a>(named: &'a [Named], owner: &OwnerPaths) -> Option<&'a Named> {
    let covered = |n: &Named| {
        n.path.as_ref().is_some_and(|p| owner.covers(p))
            || n.relative.as_ref().is_some_and(|p| owner.covers(p))
    };
    let holds_a_covered_path = |cwd: &Named| {
        named.iter().any(|other| {
            !other.cwd
                && covered(other)
                && other.path.as_ref().and_then(Path::parent).as_ref() == cwd.path.as_ref()
        })
    };
    let allowed = |n: &Named| covered(n) || (n.cwd && holds_a_covered_path(n));
    named.iter().find(|n| !allowed(n))
}

/// The paths `arguments` name, in order: every string under a key `path`, at any depth; every
/// `cwd` holding a `/`; and every element of an `argv` holding one (relative ones resolved
/// against the `cwd` beside it; see [`argv_element`]).
pub fn named(arguments: &Value) -> Vec<Named> {
    let mut out = Vec::new();
    walk(arguments, &mut out);
    out
}

/// [`named`] of `value`, into `out`.
fn walk(value: &Value, out: &mut Vec<Named>) {
    match value {
        Value::Object(object) => {
            for (key, value) in object {
                match (key.as_str(), value) {
                    ("path", Value::String(text)) => out.push(whole(text, None)),
                    ("cwd", Value::String(text)) if text.contains('/') => {
                        out.push(Named {
                            cwd: true,
                            ..whole(text, None)
                        });
                    }
                    ("argv", Value::Array(argv)) => {
                        let cwd = cwd_of(object);
                        for element in argv.iter().filter_map(Value::as_str) {
                            out.extend(argv_element(element, cwd.as_ref()));
                        }
                    }
                    _ => walk(value, out),
                }
            }
        }
        Value::Array(values) => values.iter().for_each(|v| walk(v, out)),
        _ => {}
    }
}

/// The `cwd` beside an `argv`, when it is given (an empty one is not).
fn cwd_of(object: &Map<String, Value>) -> Option<Path> {
    match object.get("cwd") {
        Some(Value::String(cwd)) if !cwd.is_empty() => Some(Path::new(cwd)),
        _ => None,
    }
}

/// The paths one `argv` element names. Without a `/`: none (a bare program name, `-l`, a
/// file name in the working directory). Starting with `/`: the element, whole. Holding white
/// space (a shell line, `["sh", "-c", "wc -l /x"]`): each word holding a `/`, and a word with
/// a `..` component cannot be covered (the shell may have changed directory). Otherwise the
/// element, whole, or after the `=` of `--output=/x`. A relative path resolves against `cwd`
/// when given, else it is judged as written.
pub fn argv_element(element: &str, cwd: Option<&Path>) -> Vec<Named> {
    if !element.contains('/') {
        return Vec::new();
    }
    if element.starts_with('/') || !element.contains(char::is_whitespace) {
        return vec![whole(after_option(element), cwd)];
    }
    element
        .split_whitespace()
        .map(after_option)
        .filter(|word| word.contains('/'))
        .map(|word| {
            let mut named = whole(word, cwd);
            if has_dot_dot(word) {
                named.path = None;
            }
            named
        })
        .collect()
}

/// Whether `text` has a `..` component.
fn has_dot_dot(text: &str) -> bool {
    text.split('/').any(|part| part == "..")
}

/// `text` as one path, resolved against `cwd` when relative.
fn whole(text: &str, cwd: Option<&Path>) -> Named {
    let (path, relative) = match cwd {
        Some(cwd) => {
            let relative = (!text.starts_with('/') && !has_dot_dot(text)).then(|| Path::new(text));
            (Path::new_beneath(cwd.clone(), text), relative)
        }
        None => (Path::new(text), None),
    };
    Named {
        written: text.to_string(),
        path: Some(path),
        cwd: false,
        relative,
    }
}

/// The path part of `--output=/x` or `of=/x`: after the first `=` when it comes before the
/// first `/` of a word that does not start with `/`; else the word.
fn after_option(word: &str) -> &str {
    match (word.find('='), word.find('/')) {
        (Some(eq), Some(slash)) if eq < slash && slash > 0 => &word[eq + 1..],
        _ => word,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn owner(text: &str) -> OwnerPaths {
        OwnerPaths::from_words([text])
    }

    fn covered(owner_text: &str, path: &str) -> bool {
        owner(owner_text).covers(&Path::new(path))
    }

    #[test]
    fn a_folder_covers_what_lies_beneath_it_on_whole_components() {
        assert!(covered("my folder is /a/b", "/a/b"));
        assert!(covered("my folder is /a/b", "/a/b/c.txt"));
        assert!(covered("my folder is /a/b.", "/a//b/./c/d"));
        assert!(!covered("my folder is /a/b", "/a/bc"));
        assert!(!covered("my folder is /a/b", "/a"));
        assert!(
            !covered("my folder is /a/b", "a/b/c"),
            "relative is not absolute"
        );
    }

    #[test]
    fn a_file_covers_itself_only() {
        assert!(covered("save it to /r/out/total.txt.", "/r/out/total.txt"));
        assert!(!covered(
            "save it to /r/out/total.txt",
            "/r/out/total.txt/x"
        ));
        assert!(!covered("save it to /r/out/total.txt", "/r/out/other.txt"));
        assert!(
            covered("use /r/v1.2/ for it", "/r/v1.2/x"),
            "a slash after it makes it a folder"
        );
        assert!(covered("the folder /home/me/.config", "/home/me/.config/x"));
    }

    #[test]
    fn dot_dot_is_resolved_before_comparing() {
        assert!(!covered("my folder is /R/a", "/R/a/../../etc/passwd"));
        assert!(!covered("my folder is /R/a", "/R/a/.."));
        assert!(covered("my folder is /R/a", "/R/a/b/../c.txt"));
        assert!(
            !covered("my folder is /R/a/../b", "/R/a/x"),
            "the owner's own .. is resolved too"
        );
        assert_eq!(Path::new("/../../x"), Path::new("/x"));
        assert_eq!(Path::new("a/../../x"), Path::new("../x"));
    }

    #[test]
    fn the_root_and_words_without_a_slash_cover_nothing() {
        assert!(!covered("either / or", "/etc/passwd"));
        assert!(!covered("save to total.txt", "total.txt"));
        assert!(!covered("", "/x"));
    }

    #[test]
    fn wrapped_quoted_and_option_paths_of_the_owner() {
        assert!(covered("(see `/r/a.txt`)", "/r/a.txt"));
        assert!(covered(
            r#"save it to "/r/My Documents/a.txt""#,
            "/r/My Documents/a.txt"
        ));
        assert!(covered("run dd of=/r/disk.img", "/r/disk.img"));
        assert!(covered("write notes/a.txt", "notes/a.txt"));
    }

    fn written(arguments: serde_json::Value) -> Vec<(String, Option<Path>)> {
        named(&arguments)
            .into_iter()
            .map(|n| (n.written, n.path))
            .collect()
    }

    #[test]
    fn the_paths_a_call_names() {
        assert_eq!(
            written(json!({"path": "/r/a.txt", "content": "/not/a/path"})),
            [("/r/a.txt".into(), Some(Path::new("/r/a.txt")))]
        );
        assert_eq!(
            written(json!({"nested": [{"path": "rel"}]})),
            [("rel".into(), Some(Path::new("rel")))]
        );
        assert_eq!(
            written(json!({"argv": ["wc", "-l", "/r/a", "b/c", "--out=/r/d"], "cwd": "/w"})),
            [
                ("/r/a".into(), Some(Path::new("/r/a"))),
                ("b/c".into(), Some(Path::new("/w/b/c"))),
                ("/r/d".into(), Some(Path::new("/r/d"))),
                ("/w".into(), Some(Path::new("/w"))),
            ]
        );
        assert_eq!(written(json!({"argv": ["ls"], "cwd": ""})), []);
    }

    fn first_refused(owner_text: &str, arguments: serde_json::Value) -> Option<String> {
        let named = named(&arguments);
        refused(&named, &owner(owner_text)).map(|n| n.written.clone())
    }

    #[test]
    fn a_cwd_is_allowed_only_as_the_folder_of_an_owner_given_path_of_the_same_call() {
        let said = "run wc -l /r/work/todo.txt /r/work/ideas.txt";
        let call = |argv: serde_json::Value, cwd: &str| json!({"argv": argv, "cwd": cwd});
        assert_eq!(
            first_refused(
                said,
                call(json!(["wc", "-l", "/r/work/todo.txt"]), "/r/work")
            ),
            None,
            "the folder of the file the owner named"
        );
        assert_eq!(
            first_refused(said, call(json!(["rm", "notes.txt"]), "/r/work")),
            Some("/r/work".into()),
            "no owner-given path beside it"
        );
        assert_eq!(
            first_refused(said, call(json!(["wc", "-l", "/r/work/todo.txt"]), "/r")),
            Some("/r".into()),
            "a folder further up"
        );
        assert_eq!(
            first_refused(said, call(json!(["cat", "/r/work/other.txt"]), "/r/work")),
            Some("/r/work/other.txt".into()),
            "a path beside it the owner did not give"
        );
        assert_eq!(
            first_refused(
                said,
                call(
                    json!(["cat", "../../etc/passwd", "/r/work/todo.txt"]),
                    "/r/work"
                )
            ),
            Some("../../etc/passwd".into()),
            "relative elements are still resolved against it and judged"
        );
        assert_eq!(
            first_refused(said, json!({"path": "/r/work/todo.txt", "cwd": "/r/work"})),
            None
        );
        assert_eq!(
            first_refused(
                "save to /r/out/",
                json!({"path": "/r/out/a.txt", "cwd": "/elsewhere"})
            ),
            Some("/elsewhere".into())
        );
    }

    #[test]
    fn a_relative_element_the_owner_wrote_passes_beside_a_cwd_and_no_other() {
        let said = "run sed -i s/bread/butter/ /r/work/shop.txt";
        let call = |argv: serde_json::Value| json!({"argv": argv, "cwd": "/r/work"});
        let sed = json!(["sed", "-i", "s/bread/butter/", "/r/work/shop.txt"]);
        assert_eq!(first_refused(said, call(sed)), None);
        let cp = json!(["cp", "/r/work/shop.txt", "s/evil/x"]);
        assert_eq!(first_refused(said, call(cp)), Some("s/evil/x".into()));
        let up = json!(["cp", "../x.txt", "/r/work/a.txt"]);
        let said_up = "copy ../x.txt to /r/work/a.txt";
        assert_eq!(first_refused(said_up, call(up)), Some("../x.txt".into()));
    }

    #[test]
    fn a_shell_lines_words_are_judged_and_a_dot_dot_among_them_never_covered() {
        let words = argv_element("wc -l /r/a.txt ../x", None);
        assert_eq!(words.len(), 2);
        assert_eq!(words[0].path, Some(Path::new("/r/a.txt")));
        assert_eq!((words[1].written.as_str(), &words[1].path), ("../x", &None));
        let absolute = argv_element("/r/a b/../../../x", None);
        assert_eq!(absolute.len(), 1, "an element starting with / is one path");
        assert_eq!(absolute[0].path, Some(Path::new("/x")));
    }
}
