//! Start-up against fakellama: waiting while the model loads, `/props`, and the checks of
//! `[expect]` and `[slots]`.
#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::blocking::Blocking;
use crate::config::{Expect, RoleSlots, Slots};
use crate::llama::tests::support::{Fake, client_for, dead_url, runtime};
use crate::llama::{Health, InferError, ServerInfo, check_expectations};

/// Long enough that the first `/health` surely falls inside the loading period.
const LOADING_MS: u64 = 1_000;
/// The bound given to `wait_until_ready` when it should succeed.
const GENEROUS_WAIT_MS: u64 = 20_000;

#[test]
fn wait_until_ready_waits_out_the_loading_period() {
    let fake = Fake::start(fakellama::Options {
        loading_ms: LOADING_MS,
        ..Default::default()
    });
    let client = fake.client();
    let blocking = fake.blocking();
    assert_eq!(
        blocking.wait(client.health()).unwrap(),
        Health::Loading {
            message: "Loading model".into()
        }
    );
    let info = blocking
        .wait(client.wait_until_ready(GENEROUS_WAIT_MS))
        .unwrap();
    assert_eq!(
        info,
        ServerInfo {
            n_ctx: fakellama::DEFAULT_N_CTX,
            total_slots: fakellama::DEFAULT_SLOTS,
            model: fakellama::MODEL_ALIAS.into(),
            model_path: fakellama::MODEL_PATH.into(),
            build_info: fakellama::BUILD_INFO.into(),
        }
    );
    assert_eq!(blocking.wait(client.health()).unwrap(), Health::Ok);
}

#[test]
fn wait_until_ready_gives_up_after_its_bound() {
    let fake = Fake::start(fakellama::Options {
        loading_ms: 600_000,
        ..Default::default()
    });
    let e = fake
        .blocking()
        .wait(fake.client().wait_until_ready(300))
        .unwrap_err();
    assert!(matches!(&e, InferError::Unavailable { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("Loading model"), "{text}");
    assert!(text.contains("300 ms"), "{text}");
}

#[test]
fn wait_until_ready_keeps_trying_a_refused_connection_up_to_its_bound() {
    let rt = runtime();
    let client = client_for(&dead_url(), |_| {});
    let blocking = Blocking::new(rt.handle().clone());
    let e = blocking.wait(client.wait_until_ready(300)).unwrap_err();
    assert!(matches!(&e, InferError::Connect { .. }), "{e:?}");
    assert!(e.to_string().contains("300 ms"), "{e}");
}

fn server_info(n_ctx: u32, slots: u32) -> ServerInfo {
    let fake = Fake::start(fakellama::Options {
        n_ctx,
        slots,
        ..Default::default()
    });
    fake.blocking().wait(fake.client().props()).unwrap()
}

#[test]
fn expectations_that_match_pass() {
    let info = server_info(4096, 3);
    assert_eq!((info.n_ctx, info.total_slots), (4096, 3));
    assert_eq!(
        check_expectations(
            &Expect::default(),
            &RoleSlots::from(&Slots::default()),
            &info
        ),
        Ok(())
    );
    let expect = Expect {
        n_ctx: Some(4096),
        slots: Some(3),
        model: Some(fakellama::MODEL_ALIAS.into()),
    };
    assert_eq!(
        check_expectations(&expect, &RoleSlots::from(&Slots::default()), &info),
        Ok(())
    );
    let by_path = Expect {
        model: Some(fakellama::MODEL_PATH.into()),
        ..Expect::default()
    };
    assert_eq!(
        check_expectations(&by_path, &RoleSlots::from(&Slots::default()), &info),
        Ok(())
    );
}

#[test]
fn expectations_that_differ_are_each_named() {
    let info = server_info(4096, 3);
    let expect = Expect {
        n_ctx: Some(8192),
        slots: Some(4),
        model: Some("qwen3".into()),
    };
    let problems =
        check_expectations(&expect, &RoleSlots::from(&Slots::default()), &info).unwrap_err();
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(problems[0].contains("expect.n_ctx is 8192") && problems[0].contains("4096"));
    assert!(problems[1].contains("expect.slots is 4") && problems[1].contains("3 slots"));
    assert!(problems[2].contains("expect.model is \"qwen3\"") && problems[2].contains("fakellama"));
}

#[test]
fn a_role_slot_the_server_lacks_is_named() {
    let info = server_info(4096, 2);
    let problems = check_expectations(
        &Expect::default(),
        &RoleSlots::from(&Slots::default()),
        &info,
    )
    .unwrap_err();
    assert_eq!(
        problems,
        ["slots.subagent is slot 2, but llama-server has 2 slots (0 to 1)"]
    );
}
