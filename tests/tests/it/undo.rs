#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Undo and diff through the whole stack: two turns write files through brokerd's
//! `write_file`; `boxctl diff` shows each write, `boxctl undo --dry-run` lists what would come
//! back and changes nothing, `boxctl undo` puts the files back byte for byte (a file a turn
//! made is removed), marks the turns undone in the log and is in brokerd's audit log; a file
//! changed since by something else blocks the undo, named, and nothing is changed. What an
//! `exec` under `rw_paths` changed (`sed -i`) is undone with the turn's writes. A fork copies
//! the conversation up to a turn into a new session.

use crate::approvals::{overwrite, reply, write};
use crate::injection::common::{call_tool, stack_with_brokerd, start_brokerd};
use e2e::show;

#[test]
fn undo_puts_back_what_the_last_turns_wrote_and_a_file_changed_since_blocks_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let (notes, new) = (out.join("notes.txt"), out.join("new.txt"));
    std::fs::write(&notes, "original\n").unwrap();
    let grants = format!("[[grants]]\ntool = \"write_file\"\npaths = [{out:?}]\n");
    let _brokerd = start_brokerd(dir.path(), &grants);
    let steps = [
        ("user", "first", overwrite(&notes, "first\n")),
        ("tool", "wrote", reply("One.")),
        ("user", "second", overwrite(&notes, "second\n")),
        ("tool", "wrote", write(&new, "new\n")),
        ("tool", "new.txt", reply("Two.")),
    ];
    let stack = stack_with_brokerd(dir.path(), &steps, "");
    let run = |args: &[&str]| stack.boxctl(args);
    let ok = |args: &[&str]| {
        let got = run(args);
        assert_eq!(got.status.code(), Some(0), "{args:?}: {}", show(&got));
        String::from_utf8_lossy(&got.stdout).into_owned()
    };
    let in_out = out.display().to_string();
    ok(&[
        "task",
        "--session",
        "s",
        &format!("first: write the notes in {in_out}"),
    ]);
    ok(&[
        "task",
        "--session",
        "s",
        &format!("second: write the notes in {in_out}"),
    ]);
    let read = |path: &std::path::Path| std::fs::read_to_string(path).ok();
    assert_eq!(read(&notes).as_deref(), Some("second\n"));
    assert_eq!(read(&new).as_deref(), Some("new\n"));

    let diff = ok(&["diff", "s", "--turn", "2"]);
    assert!(diff.contains("-first\n+second\n"), "{diff}");
    assert!(diff.contains("+++ b") && diff.contains("new.txt"), "{diff}");

    let dry = ok(&["undo", "s", "--dry-run"]);
    assert!(dry.contains("would put back"), "{dry}");
    assert!(dry.contains(&format!("remove {}", new.display())), "{dry}");
    assert_eq!(
        read(&notes).as_deref(),
        Some("second\n"),
        "a dry run changes nothing"
    );

    let undone = ok(&["undo", "s"]);
    assert!(undone.contains("undid turn 2 of s"), "{undone}");
    assert_eq!(read(&notes).as_deref(), Some("first\n"));
    assert_eq!(read(&new), None, "the file turn 2 made is gone");
    assert!(stack.log_text("s").contains("\"type\":\"undone\""));
    // brokerd's audit log holds the undo; the dry run changed nothing and is not in it.
    let audit = std::fs::read_to_string(dir.path().join("brokerd-state/audit.jsonl")).unwrap();
    let undos: Vec<&str> = audit
        .lines()
        .filter(|l| l.contains("\"event\":\"undo\""))
        .collect();
    assert_eq!(undos.len(), 1, "{audit}");
    assert!(undos[0].contains("\"tool\":\"undo\"") && undos[0].contains("\"turn\":2"));
    assert!(undos[0].contains("2 file(s) put back"), "{}", undos[0]);
    // The status says what brokerd keeps: turn 1's write is still there.
    let status = ok(&["status"]);
    assert!(
        status.contains("        undo: 1 write(s) of 1 session(s) kept"),
        "{status}"
    );

    // The owner edits the notes: undoing turn 1 now would lose that edit, so nothing is done.
    std::fs::write(&notes, "the owner's edit\n").unwrap();
    let refused = run(&["undo", "s", "--turns", "1"]);
    assert_ne!(refused.status.code(), Some(0), "{}", show(&refused));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("notes.txt was changed since turn 1"),
        "{said}"
    );
    assert_eq!(read(&notes).as_deref(), Some("the owner's edit\n"));

    // Turn 2 is undone already: the next undo of one turn takes turn 1.
    std::fs::write(&notes, "first\n").unwrap();
    let undone = ok(&["undo", "s"]);
    assert!(undone.contains("undid turn 1 of s"), "{undone}");
    assert_eq!(read(&notes).as_deref(), Some("original\n"));
    let none_left = run(&["undo", "s"]);
    assert_ne!(none_left.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&none_left.stderr).contains("no turn left to undo"),
        "{}",
        show(&none_left)
    );
}

