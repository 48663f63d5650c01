#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The router's choices: sessions spread over the healthy main slots and kept there, moved
//! when their endpoint fails and not moved back, no new turn on an endpoint that is down,
//! background work and subagents near the session; and the start-up and watch over real
//! (fake) servers.

use super::*;
use crate::config::{Config, EndpointConfig, Expect};
use crate::llama::InferError;
use crate::llama::tests::support::{Fake, client_for, dead_url};
use std::collections::HashSet;

fn info(n_ctx: u32) -> ServerInfo {
    ServerInfo {
        n_ctx,
        total_slots: 3,
        model: "fakellama".into(),
        model_path: String::new(),
        build_info: String::new(),
    }
}

fn slots(main: &[u32], background: &[u32], subagent: &[u32]) -> RoleSlots {
    RoleSlots {
        main: main.to_vec(),
        background: background.to_vec(),
        subagent: subagent.to_vec(),
    }
}

/// Two endpoints, `a` (main 0, background 1, subagent 2) and `b` (main 0 and 1, background
/// 2), taken as up; nothing listens at either.
fn two() -> Router {
    Router::fixed(
        vec![
            (
                "a".into(),
                client_for(&dead_url(), |_| {}),
                slots(&[0], &[1], &[2]),
            ),
            (
                "b".into(),
                client_for(&dead_url(), |_| {}),
                slots(&[0, 1], &[2], &[]),
            ),
        ],
        info(4096),
    )
}

fn id(n: usize) -> SessionId {
    SessionId::new(&format!("s{n}")).unwrap()
}

fn place(router: &Router, session: &SessionId) -> (String, u32) {
    let lease = router.main_for(session);
    (lease.target.endpoint.to_string(), lease.target.slot)
}

fn fail(router: &Router, member: usize) {
    router.members[member]
        .client
        .faults()
        .record(&InferError::Connect {
            url: "http://x".into(),
            message: "refused".into(),
        });
}

#[test]
fn sessions_spread_over_every_main_slot_and_keep_to_theirs() {
    let router = two();
    let first: Vec<(String, u32)> = (0..3).map(|n| place(&router, &id(n))).collect();
    let distinct: HashSet<&(String, u32)> = first.iter().collect();
    assert_eq!(
        distinct.len(),
        3,
        "three sessions, three main slots: {first:?}"
    );
    for round in 0..3 {
        for (n, was) in first.iter().enumerate() {
            assert_eq!(&place(&router, &id(n)), was, "round {round}");
        }
    }
    let statuses = router.statuses();
    assert_eq!(statuses[0].sessions + statuses[1].sessions, 3);
}

#[test]
fn a_session_whose_slot_is_busy_takes_the_free_main_slot_of_its_endpoint_used_least_recently() {
    let router = Router::fixed(
        vec![(
            "a".into(),
            client_for(&dead_url(), |_| {}),
            slots(&[0, 3, 4], &[1], &[2]),
        )],
        info(4096),
    );
    let (s, t) = (id(0), id(1));
    assert_eq!(place(&router, &s), ("a".into(), 0));
    assert_eq!(place(&router, &t), ("a".into(), 3));
    // Slot 0 runs another turn: s goes to the free slot used least recently (4, never),
    // not to 3, which t used last.
    let busy = router.main_for(&s).gate.try_acquire_owned().unwrap();
    assert_eq!(place(&router, &s), ("a".into(), 4));
    // Its home is 4 now; with 4 free, it stays there.
    drop(busy);
    assert_eq!(place(&router, &s), ("a".into(), 4));
    // Every main slot busy: it waits for its own.
    let held: Vec<_> = [0, 3, 4]
        .iter()
        .map(|slot| {
            router.members[0]
                .gate(Role::Main, *slot)
                .try_acquire_owned()
                .unwrap()
        })
        .collect();
    assert_eq!(place(&router, &s), ("a".into(), 4));
    drop(held);
}

#[test]
fn a_session_whose_endpoint_fails_moves_and_does_not_move_back() {
    let router = two();
    let s = id(0);
    assert_eq!(place(&router, &s).0, "a");
    fail(&router, 0);
    assert_eq!(router.statuses()[0].state, "failing");
    let moved = place(&router, &s);
    assert_eq!(moved.0, "b", "the next turn goes to a healthy endpoint");
    // `a` looked at again and up: a look does not end a call's fault (a hung GPU answers
    // /health), and the session keeps its new place, where its prefix now is.
    router.members[0].mark_up(info(4096));
    assert_eq!(router.statuses()[0].state, "failing");
    assert_eq!(place(&router, &id(1)).0, "b", "no new session goes to a");
    // A call that succeeds there ends the fault.
    router.members[0].client.faults().clear();
    assert_eq!(router.statuses()[0].state, "up");
    assert_eq!(place(&router, &s), moved);
}

#[test]
fn no_new_turn_goes_to_an_endpoint_found_down() {
    let router = two();
    router.members[1].mark_down("connection refused".into());
    for n in 0..5 {
        assert_eq!(place(&router, &id(n)).0, "a", "session {n}");
    }
    let b = &router.statuses()[1];
    assert_eq!(b.state, "down");
    assert_eq!(b.last_error.as_deref(), Some("connection refused"));
}

#[test]
fn with_no_endpoint_healthy_a_session_waits_where_it_was() {
    let router = two();
    let s = id(0);
    let was = place(&router, &s);
    router.members[0].mark_down("gone".into());
    router.members[1].mark_down("gone".into());
    assert_eq!(place(&router, &s), was);
    assert!(!router.any_healthy());
}

