#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Sessions taking turns on one main slot keep their caches in KV files (issue 22): after its
//! first turn, every turn of a session that comes back to a slot another session used is
//! served from its cache (fakellama's honest `cache_n`), across a restart of the engine too;
//! a file that does not match the session or the model is deleted, never used; a restore that
//! fails, or a server with no `--slot-save-path`, leaves the turn to prefill as before.

use crate::api::Backend;
use crate::config::{Config, Kv};
use crate::engine::{Engine, EngineParts, ToolSource};
use crate::kv::{Note, SlotFiles, name_of};
use crate::llama::ServerInfo;
use crate::llama::tests::support::Fake;
use crate::meter::{Meter, system_clock};
use crate::route::Router;
use crate::tests::bed::{Bed, COMPACT_PHRASE, ROOMY_N_CTX, SYSTEM, run_task, until};
use crate::tools::{FakeTools, Registry};
use bxcore::{LogRecord, SessionId};
use proto::api::KvStatus;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The model fakellama reports (`--model`).
pub(super) const MODEL: &str = "/models/fakellama.gguf";

pub(super) fn script() -> String {
    format!(
        "default_reply = \"done, and a few words more to cache\"\n[[rule]]\nwhen_contains = \"{COMPACT_PHRASE}\"\nreply = \"CARRY: earlier tasks\"\n"
    )
}

/// A bed whose fakellama keeps slot files in `<state>/kv` (or none, `with_files = false`).
pub(super) fn bed(with_files: bool) -> (Bed, PathBuf) {
    bed_scripted(with_files, &script())
}

/// [`bed`], fakellama answering by `script`.
pub(super) fn bed_scripted(with_files: bool, script: &str) -> (Bed, PathBuf) {
    let mut bed = Bed::new(script);
    let dir = bed.cfg.state_dir.join("kv");
    std::fs::create_dir_all(&dir).unwrap();
    bed.fake = Fake::start(fakellama::Options {
        script: fakellama::Script::parse(script).unwrap(),
        slot_save_path: with_files.then(|| dir.clone()),
        ..Default::default()
    });
    (bed, dir)
}

pub(super) fn info() -> ServerInfo {
    ServerInfo {
        n_ctx: ROOMY_N_CTX,
        total_slots: 3,
        model: MODEL.into(),
        model_path: MODEL.into(),
        build_info: String::new(),
    }
}

/// An engine over `bed` on one main slot, with KV files when `kv` is on.
pub(super) fn engine(bed: &Bed, kv: bool) -> Engine {
    engine_with(bed, kv, |_| {})
}

/// [`engine`] with its config changed by `tweak`.
pub(super) fn engine_with(bed: &Bed, kv: bool, tweak: impl FnOnce(&mut Config)) -> Engine {
    engine_over(bed, Arc::new(FakeTools::new()), kv, tweak)
}

/// [`engine_with`], its tools answered by `port`.
pub(super) fn engine_over(
    bed: &Bed,
    port: Arc<dyn crate::tools::ToolPort>,
    kv: bool,
    tweak: impl FnOnce(&mut Config),
) -> Engine {
    let mut cfg: Config = bed.cfg.clone();
    cfg.kv = Kv {
        enabled: kv,
        ..Kv::default()
    };
    tweak(&mut cfg);
    let files = SlotFiles::open(&cfg.kv, &cfg.state_dir, &info()).unwrap();
    let router = Router::single(bed.fake.client(), &cfg.slots, info()).with_kv(files);
    Engine::new(EngineParts {
        store: crate::session::Store::new(&cfg.state_dir).unwrap(),
        port,
        tools: ToolSource::Fake(Registry::m2b()),
        system: SYSTEM.into(),
        models: Arc::new(router),
        blocking: bed.fake.blocking(),
        meter: Arc::new(Meter::load(&cfg, system_clock()).unwrap()),
        cfg,
    })
}