#[test]
fn undo_puts_back_what_an_exec_under_rw_paths_changed_with_the_turns_writes() {
    if std::env::var("BOXMAKER_REQUIRE_BWRAP").as_deref() != Ok("1") {
        eprintln!("skipped: the sandbox is not required here (scripts/test.sh requires it)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let (notes, new) = (out.join("notes.txt"), out.join("new.txt"));
    std::fs::write(&notes, "one\ntwo\nthree\n").unwrap();
    // The sandbox runs as nobody when the tests run as root: the directory must be its to write.
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &std::path::Path, bits| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(bits)).unwrap();
    };
    mode(dir.path(), 0o755);
    mode(&out, 0o777);
    let grants = format!(
        "[[grants]]\ntool = \"write_file\"\npaths = [{out:?}]\n\
         [[grants]]\ntool = \"exec\"\nprograms = [\"sed\"]\nrw_paths = [{out:?}]\n"
    );
    let _brokerd = start_brokerd(dir.path(), &grants);
    let sed = serde_json::json!({ "argv": ["sed", "-i", "s/two/TWO/", notes] });
    let steps = [
        ("user", "edit", write(&new, "made\n")),
        ("tool", "wrote", call_tool("exec", &sed.to_string())),
        ("tool", "status", reply("Edited.")),
    ];
    let stack = stack_with_brokerd(dir.path(), &steps, "");
    let ok = |args: &[&str]| {
        let got = stack.boxctl(args);
        assert_eq!(got.status.code(), Some(0), "{args:?}: {}", show(&got));
        String::from_utf8_lossy(&got.stdout).into_owned()
    };
    let task = format!(
        "edit: in {} make new.txt and run s/two/TWO/ on notes.txt",
        out.display()
    );
    ok(&["task", "--session", "s", &task]);
    let read = |path: &std::path::Path| std::fs::read_to_string(path).ok();
    assert_eq!(
        read(&notes).as_deref(),
        Some("one\nTWO\nthree\n"),
        "sed ran: {}",
        stack.log_text("s")
    );

    let diff = ok(&["diff", "s"]);
    assert!(
        diff.contains("-two\n+TWO\n"),
        "the exec's change is shown: {diff}"
    );
    assert!(diff.contains("+made\n"), "{diff}");
    ok(&["undo", "s"]);
    assert_eq!(read(&notes).as_deref(), Some("one\ntwo\nthree\n"));
    assert_eq!(read(&new), None);
    let left: Vec<_> = std::fs::read_dir(&out).unwrap().collect();
    assert_eq!(left.len(), 1, "nothing else is left behind: {left:?}");
}

#[test]
fn a_fork_starts_as_the_conversation_up_to_its_turn_and_goes_its_own_way() {
    let stack = e2e::Stack::start(e2e::StackOptions {
        script: "default_reply = \"Noted.\"\n".into(),
        ..e2e::StackOptions::default()
    })
    .unwrap();
    let ok = |args: &[&str]| {
        let got = stack.boxctl(args);
        assert_eq!(got.status.code(), Some(0), "{args:?}: {}", show(&got));
        String::from_utf8_lossy(&got.stdout).into_owned()
    };
    ok(&["task", "--session", "s", "alpha fact: the code is 1234"]);
    ok(&["task", "--session", "s", "beta fact: the code is 9999"]);

    let made = ok(&["fork", "s", "--at", "1", "--as", "f"]);
    assert!(made.starts_with("forked s at turn 1 into f ("), "{made}");
    assert!(made.contains("files are not forked"), "{made}");
    let fork = stack.log_text("f");
    assert!(fork.contains("alpha fact"), "{fork}");
    assert!(!fork.contains("beta fact"), "{fork}");
    assert!(fork.contains("forked from session s at turn 1"), "{fork}");

    // Its own next turn, while the source is unchanged.
    ok(&["task", "--session", "f", "gamma: what is the code?"]);
    let fork = stack.log_text("f");
    assert!(
        fork.contains("\"turn\":2") && fork.contains("gamma"),
        "{fork}"
    );
    assert!(!stack.log_text("s").contains("gamma"));

    // A turn that did not end, or an id taken, is refused saying why.
    let refused = stack.boxctl(&["fork", "s", "--at", "7"]);
    assert_ne!(refused.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("no ended turn 7"));
    let taken = stack.boxctl(&["fork", "s", "--as", "f"]);
    assert!(String::from_utf8_lossy(&taken.stderr).contains("session f exists already"));
}
