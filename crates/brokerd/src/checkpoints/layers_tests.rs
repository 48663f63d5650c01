#![allow(clippy::unwrap_used)]
//! The crash points of the overlay way (`layers`): a journal a kill -9 left is applied at the
//! next open and recorded once, leaving alone what something else changed since; a stage
//! left without a journal is removed and the tree untouched; a run cut short applies nothing.

use super::apply::TEMP_PREFIX;
use super::layers::{JOURNAL_SUFFIX, Journal, STAGES, UPPER, eligible, stage};
use super::runs::RUNNING;
use super::tree::Entry;
use super::upper::Step;
use super::{CheckpointSettings, Checkpoints, Recorder, digest};
use bxcore::{DataClass, SessionId};
use rustix::fs::{Mode, OFlags};
use std::path::{Path, PathBuf};
use std::sync::Arc;

struct Bed {
    dir: tempfile::TempDir,
}

impl Bed {
    fn new() -> Bed {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("work")).unwrap();
        std::fs::write(dir.path().join("work/notes.txt"), "one\n").unwrap();
        std::fs::write(dir.path().join("work/gone.txt"), "bye\n").unwrap();
        Bed { dir }
    }

    fn work(&self) -> PathBuf {
        self.dir.path().join("work").canonicalize().unwrap()
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn open(&self) -> Checkpoints {
        Checkpoints::open(&self.state(), CheckpointSettings::default()).unwrap()
    }

    fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.work().join(rel)).ok()
    }

    /// The journal of a run that edited notes.txt, removed gone.txt, made a directory and a
    /// symlink, written where a kill -9 after it was synced leaves it.
    fn leave_journal(&self, store: &Checkpoints) {
        for content in [&b"one\n"[..], b"ONE\n", b"bye\n"] {
            store.put_blob(content).unwrap();
        }
        let journal = journal(
            self.work(),
            vec![
                Step::Write {
                    rel: "notes.txt".into(),
                    before: Some(entry(b"one\n")),
                    after: entry(b"ONE\n"),
                },
                Step::Remove {
                    rel: "gone.txt".into(),
                    before: Some(entry(b"bye\n")),
                },
                Step::MakeDir {
                    rel: "d".into(),
                    mode: 0o750,
                },
                Step::Symlink {
                    rel: "d/link".into(),
                    target: "../notes.txt".into(),
                },
            ],
        );
        let file = self.journal_file();
        std::fs::write(&file, serde_json::to_vec(&journal).unwrap()).unwrap();
    }

    fn journal_file(&self) -> PathBuf {
        self.state()
            .join("checkpoints")
            .join(RUNNING)
            .join(format!("1-0{JOURNAL_SUFFIX}"))
    }
}

/// The journal of session `s`'s call 3 in turn 1, with `steps` in the tree at `work`.
fn journal(work: PathBuf, steps: Vec<Step>) -> Journal {
    Journal {
        session: session(),
        turn: 1,
        call: 3,
        class: DataClass::Private,
        owner: None,
        trees: vec![(work, steps)],
    }
}

/// A file of `content`, mode 0644.
fn entry(content: &[u8]) -> Entry {
    Entry {
        sha256: digest(content),
        bytes: content.len() as u64,
        mode: 0o644,
    }
}

fn session() -> SessionId {
    SessionId::new("s").unwrap()
}

fn recorded(store: &Checkpoints) -> Vec<String> {
    let mut rels: Vec<String> = store
        .records(&session())
        .iter()
        .map(|r| r.rel.display().to_string())
        .collect();
    rels.sort();
    rels
}

#[test]
fn a_journal_a_crash_left_is_applied_at_the_next_open_and_recorded_once() {
    let bed = Bed::new();
    let store = bed.open();
    bed.leave_journal(&store);
    // Killed after the first step was applied, and while the second's file was being made.
    std::fs::write(bed.work().join("notes.txt"), "ONE\n").unwrap();
    let temp = bed.work().join(format!("{TEMP_PREFIX}1-7"));
    std::fs::write(&temp, "half").unwrap();
    drop(store);

    let store = bed.open();
    assert!(!temp.exists(), "the killed apply's temporary file is left");
    assert_eq!(bed.read("notes.txt").as_deref(), Some("ONE\n"));
    let made = std::fs::metadata(bed.work().join("d")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&made.permissions()) & 0o777,
        0o750
    );
    assert_eq!(bed.read("gone.txt"), None);
    assert_eq!(
        std::fs::read_link(bed.work().join("d/link")).unwrap(),
        Path::new("../notes.txt")
    );
    assert_eq!(recorded(&store), ["gone.txt", "notes.txt"]);
    assert!(!bed.journal_file().exists());

    // Killed after the records were added, before the journal was removed: not twice.
    bed.leave_journal(&store);
    drop(store);
    let store = bed.open();
    assert_eq!(recorded(&store), ["gone.txt", "notes.txt"]);
    assert!(!bed.journal_file().exists());
}

