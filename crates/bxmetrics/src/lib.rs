//! Prometheus metrics for boxmaker's daemons (loopd, brokerd, boxd), one way for all three:
//!
//! - [`exposition`]: the text a scrape gets. `prometheus-client` encodes every registry (no
//!   hand-written exposition); a scraper that asks for OpenMetrics (Prometheus does) gets the
//!   crate's OpenMetrics text as it is, anyone else (curl, `promtool check metrics`) the
//!   classic text format 0.0.4, derived from it by [`exposition::classic`].
//! - [`config`]: the `[metrics]` section every daemon shares (`listen`, `allow_remote`,
//!   `allowed_hosts`) and its rule: a TCP listener is loopback-only unless the owner says
//!   otherwise.
//! - [`labels`]: label values bounded over a daemon's life ([`labels::BoundedLabels`]): the
//!   first names as themselves, any later one as `other`.
//! - [`listen`]: the optional TCP listener, which answers `GET /metrics` and nothing else, on
//!   bxhttp's accept loop (idle connections cannot keep a scraper out), to requests whose
//!   `Host` names it (DNS rebinding).
//! - [`process`]: what every daemon's registry holds besides its own series:
//!   `<daemon>_build_info` and the `process_*` metrics, read from `/proc/self` at each scrape
//!   ([`process::register`]).
//! - `testing` (cargo feature `testing`, which only the daemons' `[dev-dependencies]` turn
//!   on): for their tests, the real `promtool check metrics` on an exposition (skipped
//!   without promtool unless `BOXMAKER_REQUIRE_PROMETHEUS=1`).
//!
//! Each daemon also answers `GET /metrics` on its own Unix socket, through its own routes and
//! peer check, with [`exposition::scrape`].
//!
//! Rules for the metrics themselves (docs/metrics.md): names follow Prometheus' conventions
//! (`_total` for counters, the unit as a suffix: `_seconds`, `_bytes`), and no label takes
//! unbounded values: no session ids, no arguments, and a tool name only when the daemon knows
//! the tool (anything else is counted as `unknown`), and no more than
//! [`labels::MAX_TOOL_LABEL_VALUES`] of them over the daemon's life (later ones are `other`).

pub mod config;
pub mod exposition;
pub mod labels;
pub mod listen;
pub mod process;
#[cfg(feature = "testing")]
pub mod testing;

pub use config::{MetricsConfig, MetricsConfigError};
pub use exposition::{Scrape, Source, scrape};
pub use labels::BoundedLabels;
pub use prometheus_client;
