//! The tools one brokerd offers: built-ins and MCP servers' tools, by name.
//!
//! A set holds fixed tools ([`ToolSet::with_builtins`], [`ToolSet::insert`]) and sources of
//! tools that come and go while brokerd runs ([`ToolSource`], [`ToolSet::add_source`]: the MCP
//! servers, whose tools change when one restarts). A fixed tool always wins over a source's
//! tool of the same name, so an MCP server can never shadow a built-in. A request for a name
//! that is in neither is denied `UnknownTool`.

use crate::builtin;
use crate::builtin::exec::{Exec, Sandbox};
use crate::config::{Config, EXEC_TOOL, Grant};
use crate::tool::Tool;
use proto::{CatalogueTool, ToolSchema};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use tokio::sync::watch;

/// Tools loopd answers itself: never in a tool set (grants apply to the target tool).
pub use proto::LOOPD_TOOLS;

/// Why a tool could not join the set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolSetError {
    /// Two tools of one name.
    #[error("two tools are named {0:?}: tool names must be unique")]
    Duplicate(String),
    /// A name loopd answers itself.
    #[error("{0:?} is answered by loopd, never by brokerd")]
    Reserved(String),
    /// An empty name.
    #[error("a tool has an empty name")]
    Empty,
}

/// Tools that come and go while brokerd runs, asked afresh on every lookup.
pub trait ToolSource: Send + Sync {
    /// The tools now, as `(name, tool)`; the name is the one the model calls it by.
    fn tools(&self) -> Vec<(String, Arc<dyn Tool>)>;

    /// The tool named `name` now (by default, searched in [`ToolSource::tools`]).
    fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools()
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, tool)| tool)
    }
}

/// The running MCP servers are a source: their tools as `<prefix>_<tool>`.
impl ToolSource for crate::mcp::McpServers {
    fn tools(&self) -> Vec<(String, Arc<dyn Tool>)> {
        crate::mcp::McpServers::tools(self)
    }
}

/// The most a catalogue or an `exec` call waits for a running sandbox probe, in
/// milliseconds; past it `exec` is still left out (nothing runs without walls). The probe
/// takes some 10-50 ms; a hung `bwrap` ends it only at its own timeout.
pub const PROBE_WAIT_MS: u64 = 3_000;

/// `exec` while its sandbox is probed after brokerd's socket is bound: offered to no one
/// until the probe has found walls, and then built with the grants' paths pinned as at a
/// start ([`Exec::with_grants`]).
pub struct ExecProbe {
    grants: Vec<Grant>,
    settled: watch::Sender<(Sandbox, Option<Arc<dyn Tool>>)>,
}

impl ExecProbe {
    /// A probe not yet settled, for a brokerd with `grants`.
    pub fn running(grants: &[Grant]) -> ExecProbe {
        ExecProbe {
            grants: grants.to_vec(),
            settled: watch::channel((Sandbox::Probing, None)).0,
        }
    }

    /// Records what the probe found: `exec` is offered from now on when it found walls.
    pub fn settle(&self, sandbox: Sandbox) {
        let exec = match &sandbox {
            Sandbox::Ready(walls) => {
                let exec: Arc<dyn Tool> = Arc::new(Exec::with_grants(walls.clone(), &self.grants));
                Some(exec)
            }
            Sandbox::Unavailable(_) | Sandbox::Probing => None,
        };
        self.settled.send_replace((sandbox, exec));
    }

    /// The sandbox now ([`Sandbox::Probing`] until it settles).
    pub fn sandbox(&self) -> Sandbox {
        self.settled.borrow().0.clone()
    }

    /// `exec`, once the probe found walls.
    fn exec(&self) -> Option<Arc<dyn Tool>> {
        self.settled.borrow().1.clone()
    }

    /// Waits until the probe has settled, at most [`PROBE_WAIT_MS`].
    pub async fn wait(&self) {
        let mut settled = self.settled.subscribe();
        let _ = tokio::time::timeout(
            std::time::Duration::from_millis(PROBE_WAIT_MS),
            settled.wait_for(|(sandbox, _)| !matches!(sandbox, Sandbox::Probing)),
        )
        .await;
    }
}

/// Every tool brokerd can run, by name (so the catalogue comes out sorted).
#[derive(Clone, Default)]
pub struct ToolSet {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    sources: Vec<Arc<dyn ToolSource>>,
    /// The sandbox `exec` runs in, or why there is none (then `exec` is not in `tools`).
    sandbox: Sandbox,
    /// A probe that runs after the socket is bound: `exec` comes from it, not from `tools`.
    probe: Option<Arc<ExecProbe>>,
}

impl fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolSet")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .field("sources", &self.sources.len())
            .field("sandbox", &self.sandbox().describe())
            .finish()
    }
}

impl ToolSet {
    /// An empty set.
    pub fn new() -> ToolSet {
        ToolSet::default()
    }

    /// The built-in tools ([`builtin::all`]).
    pub fn with_builtins() -> Result<ToolSet, ToolSetError> {
        ToolSet::with_builtins_from(&Config::default())
    }

    /// The built-in tools as `cfg` sets them up (`[http_fetch]`).
    pub fn with_builtins_from(cfg: &Config) -> Result<ToolSet, ToolSetError> {
        let mut set = ToolSet::new();
        for tool in builtin::all_with(&cfg.http_fetch) {
            set.insert(tool)?;
        }
        Ok(set)
    }