#[test]
fn background_work_and_subagents_go_near_the_turn_or_to_a_healthy_endpoint() {
    let router = two();
    let on_b = router.main_for(&id(1));
    let on_b = if &*on_b.target.endpoint == "b" {
        on_b
    } else {
        router.main_for(&id(2))
    };
    assert_eq!(&*on_b.target.endpoint, "b");
    let targets = router.targets(&on_b.target);
    assert_eq!(
        (&*targets.background.endpoint, targets.background.slot),
        ("b", 2)
    );
    // `b` serves no subagent: they go to `a`.
    assert_eq!(
        (&*targets.subagent.endpoint, targets.subagent.slot),
        ("a", 2)
    );
    fail(&router, 1);
    let lease = router.background_near("b");
    assert_eq!((&*lease.target.endpoint, lease.target.slot), ("a", 1));
}

#[test]
fn a_free_background_slot_is_taken_before_a_busy_one() {
    let router = Router::fixed(
        vec![(
            "a".into(),
            client_for(&dead_url(), |_| {}),
            slots(&[0], &[1, 2], &[3]),
        )],
        info(4096),
    );
    let first = router.background_near("a");
    let _held = first.gate.clone().try_acquire_owned().unwrap();
    let second = router.background_near("a");
    assert_eq!((first.target.slot, second.target.slot), (1, 2));
}

/// A config of `endpoints` (name, url), all roles on [slots]' slots, quick to give up.
fn config_of(endpoints: &[(&str, String)]) -> Config {
    let mut cfg = Config::default();
    cfg.llama.health_wait_ms = 2_000;
    cfg.llama.endpoints = endpoints
        .iter()
        .map(|(name, url)| EndpointConfig {
            name: (*name).into(),
            url: url.clone(),
            api_key_file: None,
            ca_file: None,
            roles: None,
            slots: None,
        })
        .collect();
    cfg
}

#[test]
fn start_goes_on_without_an_endpoint_that_is_down_and_names_it() {
    let up = Fake::start(fakellama::Options::default());
    let cfg = config_of(&[("dead", dead_url()), ("up", up.server.url())]);
    let router = up.rt.block_on(start(&cfg)).unwrap();
    let statuses = router.statuses();
    assert_eq!(statuses[0].state, "down");
    assert!(statuses[0].last_error.is_some(), "{statuses:?}");
    assert_eq!(statuses[1].state, "up");
    assert_eq!(
        statuses[1].model.as_deref(),
        Some(router.server().model.as_str())
    );
    // Every new session goes to the endpoint that is up.
    for n in 0..3 {
        assert_eq!(place(&router, &id(n)).0, "up");
    }
}

#[test]
fn an_endpoint_with_another_context_size_is_kept_out() {
    let first = Fake::start(fakellama::Options::default());
    let other = Fake::start(fakellama::Options {
        n_ctx: 1024,
        ..Default::default()
    });
    let cfg = config_of(&[("first", first.server.url()), ("other", other.server.url())]);
    let router = first.rt.block_on(start(&cfg)).unwrap();
    let statuses = router.statuses();
    assert_eq!(statuses[1].state, "down");
    let why = statuses[1].last_error.clone().unwrap();
    assert!(why.contains("same model and context size"), "{why}");
}

#[test]
fn start_fails_naming_each_endpoint_when_none_is_ready() {
    let rt = crate::llama::tests::support::runtime();
    let cfg = config_of(&[("x", dead_url()), ("y", dead_url())]);
    let e = rt.block_on(start(&cfg)).unwrap_err().to_string();
    assert!(
        e.contains("no endpoint ready for main, background, subagent"),
        "{e}"
    );
    assert!(e.contains("x (") && e.contains("y ("), "{e}");
}

#[test]
fn the_watch_finds_an_endpoint_gone_and_back() {
    let a = Fake::start(fakellama::Options::default());
    let b = Fake::start(fakellama::Options::default());
    let cfg = config_of(&[("a", a.server.url()), ("b", b.server.url())]);
    let router = Arc::new(a.rt.block_on(start(&cfg)).unwrap());
    let stop = tokio_util::sync::CancellationToken::new();
    a.rt.spawn(Arc::clone(&router).watch(Expect::default(), 20, stop.clone()));
    let wait_for = |state: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while router.statuses()[1].state != state {
            assert!(std::time::Instant::now() < deadline, "b never {state}");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    };
    wait_for("up");
    let url = b.server.url();
    drop(b);
    wait_for("down");
    assert_eq!(place(&router, &id(0)).0, "a");
    // A server back at the same address is found up again.
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let _again = Fake::start(fakellama::Options {
        listen: fakellama::Listen::Tcp(std::net::SocketAddr::from(([127, 0, 0, 1], port))),
        ..Default::default()
    });
    wait_for("up");
    stop.cancel();
}

#[test]
fn a_lease_taken_before_a_wait_is_unfit_once_its_endpoint_is_down_and_another_is_up() {
    let router = two();
    let lease = router.main_for(&id(0));
    assert_eq!(&*lease.target.endpoint, "a");
    assert!(router.still_fit(&lease.target));
    router.members[0].mark_down("gone".into());
    assert!(!router.still_fit(&lease.target), "b is up: route again");
    router.members[1].mark_down("gone".into());
    assert!(router.still_fit(&lease.target), "nowhere better: keep it");
}

#[test]
fn children_take_the_subagent_slots_in_turn() {
    let router = Router::fixed(
        vec![(
            "a".into(),
            client_for(&dead_url(), |_| {}),
            slots(&[0], &[1], &[2, 3]),
        )],
        info(4096),
    );
    let main = router.main_for(&id(0)).target;
    let used: HashSet<u32> = (0..4)
        .map(|_| router.targets(&main).subagent.slot)
        .collect();
    assert_eq!(used, HashSet::from([2, 3]));
}
