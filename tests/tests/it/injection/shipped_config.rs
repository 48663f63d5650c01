//! The red-team pass of issue 32 against what ships: brokerd runs `config/brokerd.toml` as it
//! is (its grants, limits and approvals; only the socket, the state directory and the files
//! root are moved into the test's directory) and loopd runs `config/loopd.toml` the same way.
//! The attacker controls the model's output (fakellama obeys every order) and is another
//! local user (`nobody`). Each test fails if its attack gets through; `docs/security.md` lists
//! them and their results.

use super::common::{call_tool, records, results, script, toml_string};
use bxcore::{DenyReason, ToolOutcome};
use e2e::{Running, Stack, StackOptions, workspace_root};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// What must never come back from outside the files root.
const OUTSIDE_SECRET: &str = "OUTSIDE-THE-ROOT-5150";

/// The shipped brokerd config with its socket and state directory left to `e2e`, and the
/// files root it grants (`/var/lib/boxmaker/files`) moved to `files`.
fn shipped_brokerd(files: &Path) -> String {
    let text = std::fs::read_to_string(workspace_root().join("config/brokerd.toml")).unwrap();
    assert!(text.contains("/var/lib/boxmaker/files"), "{text}");
    text.lines()
        .filter(|l| !l.starts_with("socket =") && !l.starts_with("state_dir ="))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("/var/lib/boxmaker/files", files.to_str().unwrap())
}

/// The shipped loopd config without the keys the stack sets (socket, state, model URL,
/// system prompt), and with brokerd's socket in `dir`.
fn shipped_loopd(dir: &Path) -> String {
    let text = std::fs::read_to_string(workspace_root().join("config/loopd.toml")).unwrap();
    let mut table: toml::Table = text.parse().unwrap();
    table.remove("socket");
    table.remove("state_dir");
    for (section, key) in [("llama", "url"), ("baseline", "system")] {
        if let Some(toml::Value::Table(t)) = table.get_mut(section) {
            t.remove(key);
        }
    }
    let broker = table
        .entry("broker")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if let toml::Value::Table(t) = broker {
        t.insert(
            "socket".into(),
            toml::Value::String(dir.join("brokerd.sock").to_str().unwrap().into()),
        );
    }
    toml::to_string(&table).unwrap()
}

/// A fakellama step that calls `name` directly (a core tool) with `arguments` (JSON text).
fn direct(name: &str, arguments: &str) -> String {
    format!(
        "tool_calls = [{{ name = {}, arguments = {} }}]",
        toml_string(name),
        toml_string(arguments)
    )
}

/// The shipped pair, with fakellama answering `attack-N` with the N-th call of `attacks` and
/// every tool result with "Done.".
fn shipped_stack(dir: &Path, files: &Path, attacks: &[String]) -> (Running, Stack) {
    let brokerd = e2e::start_brokerd(dir, &shipped_brokerd(files));
    let mut steps: Vec<(&str, String, String)> = attacks
        .iter()
        .enumerate()
        .map(|(i, call)| ("user", format!("attack-{i} "), call.clone()))
        .collect();
    steps.push(("tool", String::new(), "reply = \"Done.\"".into()));
    let steps: Vec<(&str, &str, String)> = steps
        .iter()
        .map(|(role, contains, answer)| (*role, contains.as_str(), answer.clone()))
        .collect();
    let stack = Stack::start(StackOptions {
        script: script(&steps).replace("times = 1\n", ""),
        loopd_toml: shipped_loopd(dir),
        ..Default::default()
    })
    .unwrap();
    (brokerd, stack)
}

/// Runs attack `i` on its own session and gives its one tool result.
fn attack(stack: &Stack, i: usize) -> (ToolOutcome, String) {
    let session = format!("redteam-{i}");
    let run = stack.boxctl(&["task", "--session", &session, &format!("attack-{i} now")]);
    assert_eq!(run.status.code(), Some(0), "{}", e2e::show(&run));
    let log = records(stack, &session);
    let found = results(&log);
    assert_eq!(found.len(), 1, "attack {i}: {found:?}");
    let (outcome, _, content) = found.into_iter().next().unwrap();
    (outcome, content)
}

