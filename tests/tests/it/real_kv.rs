#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Sessions keep their KV cache across switches on the real llama-server (issue 22): SmolLM2
//! (and the default model, Qwen2.5-Coder-0.5B, without the restart) with `--slot-save-path`
//! set to loopd's `[kv]` directory and one main slot; two sessions
//! alternate five turns each; after its first turn, every turn of each session reuses the
//! whole prompt of its turn before (the server's own `timings.cache_n`, in the log's usage),
//! with and without a restart of loopd in the middle. The server runs with `--cache-ram 0`:
//! its own prompt cache in memory would otherwise restore some prefixes by itself.

use bxcore::{LogRecord, SessionId};
use e2e::Stack;
use e2e::real::{KV_SERVER_ARGS, LlamaServer, RealParts, boxctl_within, one_at_a_time};
use std::process::Command;
use std::time::{Duration, Instant};

/// The longest one `boxctl task` may take before the test calls it a hang.
const TASK_LIMIT: Duration = Duration::from_secs(120);
/// The longest loopd may take to stop on SIGTERM.
const STOP_LIMIT: Duration = Duration::from_secs(30);
/// Turns per session.
const TURNS: usize = 5;

/// llama-server on `model` with its slot files in `<dir>/state/kv` (loopd's default `[kv]`
/// directory there), then loopd on it with short answers.
fn stack(parts: &RealParts, model: &std::path::Path) -> Stack {
    stack_in(tempfile::tempdir().unwrap(), parts, model, "")
}

/// [`stack`] in `dir`, with `loopd_toml` added to loopd's config.
fn stack_in(
    dir: tempfile::TempDir,
    parts: &RealParts,
    model: &std::path::Path,
    loopd_toml: &str,
) -> Stack {
    let kv = dir.path().join("state/kv");
    std::fs::create_dir_all(&kv).unwrap();
    let kv = kv.to_str().unwrap().to_string();
    let mut args = KV_SERVER_ARGS.to_vec();
    args.extend(["--slot-save-path", &kv]);
    let server = LlamaServer::start(&parts.llama_server, &model.to_path_buf(), &args).unwrap();
    Stack::with_model(
        dir,
        server.running,
        server.url,
        &format!("[llama]\nmax_answer_tokens = 24\n{loopd_toml}"),
    )
    .unwrap()
}

