//! The engine's tests: background work after a turn, faults (a model or a log that fails),
//! and turns that wait for the owner's approval.

mod approvals;
mod background_work;
mod budgets;
mod endpoints;
mod faults;

use crate::config::Config;
use crate::engine::{Engine, EngineParts, ToolSource};
use crate::llama::ServerInfo;
use crate::llama::tests::support::Fake;
use crate::meter::{Meter, system_clock};
use crate::session::Store;
use crate::tools::{Registry, ToolPort};
use std::sync::Arc;

/// An engine over `fake` with `cfg` (its state dir made by the caller) and `port`, the fixed
/// registry of the fake tools, and the server `fake` says it is.
fn engine_over(fake: &Fake, cfg: &Config, port: Arc<dyn ToolPort>) -> Engine {
    engine_with_kv(fake, cfg, port, None)
}

/// [`engine_over`] with the sessions' KV files `kv`.
#[allow(clippy::unwrap_used)]
fn engine_with_kv(
    fake: &Fake,
    cfg: &Config,
    port: Arc<dyn ToolPort>,
    kv: Option<crate::kv::SlotFiles>,
) -> Engine {
    let store = Store::new(&cfg.state_dir).unwrap();
    Engine::new(EngineParts {
        cfg: cfg.clone(),
        store,
        port,
        tools: ToolSource::Fake(Registry::m2b()),
        system: "You are a test.".into(),
        models: Arc::new(
            crate::route::Router::single(
                fake.client(),
                &crate::config::Slots::default(),
                ServerInfo {
                    n_ctx: fakellama::DEFAULT_N_CTX,
                    total_slots: fakellama::DEFAULT_SLOTS,
                    model: "fakellama".into(),
                    model_path: String::new(),
                    build_info: String::new(),
                },
            )
            .with_kv(kv),
        ),
        blocking: fake.blocking(),
        meter: Arc::new(Meter::load(cfg, system_clock()).unwrap()),
    })
}