    /// The built-in tools as `cfg` sets them up, and `exec` when `sandbox` is ready: with
    /// no sandbox, `exec` is left out (in no catalogue, every call denied with its reason).
    pub fn with_builtins_and_sandbox(
        cfg: &Config,
        sandbox: Sandbox,
    ) -> Result<ToolSet, ToolSetError> {
        let mut set = ToolSet::with_builtins_from(cfg)?;
        if let Sandbox::Ready(walls) = &sandbox {
            // The grants' bound paths are pinned here, at start (`exec::binds`).
            set.insert(Arc::new(Exec::with_grants(walls.clone(), &cfg.grants)))?;
        }
        set.sandbox = sandbox;
        Ok(set)
    }

    /// The built-in tools as `cfg` sets them up, and `exec` once `probe` finds walls (until
    /// then it is in no catalogue, and no call of it runs).
    pub fn with_builtins_and_probe(
        cfg: &Config,
        probe: Arc<ExecProbe>,
    ) -> Result<ToolSet, ToolSetError> {
        let mut set = ToolSet::with_builtins_from(cfg)?;
        set.probe = Some(probe);
        Ok(set)
    }

    /// The sandbox `exec` runs in, why it cannot be made (a set made without a probe has
    /// none), or [`Sandbox::Probing`].
    pub fn sandbox(&self) -> Sandbox {
        match &self.probe {
            Some(probe) => probe.sandbox(),
            None => self.sandbox.clone(),
        }
    }

    /// Waits, at most [`PROBE_WAIT_MS`], for a running probe to settle; at once without one.
    pub async fn probed(&self) {
        if let Some(probe) = &self.probe {
            probe.wait().await;
        }
    }

    /// Adds `tool` under the name its schema gives. MCP servers' tools join here, named
    /// `<prefix>_<tool>` by their schema.
    pub fn insert(&mut self, tool: Arc<dyn Tool>) -> Result<(), ToolSetError> {
        let name = tool.schema().name;
        if name.is_empty() {
            return Err(ToolSetError::Empty);
        }
        if LOOPD_TOOLS.contains(&name.as_str()) {
            return Err(ToolSetError::Reserved(name));
        }
        if self.tools.contains_key(&name) {
            return Err(ToolSetError::Duplicate(name));
        }
        self.tools.insert(name, tool);
        Ok(())
    }

    /// Adds a source of tools that change while brokerd runs (the MCP servers). Its tools named
    /// like a fixed tool, or like a tool loopd answers, are left out.
    pub fn add_source(&mut self, source: Arc<dyn ToolSource>) {
        self.sources.push(source);
    }

    /// Whether a source's tool named `name` may be offered (`exec` never, while a probe
    /// holds that name).
    fn open_to_sources(&self, name: &str) -> bool {
        let held_by_probe = self.probe.is_some() && name == EXEC_TOOL;
        !(name.is_empty()
            || self.tools.contains_key(name)
            || LOOPD_TOOLS.contains(&name)
            || held_by_probe)
    }

    /// `exec` from the probe, once it found walls.
    fn probed_exec(&self) -> Option<Arc<dyn Tool>> {
        self.probe.as_ref().and_then(|probe| probe.exec())
    }

    /// The tool named `name` now: a fixed one, `exec` from the probe, else the first
    /// source's that has it.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        if let Some(tool) = self.tools.get(name) {
            return Some(Arc::clone(tool));
        }
        if name == EXEC_TOOL && self.probe.is_some() {
            return self.probed_exec();
        }
        if !self.open_to_sources(name) {
            return None;
        }
        self.sources.iter().find_map(|source| source.get(name))
    }

    /// Whether a tool is named `name` now.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Every tool now, by name.
    fn current(&self) -> BTreeMap<String, Arc<dyn Tool>> {
        let mut all = self.tools.clone();
        if let Some(exec) = self.probed_exec() {
            all.insert(EXEC_TOOL.to_owned(), exec);
        }
        for source in &self.sources {
            for (name, tool) in source.tools() {
                if self.open_to_sources(&name) {
                    all.entry(name).or_insert(tool);
                }
            }
        }
        all
    }

    /// The names now, sorted.
    pub fn names(&self) -> Vec<String> {
        self.current().into_keys().collect()
    }

    /// Every schema now, sorted by name (the name is the set's, whatever the schema says).
    pub fn schemas(&self) -> Vec<ToolSchema> {
        self.current()
            .into_iter()
            .map(|(name, tool)| ToolSchema {
                name,
                ..tool.schema()
            })
            .collect()
    }

    /// Every tool now as the catalogue lists it, sorted by name: its schema (named as in the
    /// set) and the label of the schema's text.
    pub fn catalogue_tools(&self) -> Vec<CatalogueTool> {
        self.current()
            .into_iter()
            .map(|(name, tool)| CatalogueTool {
                schema: ToolSchema {
                    name,
                    ..tool.schema()
                },
                labels: tool.description_labels(),
            })
            .collect()
    }

    /// How many fixed tools (sources' tools not counted).
    pub fn fixed_len(&self) -> usize {
        self.tools.len()
    }
}