#[test]
fn the_model_cannot_read_outside_the_shipped_files_root_or_call_what_it_does_not_grant() {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("files");
    std::fs::create_dir(&files).unwrap();
    std::fs::write(files.join("notes.txt"), "shopping list").unwrap();
    let outside = dir.path().join("outside.txt");
    std::fs::write(&outside, OUTSIDE_SECRET).unwrap();
    std::os::unix::fs::symlink(&outside, files.join("link.txt")).unwrap();
    let path = |p: &Path| serde_json::json!({ "path": p }).to_string();
    let attacks = vec![
        // 0: the root itself works, so the refusals below are the grant's, not a broken stack.
        direct("read_file", &path(&files.join("notes.txt"))),
        // 1-3: outside the root: directly, by `..`, and through a symlink planted in it.
        direct("read_file", &path(&outside)),
        direct("read_file", &path(&files.join("../outside.txt"))),
        direct("read_file", &path(&files.join("link.txt"))),
        // 4: the same key twice, the allowed path first (the owner would see that one).
        direct(
            "read_file",
            &format!(
                "{{\"path\":{:?},\"path\":{:?}}}",
                files.join("notes.txt"),
                outside
            ),
        ),
        // 5-7: tools the shipped config does not grant.
        call_tool(
            "write_file",
            &serde_json::json!({ "path": files.join("w.txt"), "content": "x" }).to_string(),
        ),
        call_tool("http_fetch", r#"{"url":"http://127.0.0.1:9/leak"}"#),
        call_tool("exec", r#"{"argv":["cat","/etc/shadow"]}"#),
    ];
    let (_brokerd, stack) = shipped_stack(dir.path(), &files, &attacks);

    let (outcome, content) = attack(&stack, 0);
    assert_eq!(outcome, ToolOutcome::Ok, "{content}");
    assert!(content.contains("shopping list"), "{content}");
    for i in 1..=3 {
        let (outcome, content) = attack(&stack, i);
        assert_ne!(outcome, ToolOutcome::Ok, "attack {i}: {content}");
        assert!(!content.contains(OUTSIDE_SECRET), "attack {i}: {content}");
    }
    // The key given twice is refused by name before anything is sent, whichever path wins.
    let (_, content) = attack(&stack, 4);
    assert!(content.contains("\"path\" twice"), "attack 4: {content}");
    assert!(!content.contains(OUTSIDE_SECRET), "attack 4: {content}");
    for i in 5..=7 {
        // Not offered to the session at all: loopd answers that no such tool exists, or
        // brokerd refuses it for want of a grant. Either way it never ran (the audit below).
        let (outcome, content) = attack(&stack, i);
        let unknown = outcome == ToolOutcome::Ok && content.starts_with("No tool named");
        let no_grant = outcome
            == ToolOutcome::Denied {
                reason: DenyReason::NoGrant,
            };
        assert!(unknown || no_grant, "attack {i}: {outcome:?} {content}");
    }
    let audit = std::fs::read_to_string(dir.path().join("brokerd-state/audit.jsonl")).unwrap();
    for line in audit.lines().filter(|l| l.contains("\"finished\"")) {
        assert!(line.contains("\"read_file\""), "ran something else: {line}");
    }
    assert!(!files.join("w.txt").exists());
    for i in 0..attacks.len() {
        assert!(
            !stack
                .log_text(&format!("redteam-{i}"))
                .contains(OUTSIDE_SECRET),
            "attack {i} left the secret in the log"
        );
    }
}

/// Connects to `socket` as `nobody` (65534) in a child process, and gives the error `connect`
/// got, or None when it connected.
fn connect_as_nobody(socket: &Path) -> Option<String> {
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg("/usr/bin/python3")
        .arg("-c")
        .arg(
            "import socket,sys\ns=socket.socket(socket.AF_UNIX)\n\
             try:\n  s.connect(sys.argv[1]); print('connected')\n\
             except OSError as e:\n  print(e)\n",
        )
        .arg(socket)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (said != "connected").then_some(said)
}

#[test]
fn another_local_user_cannot_use_the_shipped_daemons_sockets() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    if !status.lines().any(|l| l.starts_with("Uid:\t0\t")) {
        eprintln!("skipped: needs root to run a client as another user");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The directory is opened up, so only the sockets' own modes stand in the way.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let files = dir.path().join("files");
    std::fs::create_dir(&files).unwrap();
    let (_brokerd, stack) = shipped_stack(dir.path(), &files, &[]);
    for socket in [dir.path().join("brokerd.sock"), stack.socket.clone()] {
        let refused = connect_as_nobody(&socket);
        assert!(
            refused
                .as_deref()
                .is_some_and(|e| e.contains("Permission denied")),
            "{} let nobody connect: {refused:?}",
            socket.display()
        );
    }
}
