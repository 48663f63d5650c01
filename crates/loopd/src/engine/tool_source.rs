//! Where the tools of a task come from: loopd's fake tools, or brokerd's catalogue for the
//! task's session.

use crate::blocking::Blocking;
use crate::broker::Broker;
use crate::tools::Registry;
use bxcore::SessionId;

/// Where the tools of a task come from.
pub enum ToolSource {
    /// No broker: the in-process fake tools, with this fixed registry.
    Fake(Registry),
    /// brokerd: each task's registry is made from the catalogue brokerd offers its session.
    Broker {
        /// The client of brokerd.
        broker: Broker,
        /// brokerd's tools that go straight into the tools array.
        core_tools: Vec<String>,
    },
}

impl ToolSource {
    /// The registry for a task of `session`. A broker that cannot be asked leaves loopd's own
    /// tools only; its calls would fail anyway, and the turn can still answer.
    pub(super) fn registry(&self, session: &SessionId, blocking: &Blocking) -> Registry {
        match self {
            ToolSource::Fake(registry) => registry.clone(),
            ToolSource::Broker { broker, core_tools } => {
                match blocking.wait(broker.catalogue(session)) {
                    Ok(catalogue) => crate::toolset::registry(&catalogue, core_tools),
                    Err(e) => {
                        tracing::warn!(%session, error = %e, "no catalogue from brokerd; loopd's own tools only");
                        let empty = proto::Catalogue {
                            session: session.clone(),
                            tools: Vec::new(),
                        };
                        crate::toolset::registry(&empty, core_tools)
                    }
                }
            }
        }
    }
}