/// `boxctl ARGS`, which must succeed within [`TASK_LIMIT`]: what it printed.
fn boxctl_ok(stack: &Stack, args: &[&str]) -> String {
    let out = boxctl_within(stack, args, TASK_LIMIT).unwrap_or_else(|hang| panic!("{hang}"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn task(stack: &Stack, session: &str, text: &str) {
    boxctl_ok(stack, &["task", "--session", session, text]);
}

/// (prompt, cached) tokens of each model call of session `id`, from its log.
fn calls(stack: &Stack, id: &str) -> Vec<(u64, u64)> {
    let store = loopd::session::Store::new(&stack.dir.path().join("state")).unwrap();
    store
        .read(&SessionId::new(id).unwrap())
        .unwrap()
        .iter()
        .filter_map(|r| match r {
            LogRecord::Assistant { usage: Some(u), .. } => Some((u.prompt_tokens, u.cached_tokens)),
            _ => None,
        })
        .collect()
}

/// Stops loopd with SIGTERM (it saves every slot's session to its file) and starts it again.
fn restart_loopd(stack: &mut Stack) {
    let pid = stack.loopd.as_ref().unwrap().id();
    let sent = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let deadline = Instant::now() + STOP_LIMIT;
    while stack.loopd.as_mut().unwrap().exited().is_none() {
        assert!(Instant::now() < deadline, "loopd did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
    stack.loopd = None;
    stack
        .start_loopd("[llama]\nmax_answer_tokens = 24\n")
        .unwrap();
}

fn alternate(stack: &mut Stack, restart_after: Option<usize>) {
    for n in 0..TURNS {
        if restart_after == Some(n) {
            restart_loopd(stack);
        }
        task(stack, "alpha", &format!("Name a colour, please ({n})."));
        task(stack, "beta", &format!("Name an animal, please ({n})."));
    }
}

fn assert_every_later_turn_reuses_the_one_before(stack: &Stack, what: &str) {
    for id in ["alpha", "beta"] {
        let calls = calls(stack, id);
        assert_eq!(calls.len(), TURNS, "{what}, {id}: {calls:?}");
        for (n, pair) in calls.windows(2).enumerate() {
            let ((before, _), (prompt, cached)) = (pair[0], pair[1]);
            assert!(
                cached >= before,
                "{what}, {id}, turn {}: {cached} of {prompt} tokens cached, the turn before had \
                 {before}: {calls:?}",
                n + 2
            );
        }
    }
}

#[test]
fn two_sessions_alternating_on_one_slot_evaluate_only_their_new_tokens() {
    let Some(parts) = RealParts::from_env() else {
        return;
    };
    let _alone = one_at_a_time();
    let mut stack = stack(&parts, &parts.smollm2);
    alternate(&mut stack, None);
    assert_every_later_turn_reuses_the_one_before(&stack, "no restart");
    let kv = stack.dir.path().join("state/kv");
    let alpha = loopd::kv::name_of(&SessionId::new("alpha").unwrap());
    assert!(
        kv.join(format!("{alpha}.bin")).is_file() && kv.join(format!("{alpha}.json")).is_file()
    );

    let mut restarted = self::stack(&parts, &parts.smollm2);
    alternate(&mut restarted, Some(3));
    assert_every_later_turn_reuses_the_one_before(&restarted, "loopd restarted before round 4");
}

#[test]
fn the_default_model_comes_back_to_its_cache_too() {
    let Some(parts) = RealParts::from_env() else {
        return;
    };
    let _alone = one_at_a_time();
    let mut stack = stack(&parts, &parts.qwen);
    alternate(&mut stack, None);
    assert_every_later_turn_reuses_the_one_before(&stack, "Qwen2.5-Coder-0.5B");
}

#[test]
fn a_forks_first_turn_evaluates_only_its_new_tokens() {
    let Some(parts) = RealParts::from_env() else {
        return;
    };
    let _alone = one_at_a_time();
    let stack = stack(&parts, &parts.smollm2);
    task(&stack, "alpha", "Name a colour, please.");
    task(&stack, "alpha", "Name another colour, please.");
    // beta takes the one main slot: alpha's cache goes to its file.
    task(&stack, "beta", "Name an animal, please.");
    let said = boxctl_ok(&stack, &["fork", "alpha", "--as", "fork"]);
    assert!(said.contains("with its KV file"), "{said}");

    task(&stack, "fork", "Name a fruit, please.");
    let alpha = calls(&stack, "alpha");
    let (alpha_last, _) = *alpha.last().unwrap();
    // The fork's log starts with alpha's calls; its own is the last.
    let fork = calls(&stack, "fork");
    assert_eq!(fork.len(), alpha.len() + 1, "{fork:?}");
    let (prompt, cached) = *fork.last().unwrap();
    assert!(
        cached >= alpha_last,
        "the fork's first turn evaluates only its new tokens: {cached} of {prompt} cached, \
         alpha's last prompt had {alpha_last}"
    );
}

#[test]
fn after_an_undo_the_next_turn_reuses_the_cache_of_the_conversation_before_it() {
    let Some(parts) = RealParts::from_env() else {
        return;
    };
    let _alone = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    // An undo asks brokerd to put files back: one with no grant, so none to put back.
    let _brokerd = e2e::start_brokerd(dir.path(), "");
    let broker = format!("[broker]\nsocket = {:?}\n", dir.path().join("brokerd.sock"));
    let stack = stack_in(dir, &parts, &parts.smollm2, &broker);
    task(&stack, "alpha", "Name a colour, please.");
    task(
        &stack,
        "alpha",
        "Name another colour, please: not red, not green, not blue, not yellow, not white.",
    );
    // beta takes the one main slot: alpha's cache goes to its file.
    task(&stack, "beta", "Name an animal, please.");
    boxctl_ok(&stack, &["undo", "alpha"]);

    task(&stack, "alpha", "Name a fruit, please.");
    let alpha = calls(&stack, "alpha");
    assert_eq!(alpha.len(), 3, "{alpha:?}");
    // Turn 1's prompt and answer are the new turn's prefix; turn 2's are not in it.
    let (first_prompt, _) = alpha[0];
    let (prompt, cached) = alpha[2];
    assert!(
        cached >= first_prompt,
        "after the undo, the next turn reuses the conversation before it: {cached} of {prompt} \
         cached, turn 1's prompt had {first_prompt}: {alpha:?}"
    );
    assert!(
        prompt < alpha[1].0,
        "the undone turn left the prompt: {alpha:?}"
    );
}
