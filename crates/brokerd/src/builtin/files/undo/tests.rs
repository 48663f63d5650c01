#![allow(clippy::unwrap_used)]
//! Undo through `write_file` itself: files written and rewritten by two turns come back byte
//! for byte (a file a turn made is removed), a file changed since blocks the whole undo and
//! names it, and a dry run changes nothing. The diffs show each write.

use super::*;
use crate::builtin::files::write::{Target, write_file};
use crate::checkpoints::{CheckpointSettings, Recorder, diff};
use bxcore::DataClass;
use std::sync::Arc;

struct Bed {
    dir: tempfile::TempDir,
    store: Arc<Checkpoints>,
}

impl Bed {
    fn new() -> Bed {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("root")).unwrap();
        let store = Checkpoints::open(&dir.path().join("state"), CheckpointSettings::default());
        Bed {
            store: Arc::new(store.unwrap()),
            dir,
        }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root").canonicalize().unwrap()
    }

    /// `write_file` of `content` to `name` in `turn`, recorded.
    fn write(&self, turn: u64, name: &str, content: &str) {
        let recorder = Recorder {
            store: Arc::clone(&self.store),
            session: session(),
            turn,
            call: turn,
        };
        let path = self.root().join(name);
        let roots = [self.root()];
        let target = Target {
            arg: &path,
            roots: &roots,
            record: Some((&recorder, DataClass::Private)),
        };
        write_file(&target, content, true).unwrap();
    }

    fn read(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.root().join(name)).ok()
    }
}

fn session() -> SessionId {
    SessionId::new("s").unwrap()
}

#[test]
fn the_files_two_turns_wrote_come_back_byte_for_byte_and_a_made_one_goes() {
    let bed = Bed::new();
    std::fs::write(bed.root().join("a.txt"), "original\n").unwrap();
    bed.write(1, "a.txt", "turn one\n");
    bed.write(2, "a.txt", "turn two\n");
    bed.write(2, "new.txt", "made by turn two\n");

    let dry = undo(&bed.store, &session(), 1, true).unwrap();
    assert_eq!(dry.len(), 3);
    assert_eq!(
        bed.read("a.txt").as_deref(),
        Some("turn two\n"),
        "a dry run changes nothing"
    );

    let done = undo(&bed.store, &session(), 2, false).unwrap();
    assert_eq!(done.len(), 2);
    assert!(
        done.iter()
            .any(|p| p.removed && p.path.ends_with("new.txt"))
    );
    assert_eq!(bed.read("a.txt").as_deref(), Some("turn one\n"));
    assert_eq!(bed.read("new.txt"), None);

    undo(&bed.store, &session(), 1, false).unwrap();
    assert_eq!(bed.read("a.txt").as_deref(), Some("original\n"));
    assert!(bed.store.records(&session()).is_empty());
}

#[test]
fn a_file_changed_since_blocks_the_undo_and_is_named() {
    let bed = Bed::new();
    bed.write(1, "a.txt", "agent\n");
    bed.write(1, "b.txt", "agent\n");
    std::fs::write(bed.root().join("b.txt"), "the owner's edit\n").unwrap();
    let err = undo(&bed.store, &session(), 1, false).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("b.txt was changed since turn 1"),
        "{message}"
    );
    assert_eq!(
        bed.read("a.txt").as_deref(),
        Some("agent\n"),
        "nothing was undone"
    );
    assert_eq!(bed.read("b.txt").as_deref(), Some("the owner's edit\n"));
}

#[test]
fn a_turns_writes_show_as_unified_diffs() {
    let bed = Bed::new();
    std::fs::write(bed.root().join("a.txt"), "one\ntwo\n").unwrap();
    bed.write(1, "a.txt", "one\nTWO\n");
    bed.write(2, "b.txt", "new\n");
    let turn_one = diff::diffs(&bed.store, &session(), Some(1));
    assert_eq!(turn_one.len(), 1);
    let text = &turn_one[0].diff;
    assert!(text.contains("-two\n+TWO\n"), "{text}");
    assert!(text.starts_with("--- a/"), "{text}");
    let all = diff::diffs(&bed.store, &session(), None);
    assert!(all[1].diff.starts_with("--- /dev/null"), "{}", all[1].diff);
}
