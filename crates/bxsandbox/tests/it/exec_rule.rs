//! `ExecRule::ProgramOnly`: the program runs, and nothing it tries to execute does (issue
//! 32.5). Programs that run others on request are the way around an allow-list of programs;
//! the kernel (seccomp, and Landlock's `Execute` right where the kernel has it) refuses their
//! every exec with `EACCES`, whatever the program.

use crate::common::{stdout, walls};
use bxsandbox::{ExecRule, Outcome, Spec, Status};

/// Runs `argv` under `rule`, with `stdin`.
async fn run(walls: &bxsandbox::Walls, argv: &[&str], stdin: &str, rule: ExecRule) -> Outcome {
    let mut spec = Spec::new(argv.iter().copied());
    spec.exec_rule = rule;
    spec.stdin = stdin.as_bytes().to_vec();
    let outcome = bxsandbox::run(&spec, walls).await.unwrap();
    eprintln!(
        "{argv:?} ({rule:?}): {} | stdout {} | stderr {}",
        outcome.status,
        stdout(&outcome),
        String::from_utf8_lossy(&outcome.stderr.bytes)
    );
    outcome
}

fn denied(outcome: &Outcome) -> bool {
    let stderr = String::from_utf8_lossy(&outcome.stderr.bytes);
    // sort says "couldn't execute compress program: errno 13" (EACCES).
    stderr.contains("Permission denied") || stderr.contains("errno 13")
}

/// The argvs of programs that run another program, each of which would print `ran` if it
/// got to run `echo`/`sh`.
fn runners(loader: &str) -> Vec<Vec<String>> {
    let owned = |argv: &[&str]| argv.iter().map(|a| (*a).to_owned()).collect();
    vec![
        owned(&["env", "sh", "-c", "echo ran"]),
        owned(&[
            "find",
            "/usr",
            "-maxdepth",
            "0",
            "-exec",
            "echo",
            "ran",
            ";",
        ]),
        owned(&["xargs", "echo", "ran"]),
        owned(&[
            "find",
            "/usr",
            "-maxdepth",
            "0",
            "-exec",
            loader,
            "/bin/echo",
            "ran",
            ";",
        ]),
        owned(&["sort", "-S", "1K", "--compress-program=sh", "-T", "/tmp"]),
    ]
}

#[tokio::test]
async fn a_program_only_run_cannot_execute_another_program_or_the_loader() {
    let Some(walls) = walls().await else { return };
    let sort = bxsandbox::program::resolve("sort").unwrap();
    let loader = bxsandbox::interp::exec_files(&sort)[1].clone();
    let loader = loader.to_str().unwrap();
    // Enough lines that sort spills to temporary files and runs its compress program.
    let lines: String = (0..200_000).map(|n| format!("{n}\n")).collect();
    for argv in runners(loader) {
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let outcome = run(&walls, &argv, &lines, ExecRule::ProgramOnly).await;
        assert!(
            !stdout(&outcome).contains("ran"),
            "{argv:?} ran another program"
        );
        assert!(denied(&outcome), "{argv:?}: {outcome:?}");
    }
}

#[tokio::test]
async fn the_same_runners_run_others_under_any() {
    let Some(walls) = walls().await else { return };
    // The control: the runner argvs do run what they name when exec is open (a shell grant),
    // so the test above fails for the wall and not for a broken argv.
    for argv in runners("/nonexistent").into_iter().take(3) {
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let outcome = run(&walls, &argv, "x\n", ExecRule::Any).await;
        assert!(stdout(&outcome).contains("ran"), "{argv:?}: {outcome:?}");
    }
}

#[tokio::test]
async fn the_program_itself_runs_and_a_program_named_by_path_is_executed_as_resolved() {
    let Some(walls) = walls().await else { return };
    let outcome = run(&walls, &["sort"], "b\na\n", ExecRule::ProgramOnly).await;
    assert_eq!(outcome.status, Status::Exited(0));
    assert_eq!(stdout(&outcome), "a\nb\n");
    // /bin/sh is a symlink (to dash on Debian): the resolved file runs, argv[0] as given.
    let outcome = run(
        &walls,
        &["/bin/sh", "-c", "echo \"$0\"; read x; echo $x"],
        "builtin\n",
        ExecRule::ProgramOnly,
    )
    .await;
    assert_eq!(stdout(&outcome), "/bin/sh\nbuiltin\n", "{outcome:?}");
}

#[tokio::test]
async fn a_program_that_is_not_there_is_refused_before_anything_runs() {
    let Some(walls) = walls().await else { return };
    let spec = Spec::new(["no-such-program-bxsandbox"]);
    let err = bxsandbox::run(&spec, &walls).await.unwrap_err().to_string();
    assert!(err.contains("not found on the sandbox's PATH"), "{err}");
}
