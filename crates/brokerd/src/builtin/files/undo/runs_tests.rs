#![allow(clippy::unwrap_used)]
//! A watched run's changes (made, changed, chmod-ed, removed, a directory removed with its
//! files) become records that an undo puts back byte for byte; a crash between the run and its
//! records leaves the manifest, and the next open records them, once; a tree too large to keep
//! refuses the watch.

use super::undo;
use crate::checkpoints::runs::{RUNNING, Watch, watch};
use crate::checkpoints::{CheckpointError, CheckpointSettings, Checkpoints, Record, Recorder};
use bxcore::{DataClass, SessionId};
use rustix::fs::{Mode, OFlags};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;

struct Bed {
    dir: tempfile::TempDir,
}

impl Bed {
    fn new() -> Bed {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("work/sub")).unwrap();
        std::fs::write(dir.path().join("work/notes.txt"), "one\ntwo\n").unwrap();
        std::fs::write(dir.path().join("work/sub/gone.txt"), "kept before\n").unwrap();
        std::fs::write(dir.path().join("work/mode.sh"), "echo\n").unwrap();
        Bed { dir }
    }

    fn work(&self) -> PathBuf {
        self.dir.path().join("work").canonicalize().unwrap()
    }

    fn open(&self, settings: CheckpointSettings) -> Arc<Checkpoints> {
        Arc::new(Checkpoints::open(&self.dir.path().join("state"), settings).unwrap())
    }

    fn recorder(&self, store: &Arc<Checkpoints>) -> Recorder {
        Recorder {
            store: Arc::clone(store),
            session: SessionId::new("s").unwrap(),
            turn: 1,
            call: 7,
        }
    }

    fn watch(&self, store: &Arc<Checkpoints>) -> Result<Watch, CheckpointError> {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::open(self.work(), flags, Mode::empty()).unwrap();
        let lock = store.tree_lock().try_lock_owned().unwrap();
        watch(
            &self.recorder(store),
            DataClass::Private,
            vec![(self.work(), fd)],
            lock,
        )
    }

    /// What a run would do: `sed -i`, a new file, a chmod, a directory removed.
    fn run(&self) {
        let work = self.work();
        std::fs::write(work.join("notes.txt"), "one\nTWO\n").unwrap();
        std::fs::write(work.join("made.txt"), "new\n").unwrap();
        std::fs::set_permissions(work.join("mode.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::fs::remove_dir_all(work.join("sub")).unwrap();
    }

    fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.work().join(rel)).ok()
    }

    fn mode(&self, rel: &str) -> u32 {
        std::fs::metadata(self.work().join(rel))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    }

    fn assert_as_before(&self) {
        assert_eq!(self.read("notes.txt").as_deref(), Some("one\ntwo\n"));
        assert_eq!(self.read("sub/gone.txt").as_deref(), Some("kept before\n"));
        assert_eq!(self.read("made.txt"), None);
        assert_ne!(self.mode("mode.sh"), 0o755);
    }
}

fn session() -> SessionId {
    SessionId::new("s").unwrap()
}

#[test]
fn what_a_run_changed_is_recorded_and_undone_byte_for_byte() {
    let bed = Bed::new();
    let store = bed.open(CheckpointSettings::default());
    let watch = bed.watch(&store).unwrap();
    bed.run();
    assert_eq!(watch.finish().unwrap(), 4);

    let records = store.records(&session());
    let removed: Vec<&Record> = records.iter().filter(|r| r.removed).collect();
    assert_eq!(removed.len(), 1);
    assert!(removed[0].rel.ends_with("sub/gone.txt"));
    assert!(records.iter().all(|r| r.call == 7 && r.turn == 1));
    let diffs = crate::checkpoints::diff::diffs(&store, &session(), Some(1));
    let notes = diffs
        .iter()
        .find(|d| d.path.ends_with("notes.txt"))
        .unwrap();
    assert!(notes.diff.contains("-two\n+TWO\n"), "{}", notes.diff);
    let gone = diffs.iter().find(|d| d.path.ends_with("gone.txt")).unwrap();
    assert!(gone.diff.contains("+++ /dev/null"), "{}", gone.diff);
    assert_eq!(
        std::fs::read_dir(store.dir().join(RUNNING))
            .unwrap()
            .count(),
        0,
        "the run's manifest is gone once its records are in"
    );

    undo(&store, &session(), 1, false).unwrap();
    bed.assert_as_before();
}

