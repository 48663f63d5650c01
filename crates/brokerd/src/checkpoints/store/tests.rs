#![allow(clippy::unwrap_used)]
//! The store: records survive a restart, a crash between the record and the rename settles to
//! "old file, no record" or "new file, its record", and the bounds drop the oldest first.

use super::*;

/// A state dir with a root holding `notes/a.txt`.
struct Bed {
    dir: tempfile::TempDir,
}

impl Bed {
    fn new() -> Bed {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("root/notes")).unwrap();
        Bed { dir }
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    fn open(&self, settings: CheckpointSettings) -> Checkpoints {
        Checkpoints::open(&self.state(), settings).unwrap()
    }
}

fn session(name: &str) -> SessionId {
    SessionId::new(name).unwrap()
}

/// A write of `after` over `before` in `session`'s `turn`.
fn write<'a>(
    session: &'a SessionId,
    root: &'a Path,
    turn: u64,
    before: Option<&'a [u8]>,
    after: &'a [u8],
) -> NewWrite<'a> {
    NewWrite {
        session,
        turn,
        call: turn,
        root,
        rel: Path::new("notes/a.txt"),
        before: before.map(|b| (b, 0o644)),
        after,
        temp: None,
        class: DataClass::Private,
    }
}

#[test]
fn a_done_write_is_kept_with_its_contents_across_a_restart() {
    let bed = Bed::new();
    let s = session("s");
    let root = bed.root();
    let store = bed.open(CheckpointSettings::default());
    let pending = store
        .begin(&write(&s, &root, 1, Some(b"old"), b"new"))
        .unwrap();
    store.done(pending).unwrap();
    drop(store);
    let store = bed.open(CheckpointSettings::default());
    let records = store.records(&s);
    assert_eq!(records.len(), 1);
    let before = records[0].before.as_ref().unwrap();
    assert_eq!(store.blob(&before.sha256).unwrap(), b"old");
    assert_eq!(store.blob(&records[0].after_sha256).unwrap(), b"new");
    assert!(store.records(&session("other")).is_empty());
    let mode = std::fs::metadata(bed.state().join(DIR)).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o700
    );
}

#[test]
fn a_crash_between_the_record_and_the_rename_leaves_old_file_no_record_or_new_file_its_record() {
    let bed = Bed::new();
    let s = session("s");
    let root = bed.root();
    let file = root.join("notes/a.txt");
    std::fs::write(&file, "old").unwrap();
    // Killed before the rename: the old file is there; its record goes, and so does the
    // temporary file the write had begun (named in the record), but nothing else of the name.
    let store = bed.open(CheckpointSettings::default());
    let temp = root.join("notes/.brokerd-write-1-1.tmp");
    std::fs::write(&temp, "ne").unwrap();
    let elsewhere = root.join(".brokerd-write-1-1.tmp");
    std::fs::write(&elsewhere, "not the write's").unwrap();
    let _never_settled = store
        .begin(&NewWrite {
            temp: Some(".brokerd-write-1-1.tmp"),
            ..write(&s, &root, 1, Some(b"old"), b"new")
        })
        .unwrap();
    drop(store);
    let store = bed.open(CheckpointSettings::default());
    assert!(store.records(&s).is_empty());
    assert_eq!(std::fs::read(&file).unwrap(), b"old");
    assert!(!temp.exists(), "the write's temporary file is removed");
    assert!(elsewhere.exists());
    // Killed after the rename, before `done`: the new file is there, with its record.
    let _never_settled = store
        .begin(&write(&s, &root, 2, Some(b"old"), b"new"))
        .unwrap();
    std::fs::write(&file, "new").unwrap();
    drop(store);
    let store = bed.open(CheckpointSettings::default());
    let records = store.records(&s);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].turn, 2);
}

#[test]
fn a_line_cut_short_by_a_crash_is_left_out_and_the_rest_read() {
    let bed = Bed::new();
    let s = session("s");
    let root = bed.root();
    let store = bed.open(CheckpointSettings::default());
    let pending = store.begin(&write(&s, &root, 1, None, b"one")).unwrap();
    store.done(pending).unwrap();
    drop(store);
    let index = bed.state().join(DIR).join(INDEX);
    let mut file = OpenOptions::new().append(true).open(&index).unwrap();
    file.write_all(b"{\"seq\":2,\"sta").unwrap();
    let store = bed.open(CheckpointSettings::default());
    assert_eq!(store.records(&s).len(), 1);
}

#[test]
fn past_keep_turns_or_max_bytes_the_oldest_go_first_and_are_counted() {
    let bed = Bed::new();
    let (s, t) = (session("s"), session("t"));
    let root = bed.root();
    let store = bed.open(CheckpointSettings {
        keep_turns: 2,
        ..CheckpointSettings::default()
    });
    for turn in 1..=3 {
        let after = format!("turn {turn}");
        let pending = store
            .begin(&write(&s, &root, turn, None, after.as_bytes()))
            .unwrap();
        store.done(pending).unwrap();
    }
    let turns: Vec<u64> = store.records(&s).iter().map(|r| r.turn).collect();
    assert_eq!(turns, [2, 3]);
    assert_eq!(store.dropped(), 1);
    let line = store.status_line();
    assert!(
        line.starts_with("2 write(s) of 1 session(s) kept, 12 of "),
        "{line}"
    );
    assert!(line.contains("; 1 dropped, oldest first"), "{line}");

    // 10 bytes: each write's 4 new bytes fit twice, not three times.
    let store = Checkpoints::open(
        &bed.dir.path().join("small"),
        CheckpointSettings {
            max_bytes: 10,
            ..CheckpointSettings::default()
        },
    )
    .unwrap();
    for (turn, after) in [(1, b"aaaa"), (2, b"bbbb"), (3, b"cccc")] {
        let pending = store.begin(&write(&t, &root, turn, None, after)).unwrap();
        store.done(pending).unwrap();
    }
    let records = store.records(&t);
    let turns: Vec<u64> = records.iter().map(|r| r.turn).collect();
    assert_eq!(turns, [2, 3]);
    assert_eq!(
        store.blob(&digest(b"aaaa")),
        None,
        "the dropped blob is removed"
    );
}
