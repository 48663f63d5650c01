#![allow(clippy::unwrap_used, clippy::expect_used)]
//! kill -9 of brokerd while `write_file` writes: each round starts brokerd, asks it to write a
//! large file over the last round's, kills it (SIGKILL) at one of two points, as soon as the
//! write's temporary file appears or as soon as its checkpoint is recorded pending (before or
//! after the rename: whichever the kill lands on), starts it again and checks that the file
//! and the records agree: the new content with its record, or the old content and no record;
//! never a new file without one, nor a half; and no temporary file left. And kill -9 while
//! an `exec` under `rw_paths` runs, after it changed files: the next start records them, and
//! an undo puts them back.

use http::Method;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Rounds of write-and-kill.
const ROUNDS: u8 = 4;
/// How long the test waits for brokerd to serve, or for a write to start, in milliseconds.
pub(crate) const WAIT_MS: u64 = 20_000;
/// The size of each write (under `write_file`'s 1 MiB): large enough to take a while.
const WRITE_BYTES: usize = 900 * 1024;

/// brokerd on `dir`'s config, once it says it serves.
pub(crate) fn start(dir: &Path) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_brokerd"))
        .args(["--config", &dir.join("brokerd.toml").display().to_string()])
        .args(["--socket", &dir.join("brokerd.sock").display().to_string()])
        .args(["--state-dir", &dir.join("state").display().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    crate::common::wait_serving(&mut child, WAIT_MS);
    child
}

/// Kills brokerd (SIGKILL), waits for it, and drops the call it was answering.
pub(crate) fn kill9<T>(child: &mut Child, sent: &tokio::task::JoinHandle<T>) {
    kill(
        Pid::from_raw(i32::try_from(child.id()).unwrap()),
        Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    sent.abort();
}

/// Whether round `round`'s checkpoint is recorded, pending, in `state`'s index.
fn recorded(state: &Path, round: u8) -> bool {
    std::fs::read_to_string(state.join("checkpoints/index.jsonl")).is_ok_and(|index| {
        index.lines().any(|line| {
            line.contains("\"state\":\"pending\"") && line.contains(&format!("\"turn\":{round},"))
        })
    })
}

/// Whether a write's temporary file is in `root`.
fn writing(root: &Path) -> bool {
    std::fs::read_dir(root).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".brokerd-write-")
        })
    })
}

#[tokio::test]
async fn a_kill_during_a_write_leaves_the_old_file_and_no_record_or_the_new_file_and_its_record() {
    let dir = tempfile::tempdir().unwrap();
    let root: PathBuf = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let root = root.canonicalize().unwrap();
    let file = root.join("big.txt");
    std::fs::write(&file, "x".repeat(WRITE_BYTES)).unwrap();
    std::fs::write(
        dir.path().join("brokerd.toml"),
        format!("[[grants]]\ntool = \"write_file\"\npaths = [{root:?}]\n"),
    )
    .unwrap();
    let socket = dir.path().join("brokerd.sock");
    for round in 1..=ROUNDS {
        let old = std::fs::read(&file).unwrap();
        let new = char::from(b'a' + round).to_string().repeat(WRITE_BYTES);
        let mut child = start(dir.path());
        let arguments = serde_json::json!({ "path": file, "content": new, "overwrite": true });
        let call =
            crate::common::request("s", u64::from(round), "write_file", &arguments.to_string());
        let body = serde_json::to_vec(&call).unwrap();
        let asked = socket.clone();
        let sent = tokio::spawn(async move {
            crate::common::http(&asked, Method::POST, "/v1/call", Some(body)).await
        });
        // Killed once the write is under way (odd rounds: its temporary file; even rounds: its
        // pending checkpoint), or once it is over when it was too quick to see.
        let state = dir.path().join("state");
        let at_point = || match round % 2 {
            1 => writing(&root),
            _ => recorded(&state, round),
        };
        let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
        while !at_point() && !sent.is_finished() {
            assert!(Instant::now() < deadline, "the write never started");
            tokio::task::yield_now().await;
        }
        kill9(&mut child, &sent);

        let mut again = start(dir.path());
        // The killed write's temporary file, named in its pending record, is gone.
        assert!(!writing(&root), "round {round}: a temporary file was left");
        let path = format!("/v1/diff?session=s&turn={round}");
        let (status, diff) = crate::common::http_json(&socket, Method::GET, &path, None).await;
        assert_eq!(status, http::StatusCode::OK, "{diff}");
        let records = diff["files"].as_array().unwrap().len();
        let now = std::fs::read(&file).unwrap();
        if now == new.as_bytes() {
            assert_eq!(records, 1, "round {round}: the new file has no record");
        } else {
            assert_eq!(now, old, "round {round}: the file is neither old nor new");
            assert_eq!(
                records, 0,
                "round {round}: a record of a write that did not happen"
            );
        }
        let _ = again.kill();
        again.wait().unwrap();
    }
}