/// Session `id`'s KV file (`suffix` `.bin`) or note (`.json`) in `dir`.
pub(super) fn at(dir: &Path, id: &str, suffix: &str) -> PathBuf {
    dir.join(format!("{}{suffix}", name_of(&SessionId::new(id).unwrap())))
}

/// Runs `text` on session `id` to its end.
pub(super) fn run(bed: &Bed, engine: &Engine, id: &str, text: &str) {
    bed.fake
        .rt
        .block_on(run_task(engine, &SessionId::new(id).unwrap(), text));
}

/// (prompt, cached) tokens of each of session `id`'s model calls, in order.
pub(super) fn calls(bed: &Bed, id: &str) -> Vec<(u64, u64)> {
    // Read, not opened: the engine keeps the session open between its tasks.
    bed.store
        .read(&SessionId::new(id).unwrap())
        .unwrap()
        .iter()
        .filter_map(|r| match r {
            LogRecord::Assistant {
                usage: Some(usage), ..
            } => Some((usage.prompt_tokens, usage.cached_tokens)),
            _ => None,
        })
        .collect()
}

/// Whether every turn after the first reused the whole prompt of the turn before.
pub(super) fn every_later_turn_warm(bed: &Bed, id: &str) -> bool {
    calls(bed, id).windows(2).all(|pair| pair[1].1 >= pair[0].0)
}

pub(super) fn alternate(bed: &Bed, engine: &Engine, turns: usize) {
    for n in 0..turns {
        run(bed, engine, "a", &format!("task {n} of a"));
        run(bed, engine, "b", &format!("task {n} of b"));
    }
}

/// The KV status once `done` holds of it (a save after a turn happens after its `ended`).
pub(super) fn wait_for_saves(
    bed: &Bed,
    engine: &Engine,
    done: impl Fn(&KvStatus) -> bool,
) -> KvStatus {
    let kv = engine.models().kv().unwrap();
    bed.fake
        .rt
        .block_on(until("the save after the turn", || done(&kv.status())));
    kv.status()
}

pub(super) fn stop(bed: &Bed, engine: &Engine, save: bool) {
    bed.fake.rt.block_on(async {
        engine.shutdown(20_000).await;
        if save && let Some(kv) = engine.models().kv() {
            kv.save_all().await;
        }
    });
}

#[test]
fn sessions_taking_turns_on_one_slot_come_back_to_their_cache() {
    let (bed, dir) = bed(true);
    let engine = engine(&bed, true);
    alternate(&bed, &engine, 3);
    for id in ["a", "b"] {
        assert_eq!(calls(&bed, id).len(), 3, "{id}");
        assert!(
            every_later_turn_warm(&bed, id),
            "{id}: {:?}",
            calls(&bed, id)
        );
    }
    let status = engine.models().kv().unwrap().status();
    assert_eq!(status.restores, 4, "{status:?}");
    assert_eq!(
        status.misses, 0,
        "a first turn has nothing to miss: {status:?}"
    );
    assert_eq!(status.files, 2, "{status:?}");
    assert!(at(&dir, "a", ".bin").is_file() && at(&dir, "a", ".json").is_file());
    stop(&bed, &engine, false);

    // The same without the files: every switch prefills the whole prompt again.
    let (cold, _) = self::bed(true);
    let engine = self::engine(&cold, false);
    alternate(&cold, &engine, 2);
    assert!(
        !every_later_turn_warm(&cold, "a"),
        "{:?}",
        calls(&cold, "a")
    );
    stop(&cold, &engine, false);
}

#[test]
fn a_restarted_engine_finds_the_slots_last_sessions_in_their_files() {
    let (bed, _) = bed(true);
    let first = engine(&bed, true);
    alternate(&bed, &first, 1);
    // b holds the slot; its cache goes to its file at shutdown.
    stop(&bed, &first, true);
    let second = engine(&bed, true);
    alternate(&bed, &second, 2);
    for id in ["a", "b"] {
        assert!(
            every_later_turn_warm(&bed, id),
            "{id}: {:?}",
            calls(&bed, id)
        );
    }
    stop(&bed, &second, false);
}