#[test]
fn a_run_that_changed_nothing_leaves_no_record_and_its_trees_blobs_serve_the_next_run() {
    let bed = Bed::new();
    let store = bed.open(CheckpointSettings::default());
    assert_eq!(bed.watch(&store).unwrap().finish().unwrap(), 0);
    assert!(store.records(&session()).is_empty());
    let blob_dir = store.dir().join("blobs");
    let blobs = || std::fs::read_dir(&blob_dir).unwrap().count();
    assert_eq!(blobs(), 3, "the tree's three files, kept for the next run");
    let watched = bed.watch(&store).unwrap();
    bed.run();
    watched.finish().unwrap();
    // notes.txt, gone.txt and mode.sh as before, and notes.txt and made.txt as after.
    assert_eq!(blobs(), 5);
    drop(store);
    let store = bed.open(CheckpointSettings::default());
    let records_hold = store.records(&session()).len();
    assert_eq!(records_hold, 4);
    assert_eq!(
        blobs(),
        5,
        "after a restart only what the records hold is kept: here all of them"
    );
}

#[test]
fn a_crash_after_the_run_leaves_its_changes_recorded_at_the_next_start_once() {
    let bed = Bed::new();
    let store = bed.open(CheckpointSettings::default());
    let watch = bed.watch(&store).unwrap();
    bed.run();
    // kill -9: neither `finish` nor the drop runs.
    std::mem::forget(watch);
    drop(store);

    let store = bed.open(CheckpointSettings::default());
    assert_eq!(store.records(&session()).len(), 4);
    drop(store);
    let store = bed.open(CheckpointSettings::default());
    assert_eq!(store.records(&session()).len(), 4, "recorded once");
    undo(&store, &session(), 1, false).unwrap();
    bed.assert_as_before();
}

#[test]
fn a_watch_dropped_unfinished_records_the_run_as_it_drops() {
    let bed = Bed::new();
    let store = bed.open(CheckpointSettings::default());
    let watch = bed.watch(&store).unwrap();
    bed.run();
    drop(watch);
    assert_eq!(store.records(&session()).len(), 4);
    assert!(
        store.tree_lock().try_lock().is_ok(),
        "the lock goes with the watch"
    );
}

#[test]
fn a_tree_larger_than_max_bytes_refuses_the_watch_and_writes_no_manifest() {
    let bed = Bed::new();
    let store = bed.open(CheckpointSettings {
        max_bytes: 10,
        ..CheckpointSettings::default()
    });
    let error = bed.watch(&store).unwrap_err().to_string();
    assert!(error.contains("more bytes than 10"), "{error}");
    assert_eq!(
        std::fs::read_dir(store.dir().join(RUNNING))
            .unwrap()
            .count(),
        0
    );
}

#[test]
fn a_file_changed_after_the_run_blocks_its_undo() {
    let bed = Bed::new();
    let store = bed.open(CheckpointSettings::default());
    let watch = bed.watch(&store).unwrap();
    bed.run();
    watch.finish().unwrap();
    std::fs::write(bed.work().join("made.txt"), "the owner's now\n").unwrap();
    let error = undo(&store, &session(), 1, false).unwrap_err().to_string();
    assert!(
        error.contains("made.txt was changed since turn 1"),
        "{error}"
    );
    assert_eq!(
        bed.read("notes.txt").as_deref(),
        Some("one\nTWO\n"),
        "nothing undone"
    );
}

#[test]
fn a_tree_a_run_left_unreadable_after_a_crash_does_not_keep_the_store_from_opening() {
    let bed = Bed::new();
    let store = bed.open(CheckpointSettings::default());
    let watched = bed.watch(&store).unwrap();
    // The run nests directories past what a walk goes into, then brokerd is killed.
    let mut deep = bed.work();
    for _ in 0..=crate::checkpoints::tree::MAX_TREE_DEPTH {
        deep.push("d");
    }
    std::fs::create_dir_all(&deep).unwrap();
    std::mem::forget(watched);
    drop(store);
    let store = bed.open(CheckpointSettings::default());
    assert!(store.records(&session()).is_empty());
    assert_eq!(
        std::fs::read_dir(store.dir().join(RUNNING))
            .unwrap()
            .count(),
        0,
        "the run's manifest is gone: it is not tried at every start"
    );
}