#[test]
fn a_step_whose_file_something_else_changed_since_is_not_applied_nor_recorded() {
    let bed = Bed::new();
    let store = bed.open();
    bed.leave_journal(&store);
    std::fs::write(bed.work().join("notes.txt"), "theirs\n").unwrap();
    drop(store);

    let store = bed.open();
    assert_eq!(bed.read("notes.txt").as_deref(), Some("theirs\n"));
    assert_eq!(bed.read("gone.txt"), None);
    assert_eq!(recorded(&store), ["gone.txt"]);
}

#[test]
fn a_stage_a_crash_left_without_its_journal_is_removed_and_the_tree_untouched() {
    let bed = Bed::new();
    drop(bed.open());
    let upper = bed
        .state()
        .join("checkpoints")
        .join(STAGES)
        .join("1-0/0")
        .join(UPPER);
    std::fs::create_dir_all(&upper).unwrap();
    std::fs::write(upper.join("notes.txt"), "half a run\n").unwrap();

    let store = bed.open();
    let stages = bed.state().join("checkpoints").join(STAGES);
    assert_eq!(std::fs::read_dir(stages).unwrap().count(), 0);
    assert_eq!(bed.read("notes.txt").as_deref(), Some("one\n"));
    assert!(recorded(&store).is_empty());
}

#[test]
fn a_run_cut_short_applies_nothing_and_leaves_no_stage() {
    let bed = Bed::new();
    let store = Arc::new(bed.open());
    let recorder = Recorder {
        store: Arc::clone(&store),
        session: session(),
        turn: 1,
        call: 3,
    };
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let top = rustix::fs::open(bed.work(), flags, Mode::empty()).unwrap();
    let lock = store.tree_lock().try_lock_owned().unwrap();
    let stages = bed.state().join("checkpoints").join(STAGES);
    let (layered, dirs) = stage(
        &recorder,
        DataClass::Private,
        vec![(bed.work(), top)],
        lock,
        &stages,
        None,
    )
    .unwrap();
    std::fs::write(dirs[0].join(UPPER).join("notes.txt"), "written\n").unwrap();
    drop(layered);
    assert_eq!(std::fs::read_dir(&stages).unwrap().count(), 0);
    assert_eq!(bed.read("notes.txt").as_deref(), Some("one\n"));
    assert!(recorded(&store).is_empty());
    assert!(
        store.tree_lock().try_lock_owned().is_ok(),
        "the lock is let go"
    );
}

#[test]
fn a_step_beneath_a_directory_swapped_for_a_symlink_writes_nothing_outside_the_tree() {
    let bed = Bed::new();
    let outside = bed.dir.path().join("outside");
    std::fs::create_dir_all(outside.join("e")).unwrap();
    // The run made `d/e/` and wrote `d/e/f`; since, `d` became a symlink to a directory
    // outside that has an `e` too.
    std::os::unix::fs::symlink(&outside, bed.work().join("d")).unwrap();
    let store = bed.open();
    store.put_blob(b"planted\n").unwrap();
    let journal = journal(
        bed.work(),
        vec![Step::Write {
            rel: "d/e/f".into(),
            before: None,
            after: entry(b"planted\n"),
        }],
    );
    std::fs::write(bed.journal_file(), serde_json::to_vec(&journal).unwrap()).unwrap();
    drop(store);

    let store = bed.open();
    assert!(!outside.join("e/f").exists(), "written through the symlink");
    assert!(recorded(&store).is_empty());
}

#[test]
fn a_tree_is_eligible_only_when_all_of_it_is_the_sandbox_users_and_no_file_is_too_large() {
    use std::os::unix::fs::MetadataExt;
    let bed = Bed::new();
    let me = std::fs::metadata(bed.work()).unwrap();
    let ids = (me.uid(), me.gid());
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let top = rustix::fs::open(bed.work(), flags, Mode::empty()).unwrap();
    assert_eq!(eligible(&top, ids, 1024), Ok(()));
    let big = eligible(&top, ids, 3).unwrap_err();
    assert!(big.contains("larger than max_bytes"), "{big}");
    let other = eligible(&top, (ids.0.wrapping_add(1), ids.1), 1024).unwrap_err();
    assert!(other.contains("not the sandbox user's"), "{other}");
}
