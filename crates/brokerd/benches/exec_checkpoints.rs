//! What recording an `exec` under `rw_paths` costs (`docs/undo.md`), for a run that changed one
//! file, on trees of 10, 100 and 1,000 files of 4 KiB, each way: by snapshots
//! (`checkpoints::runs`: the trees taken before the run, every file kept as a blob, synced, and
//! after it, every file read again) and through an overlay (`checkpoints::layers`: the tree
//! walked for owners and sizes, a stage made, and after the run the upper directory read,
//! journalled, applied and recorded). The run itself is simulated (the file written where it
//! would land), so only brokerd's part is timed.
//!
//! `cargo bench -p brokerd --bench exec_checkpoints`.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use brokerd::checkpoints::layers::{UPPER, eligible, stage};
use brokerd::checkpoints::runs::watch;
use brokerd::checkpoints::{CheckpointSettings, Checkpoints, Recorder};
use bxcore::{DataClass, SessionId};
use rustix::fs::{Mode, OFlags};
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs timed per tree size.
const RUNS: usize = 20;
/// Each file's size.
const FILE_BYTES: usize = 4096;

fn main() {
    for files in [10, 100, 1000] {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir(&work).unwrap();
        for n in 0..files {
            let content = format!("{n:>width$}", width = FILE_BYTES);
            std::fs::write(work.join(format!("f{n}.txt")), content).unwrap();
        }
        let store = Arc::new(
            Checkpoints::open(&dir.path().join("state"), CheckpointSettings::default()).unwrap(),
        );
        let mut snapshots = Vec::new();
        let mut overlay = Vec::new();
        for run in 0..RUNS {
            let recorder = Recorder {
                store: Arc::clone(&store),
                session: SessionId::new("bench").unwrap(),
                turn: 1,
                call: run as u64,
            };
            let lock = store.tree_lock().try_lock_owned().unwrap();
            let started = Instant::now();
            let watched = watch(&recorder, DataClass::Private, vec![top(&work)], lock).unwrap();
            // The run: one file changed.
            std::fs::write(work.join("f0.txt"), format!("run {run}")).unwrap();
            watched.finish().unwrap();
            snapshots.push(started.elapsed());

            let lock = store.tree_lock().try_lock_owned().unwrap();
            let started = Instant::now();
            let (path, fd) = top(&work);
            let ids = std::fs::metadata(&work)
                .map(|m| (m.uid(), m.gid()))
                .unwrap();
            eligible(&fd, ids, store.max_bytes()).unwrap();
            let stages = dir.path().join("stages");
            std::fs::create_dir_all(&stages).unwrap();
            let (layered, dirs) = stage(
                &recorder,
                DataClass::Private,
                vec![(path, fd)],
                lock,
                &stages,
                None,
            )
            .unwrap();
            // The run: one file changed, in the upper directory.
            std::fs::write(dirs[0].join(UPPER).join("f0.txt"), format!("layer {run}")).unwrap();
            layered.finish().unwrap();
            overlay.push(started.elapsed());
        }
        for (way, samples) in [("by snapshots", snapshots), ("through an overlay", overlay)] {
            println!(
                "exec under rw_paths, {files} files of {FILE_BYTES} bytes, one changed, {way}: \
                 recording p50 {:.2} ms, max {:.2} ms",
                ms(percentile(&samples, 0.5)),
                ms(percentile(&samples, 1.0))
            );
        }
    }
}

/// The tree at `work` and a descriptor of it, as `exec` pins one.
fn top(work: &Path) -> (std::path::PathBuf, OwnedFd) {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fd = rustix::fs::open(work, flags, Mode::empty()).unwrap();
    (work.to_path_buf(), fd)
}

fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