#[test]
fn a_file_that_does_not_match_is_deleted_never_restored() {
    let (bed, dir) = bed(true);
    let engine = engine(&bed, true);
    alternate(&bed, &engine, 1);
    run(&bed, &engine, "a", "again");
    let note_of = |id: &str| -> Note {
        serde_json::from_slice(&std::fs::read(at(&dir, id, ".json")).unwrap()).unwrap()
    };
    // b's file says another model made it: b's next turn must not use it.
    let mut b = note_of("b");
    b.model = "/models/another.gguf".into();
    std::fs::write(at(&dir, "b", ".json"), serde_json::to_vec(&b).unwrap()).unwrap();
    run(&bed, &engine, "b", "once more");
    // Gone, and saved again after the turn, by this model (after b's first turn, a's
    // second and this one).
    wait_for_saves(&bed, &engine, |s| s.saves_after_turn == 3);
    assert_eq!(note_of("b").model, MODEL, "the other model's file is gone");
    // Only the prefix every session shares (system prompt, tools) was still in the slot.
    let b_calls = calls(&bed, "b");
    assert!(b_calls[1].1 < b_calls[0].0, "prefilled: {b_calls:?}");
    // A compaction: a's file of the old epoch (saved after its second turn) is dropped.
    assert!(at(&dir, "a", ".bin").exists());
    let compacted = bed
        .fake
        .rt
        .block_on(engine.compact(&SessionId::new("a").unwrap()));
    assert_eq!(compacted.unwrap().epoch, 1);
    assert!(!at(&dir, "a", ".bin").exists() && !at(&dir, "a", ".json").exists());
    stop(&bed, &engine, false);
}

#[test]
fn a_restore_that_fails_or_a_server_without_files_leaves_the_turn_to_prefill() {
    let (bed, dir) = bed(true);
    let engine = engine(&bed, true);
    alternate(&bed, &engine, 1);
    // a's file is damaged: the server refuses it, the turn runs cold, the file goes (a new
    // one is saved after the turn).
    std::fs::write(at(&dir, "a", ".bin"), b"not a slot file").unwrap();
    run(&bed, &engine, "a", "again");
    let a = calls(&bed, "a");
    assert_eq!(a.len(), 2);
    assert_eq!(a[1].1, 0, "prefilled: {a:?}");
    wait_for_saves(&bed, &engine, |s| s.saves_after_turn == 2);
    assert_ne!(
        std::fs::read(at(&dir, "a", ".bin")).unwrap(),
        b"not a slot file"
    );
    let status = engine.models().kv().unwrap().status();
    assert_eq!(status.restore_failures, 1, "{status:?}");
    stop(&bed, &engine, false);

    // A server started without --slot-save-path: files are off for it, turns go on.
    let (plain, _) = self::bed(false);
    let engine = self::engine(&plain, true);
    alternate(&plain, &engine, 2);
    assert_eq!(calls(&plain, "a").len(), 2);
    let status = engine.models().kv().unwrap().status();
    assert_eq!(status.off, ["default"], "{status:?}");
    assert_eq!(status.files, 0);
    stop(&plain, &engine, false);
}

