//! A setuid-root binary gains nothing inside the sandbox: a root-owned copy of `id` with mode
//! 4755, bound read-only, reports the sandbox's own uid as its euid, and NoNewPrivs is set.
//! Needs root to make the copy (the tests run as root here; bxsandbox then starts bubblewrap
//! as `nobody`, see `Walls::run_as`); skipped otherwise with a line on stderr.

use super::*;
use std::os::unix::fs::MetadataExt;
use std::process::Command;

/// Root's uid.
const ROOT_UID: u32 = 0;

/// A root-owned copy of `/usr/bin/id` with mode 4755 in a directory of its own, readable by all.
fn setuid_id(tree: &Tree) -> PathBuf {
    let dir = tree.root.join("suid");
    std::fs::create_dir(&dir).unwrap();
    open(&dir, 0o755);
    let id = dir.join("id");
    // Copied by `cp`, not in this process: another test thread's fork between our open and
    // close would inherit the writable descriptor, and executing the copy then fails with
    // "Text file busy" (ETXTBSY) until that child execs (seen in a full run).
    let copied = std::process::Command::new("cp")
        .arg("/usr/bin/id")
        .arg(&id)
        .status()
        .unwrap();
    assert!(copied.success(), "cp /usr/bin/id failed: {copied}");
    // The copy is root's (the test runs as root); chmod after the copy keeps the setuid bit.
    open(&id, 0o4755);
    id
}

// Checked against a missing wall: the control runs the copy on the host as nobody, with no
// sandbox, and it prints euid 0; inside, the nosuid bind, the user namespace and NoNewPrivs
// each keep it at nobody's.
#[tokio::test]
async fn a_setuid_root_binary_gains_nothing_inside() {
    let Some(walls) = walls().await else { return };
    let tree = Tree::new();
    let id = setuid_id(&tree);
    if std::fs::metadata(&id).unwrap().uid() != ROOT_UID {
        eprintln!("skipped: making a setuid-root copy needs root");
        return;
    }
    let id = id.to_str().unwrap();

    // The control: on the host, run as nobody, the copy does make its caller root.
    let (nobody, _) = walls
        .run_as()
        .unwrap_or((bxsandbox::probe::ROOT_FALLBACK_ID, 0));
    let host = Command::new("setpriv")
        .args([
            &format!("--reuid={nobody}"),
            &format!("--regid={nobody}"),
            "--clear-groups",
            id,
            "-u",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&host.stdout),
        "0\n",
        "the copy is not setuid-root on the host: {host:?}"
    );

    let mut grant = tree.grant(json!({"shell": true}));
    grant.exec.ro_paths = vec![tree.root.join("suid")];
    let b = tree.broker(Sandbox::Ready(walls), vec![grant]);
    let line = format!("{id} -u; {id} -ru; grep NoNewPrivs /proc/self/status");
    let r = exec(&b, &["sh", "-c", &line]).await;
    let text = content(&r);
    assert!(succeeded(&r), "{text}");
    let stdout = text
        .split_once("bytes):\n")
        .map(|(_, rest)| rest)
        .and_then(|rest| rest.split("\nstderr (").next())
        .unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    let (euid, ruid) = (lines[0], lines[1]);
    assert_ne!(euid, ROOT_UID.to_string(), "the setuid bit took: {text}");
    assert_eq!(euid, ruid, "the euid changed: {text}");
    assert_eq!(lines[2], "NoNewPrivs:\t1", "{text}");
}
