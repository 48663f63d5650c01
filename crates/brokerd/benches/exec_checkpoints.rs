//! What recording an `exec` under `rw_paths` costs (`checkpoints::runs`, `docs/undo.md`): the
//! trees taken before the run (every file kept as a blob, synced) and after it (every file
//! read again), for a run that changed one file, on trees of 10, 100 and 1,000 files of 4 KiB.
//!
//! `cargo bench -p brokerd --bench exec_checkpoints`.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use brokerd::checkpoints::runs::watch;
use brokerd::checkpoints::{CheckpointSettings, Checkpoints, Recorder};
use bxcore::{DataClass, SessionId};
use rustix::fs::{Mode, OFlags};
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
        let mut samples = Vec::new();
        for run in 0..RUNS {
            let recorder = Recorder {
                store: Arc::clone(&store),
                session: SessionId::new("bench").unwrap(),
                turn: 1,
                call: run as u64,
            };
            let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
            let fd = rustix::fs::open(&work, flags, Mode::empty()).unwrap();
            let lock = store.tree_lock().try_lock_owned().unwrap();
            let started = Instant::now();
            let watched = watch(
                &recorder,
                DataClass::Private,
                vec![(work.clone(), fd)],
                lock,
            )
            .unwrap();
            // The run: one file changed.
            std::fs::write(work.join("f0.txt"), format!("run {run}")).unwrap();
            watched.finish().unwrap();
            samples.push(started.elapsed());
        }
        samples.sort();
        let p50 = samples[RUNS / 2];
        let max = samples[RUNS - 1];
        println!(
            "exec under rw_paths, {files} files of {FILE_BYTES} bytes, one changed: recording \
             p50 {:.2} ms, max {:.2} ms",
            ms(p50),
            ms(max)
        );
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
