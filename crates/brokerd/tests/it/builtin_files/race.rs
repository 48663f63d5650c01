//! The check-then-open race: a directory under the root is swapped for a symlink to an outside
//! directory (and back) as fast as a thread can, while the tools read, list and write under it.
//! No call may ever return the outside directory's content or write into it.

use super::{Tree, call};
use brokerd::builtin::files::{ListDir, ReadFile, WriteFile};
use rustix::fs::{CWD, RenameFlags, renameat_with};
use serde_json::json;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the tools are run against the swapping, in milliseconds.
const RACE_MS: u64 = 3000;

/// A thread that atomically exchanges two names until stopped; joins to its swap count.
struct Swapper {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<u64>,
}

impl Swapper {
    fn start(a: PathBuf, b: PathBuf) -> Swapper {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            let mut swaps = 0;
            while !flag.load(Ordering::Relaxed) {
                renameat_with(CWD, &a, CWD, &b, RenameFlags::EXCHANGE).unwrap();
                swaps += 1;
            }
            swaps
        });
        Swapper { stop, handle }
    }

    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap()
    }
}

/// What the calls of one tool came to.
#[derive(Debug, Default)]
struct Tally {
    ok: u64,
    refused: u64,
    escaped: u64,
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapping_a_directory_for_a_symlink_never_leads_outside() {
    let t = Tree::new();
    // `root/d` is a real directory and `root/x` a symlink to `outside/`; the swapper exchanges
    // the two names, so `root/d` is now the one, now the other. Both sides hold a file `f`.
    fs::create_dir(t.root.join("d")).unwrap();
    fs::write(t.root.join("d/f"), "inside\n").unwrap();
    fs::write(t.outside.join("f"), "secret\n").unwrap();
    symlink(&t.outside, t.root.join("x")).unwrap();
    let outside_names = names(&t.outside);

    let (read_g, list_g, write_g) = (
        t.grant("read_file"),
        t.grant("list_dir"),
        t.grant("write_file"),
    );
    let (file, dir, target) = (t.root_str("d/f"), t.root_str("d"), t.root_str("d/w"));
    let (mut reads, mut lists, mut writes) = (Tally::default(), Tally::default(), Tally::default());
    let swapper = Swapper::start(t.root.join("d"), t.root.join("x"));
    let deadline = Instant::now() + Duration::from_millis(RACE_MS);
    while Instant::now() < deadline {
        match call(&ReadFile, &read_g, json!({ "path": file })).await {
            Ok(out) if out.content.contains("secret") => reads.escaped += 1,
            Ok(_) => reads.ok += 1,
            Err(_) => reads.refused += 1,
        }
        match call(&ListDir, &list_g, json!({ "path": dir })).await {
            Ok(out) if out.content.contains("secret.txt") => lists.escaped += 1,
            Ok(_) => lists.ok += 1,
            Err(_) => lists.refused += 1,
        }
        let args = json!({ "path": target, "content": "written", "overwrite": true });
        let result = call(&WriteFile, &write_g, args).await;
        // A write that escaped leaves `w` (or a temporary file) outside: count it, clean up.
        let landed: Vec<String> = names(&t.outside)
            .into_iter()
            .filter(|n| !outside_names.contains(n))
            .collect();
        if landed.is_empty() {
            match result {
                Ok(_) => writes.ok += 1,
                Err(_) => writes.refused += 1,
            }
        } else {
            writes.escaped += 1;
            for name in landed {
                fs::remove_file(t.outside.join(name)).unwrap();
            }
        }
    }
    let swaps = swapper.finish();
    let report = format!("{swaps} swaps; read {reads:?}, list {lists:?}, write {writes:?}");
    assert!(swaps > 0, "{report}");
    // The tools must still work under the race, not refuse everything.
    assert!(reads.ok + lists.ok + writes.ok > 0, "{report}");
    assert_eq!(
        (reads.escaped, lists.escaped, writes.escaped),
        (0, 0, 0),
        "{report}"
    );
    assert_eq!(fs::read_to_string(t.outside.join("f")).unwrap(), "secret\n");
    assert_eq!(names(&t.outside), outside_names, "{report}");
    eprintln!("{report}");
}