#[test]
fn the_directory_is_made_for_loopds_user_alone_and_off_means_no_files() {
    use std::os::unix::fs::PermissionsExt;
    let state = tempfile::tempdir().unwrap();
    let files = SlotFiles::open(&Kv::default(), state.path(), &info())
        .unwrap()
        .unwrap();
    let mode = std::fs::metadata(files.dir()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    let off = Kv {
        enabled: false,
        ..Kv::default()
    };
    assert!(
        SlotFiles::open(&off, state.path(), &info())
            .unwrap()
            .is_none()
    );
}

#[test]
fn a_save_that_fails_loses_nothing_but_the_warm_start() {
    let (bed, dir) = bed(true);
    let engine = engine(&bed, true);
    run(&bed, &engine, "a", "first task of a");
    // The directory is gone (as good as a full disk for the server's write): b's turn cannot
    // save a's cache, and goes on all the same; nor can b's own save after its turn.
    std::fs::remove_dir_all(&dir).unwrap();
    run(&bed, &engine, "b", "first task of b");
    let status = wait_for_saves(&bed, &engine, |s| s.save_failures == 2);
    assert_eq!(status.saves, 0, "{status:?}");
    assert_eq!(status.files, 0);
    std::fs::create_dir(&dir).unwrap();
    run(&bed, &engine, "a", "second task of a");
    let a = calls(&bed, "a");
    assert_eq!(a.len(), 2, "{a:?}");
    assert!(a[1].1 < a[0].0, "a prefilled, as without files: {a:?}");
    stop(&bed, &engine, false);
}

#[test]
fn a_compaction_after_a_turn_drops_the_sessions_file() {
    let (bed, dir) = bed(true);
    let first = engine(&bed, true);
    alternate(&bed, &first, 1);
    // b's turn saved a's cache of epoch 0.
    assert!(at(&dir, "a", ".bin").is_file());
    stop(&bed, &first, false);
    // Compaction due after every turn: a's next turn compacts in its background work.
    let second = engine_with(&bed, true, |cfg| cfg.compact.threshold = f64::MIN_POSITIVE);
    run(&bed, &second, "a", "a task that fills the slot");
    // The next task of a starts only once that background work is done.
    run(&bed, &second, "a", "and another");
    stop(&bed, &second, false);
    let epoch = bed
        .store
        .read(&SessionId::new("a").unwrap())
        .unwrap()
        .iter()
        .filter(|r| matches!(r, LogRecord::EpochStart { .. }))
        .count();
    assert!(epoch >= 1, "compacted after the first turn");
    assert!(
        !at(&dir, "a", ".bin").exists() && !at(&dir, "a", ".json").exists(),
        "the old epoch's file is gone"
    );
}

#[test]
fn a_session_named_as_anothers_file_never_takes_or_spoils_its_cache() {
    use sha2::{Digest, Sha256};
    let (bed, dir) = bed(true);
    let engine = engine(&bed, true);
    // The name an older loopd gave the file of session `a..b`: a client may name a session so.
    let named_so = format!("sha-{}", &hex::encode(Sha256::digest(b"a..b"))[..32]);
    for n in 0..2 {
        run(&bed, &engine, "a..b", &format!("task {n} of a..b"));
        run(&bed, &engine, &named_so, &format!("task {n} of the other"));
    }
    run(&bed, &engine, "a..b", "task 2 of a..b");
    for id in ["a..b", named_so.as_str()] {
        assert!(
            every_later_turn_warm(&bed, id),
            "{id}: {:?}",
            calls(&bed, id)
        );
    }
    let status = engine.models().kv().unwrap().status();
    assert_eq!(
        (status.misses, status.files),
        (0, 2),
        "each its own file: {status:?}"
    );
    assert!(!dir.join(format!("{named_so}.bin")).exists());
    stop(&bed, &engine, false);
}

#[test]
fn a_file_an_older_loopd_named_after_the_session_is_removed_never_restored() {
    let (bed, dir) = bed(true);
    let first = engine(&bed, true);
    alternate(&bed, &first, 1);
    stop(&bed, &first, true);
    // As an older loopd left them: a's file and note named after the session id.
    for suffix in [".bin", ".json"] {
        std::fs::rename(at(&dir, "a", suffix), dir.join(format!("a{suffix}"))).unwrap();
    }
    let second = engine(&bed, true);
    assert!(!dir.join("a.bin").exists() && !dir.join("a.json").exists());
    run(&bed, &second, "a", "again");
    let a = calls(&bed, "a");
    assert!(a[1].1 < a[0].0, "a prefilled: {a:?}");
    stop(&bed, &second, false);
}

#[test]
fn a_fork_gets_its_sources_file_and_its_first_turn_evaluates_only_what_is_new() {
    let (bed, dir) = bed(true);
    let engine = engine(&bed, true);
    // a's cache goes to its file when b takes the slot.
    run(&bed, &engine, "a", "task 0 of a");
    run(&bed, &engine, "a", "task 1 of a");
    run(&bed, &engine, "b", "task 0 of b");
    let asked = proto::ForkRequest {
        at: None,
        new_session: Some(SessionId::new("f").unwrap()),
    };
    let a = SessionId::new("a").unwrap();
    let made = bed.fake.rt.block_on(engine.fork(&a, asked)).unwrap();
    assert!(made.kv_copied, "{made:?}");
    assert!(at(&dir, "f", ".bin").is_file());
    assert!(at(&dir, "a", ".bin").is_file(), "the source keeps its own");

    run(&bed, &engine, "f", "task 2 of f");
    let (a_last, _) = *calls(&bed, "a").last().unwrap();
    let fork = calls(&bed, "f");
    let (prompt, cached) = *fork.last().unwrap();
    assert!(
        cached >= a_last,
        "the fork's first turn reuses a's whole last prompt: {cached} of {prompt} cached, a's \
         last prompt {a_last}"
    );
    stop(&bed, &engine, false);

    // Without a file of the source, the fork has none, and says so.
    let (bed, _) = self::bed(true);
    let engine = self::engine(&bed, true);
    run(&bed, &engine, "a", "task 0 of a");
    let asked = proto::ForkRequest {
        at: None,
        new_session: Some(SessionId::new("g").unwrap()),
    };
    let made = bed.fake.rt.block_on(engine.fork(&a, asked)).unwrap();
    assert!(!made.kv_copied, "a holds the slot: it has no file yet");
    stop(&bed, &engine, false);
}

#[test]
fn where_prefill_is_cheaper_than_a_file_no_file_is_saved_or_restored() {
    let mut bed = Bed::new(&script());
    let dir = bed.cfg.state_dir.join("kv");
    std::fs::create_dir_all(&dir).unwrap();
    bed.fake = Fake::start(fakellama::Options {
        script: fakellama::Script::parse(&script()).unwrap(),
        slot_save_path: Some(dir.clone()),
        profile: fakellama::Profile::gpu(),
        ..Default::default()
    });
    let engine = engine(&bed, true);
    // Three first turns measure the prefill; the switches between them, the files.
    for id in ["a", "b", "c"] {
        run(&bed, &engine, id, &format!("first task of {id}"));
    }
    alternate(&bed, &engine, 2);
    let status = engine.models().kv().unwrap().status();
    assert_eq!(status.choices.len(), 1, "{status:?}");
    let choice = &status.choices[0];
    assert_eq!(choice.choice, "prefill", "{status:?}");
    assert!(
        choice.file_us_per_1k_tokens > choice.prefill_us_per_1k_tokens,
        "{choice:?}"
    );
    // From now on a switch moves no file.
    let (saves, restores) = (status.saves, status.restores);
    alternate(&bed, &engine, 2);
    let status = engine.models().kv().unwrap().status();
    assert_eq!(
        (status.saves, status.restores),
        (saves, restores),
        "{status:?}"
    );
    stop(&bed, &engine, false);

    // The same switches on the default (CPU-like) profile keep using files.
    let (bed, _) = self::bed(true);
    let engine = self::engine(&bed, true);
    for id in ["a", "b", "c"] {
        run(&bed, &engine, id, &format!("first task of {id}"));
    }
    alternate(&bed, &engine, 3);
    let status = engine.models().kv().unwrap().status();
    assert_eq!(status.choices[0].choice, "files", "{status:?}");
    assert!(every_later_turn_warm(&bed, "a"), "{:?}", calls(&bed, "a"));
    stop(&bed, &engine, false);
}