/// A call being answered: its status and body once it ends.
pub(crate) type Answer = tokio::task::JoinHandle<(http::StatusCode, Vec<u8>)>;

/// brokerd on `dir` with an exec grant (a shell, `rw_paths = [root]`), answering a call of
/// session `s` that writes `notes.txt` ("during") and `made.txt` in `root` and then sleeps a
/// minute: the brokerd, its socket and the call.
pub(crate) async fn exec_that_sleeps(dir: &Path, root: &Path) -> (Child, PathBuf, Answer) {
    std::fs::write(
        dir.join("brokerd.toml"),
        format!("[[grants]]\ntool = \"exec\"\nshell = true\nrw_paths = [{root:?}]\n"),
    )
    .unwrap();
    let socket = dir.join("brokerd.sock");
    let child = start(dir);
    wait_sandbox(&socket).await;
    let line = "echo during > notes.txt && echo new > made.txt && exec sleep 60";
    let arguments = serde_json::json!({ "argv": ["sh", "-c", line], "cwd": root });
    let call = crate::common::request("s", 1, "exec", &arguments.to_string());
    let body = serde_json::to_vec(&call).unwrap();
    let asked = socket.clone();
    let sent = tokio::spawn(async move {
        crate::common::http(&asked, Method::POST, "/v1/call", Some(body)).await
    });
    (child, socket, sent)
}

/// Waits until brokerd at `socket` says its sandbox is made (the probe runs after the bind).
async fn wait_sandbox(socket: &Path) {
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    loop {
        let (_, health) = crate::common::http_json(socket, Method::GET, "/v1/health", None).await;
        let exec = health["exec"].as_str().unwrap_or_default().to_owned();
        assert!(!exec.starts_with("unavailable"), "the sandbox: {exec}");
        if !exec.is_empty() && exec != "probing" {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the sandbox probe never ended: {health}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_kill_during_an_exec_under_rw_paths_leaves_what_it_changed_recorded_and_undoable() {
    if std::env::var("BOXMAKER_REQUIRE_BWRAP").as_deref() != Ok("1") {
        eprintln!("skipped: the sandbox is not required here (scripts/test.sh requires it)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root: PathBuf = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let root = root.canonicalize().unwrap();
    // The sandbox runs as nobody when the tests run as root: the directory must be its to write.
    use std::os::unix::fs::PermissionsExt;
    for (path, mode) in [(dir.path(), 0o755), (root.as_path(), 0o777)] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let notes = root.join("notes.txt");
    std::fs::write(&notes, "before\n").unwrap();
    std::fs::set_permissions(&notes, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (mut child, socket, sent) = exec_that_sleeps(dir.path(), &root).await;
    // Killed while the program runs, once it changed both files.
    let made = root.join("made.txt");
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    while !(made.exists() && std::fs::read_to_string(&notes).unwrap() == "during\n") {
        if sent.is_finished() {
            let (status, body) = sent.await.unwrap();
            panic!(
                "the run ended before the kill: {status} {}",
                String::from_utf8_lossy(&body)
            );
        }
        assert!(Instant::now() < deadline, "the run never changed the files");
        tokio::task::yield_now().await;
    }
    kill9(&mut child, &sent);

    // The next start records what the run changed, and an undo puts it back.
    let mut again = start(dir.path());
    let (status, diff) =
        crate::common::http_json(&socket, Method::GET, "/v1/diff?session=s", None).await;
    assert_eq!(status, http::StatusCode::OK, "{diff}");
    assert_eq!(diff["files"].as_array().unwrap().len(), 2, "{diff}");
    let undo = serde_json::json!({ "session": "s", "from_turn": 1 });
    let (status, undone) = crate::common::http_json(
        &socket,
        Method::POST,
        "/v1/undo",
        Some(serde_json::to_vec(&undo).unwrap()),
    )
    .await;
    assert_eq!(status, http::StatusCode::OK, "{undone}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "before\n");
    assert!(!made.exists());
    let _ = again.kill();
    again.wait().unwrap();
}
