//! `[[grants]]`: which session may call which tool, within which limits, and how its results
//! are labelled.

use super::approvals::{self, Approve};
use super::exec::{EXEC_TOOL, ExecGrant};
use super::http_fetch::{DEFAULT_METHODS, HttpGrant};
use super::reach::DEFAULT_PORTS;
use bxconfig::Problems;
use bxcore::DataClass;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The tools brokerd runs itself. Any other tool is an MCP server's (`<prefix>_<tool>`).
pub const BUILTIN_TOOLS: [&str; 7] = [
    "clock",
    "echo",
    "read_file",
    "list_dir",
    "write_file",
    "http_fetch",
    "exec",
];

/// The built-in tools whose arguments are limited by `paths`.
pub const PATH_TOOLS: [&str; 3] = ["read_file", "list_dir", "write_file"];

/// The built-in tools whose arguments are limited by `hosts`.
pub const HOST_TOOLS: [&str; 1] = ["http_fetch"];

/// Whether a tool may run while the caller's context is untrusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WhenUntrusted {
    /// The call runs whatever the context holds.
    Allow,
    /// The call is denied (`Denied { UntrustedContext }`) once the context is untrusted.
    Deny,
    /// Once the context is untrusted, the call asks the owner first (`ToolResponse::Ask`).
    Ask,
}

impl WhenUntrusted {
    /// The value as the config writes it (`allow`, `deny`, `ask`).
    pub fn as_str(self) -> &'static str {
        match self {
            WhenUntrusted::Allow => "allow",
            WhenUntrusted::Deny => "deny",
            WhenUntrusted::Ask => "ask",
        }
    }
}

/// What a grant gets when it does not say: by tool, the conservative choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrantDefaults {
    /// The label class of the tool's results.
    pub result_class: DataClass,
    /// Whether the tool's results are untrusted.
    pub result_untrusted: bool,
    /// The highest context class a call may carry out.
    pub max_context_class: DataClass,
    /// Whether the tool may run in an untrusted context.
    pub when_untrusted: WhenUntrusted,
}

impl GrantDefaults {
    /// The defaults for `tool`:
    ///
    /// | tool | result_class | result_untrusted | max_context_class | when_untrusted |
    /// |---|---|---|---|---|
    /// | `clock`, `echo` | public | false | secret | allow |
    /// | `read_file`, `list_dir` | private | false | secret | allow |
    /// | `write_file` | public | false | secret | deny |
    /// | `http_fetch` | public | true | public | deny |
    /// | `exec` | private | false (true with `network = true`) | secret (public with `network = true`) | deny |
    /// | any other (MCP) | private | true | public | deny |
    ///
    /// Read-only built-ins may run in an untrusted context; tools with side effects may not.
    /// `http_fetch` and MCP tools can reach outside the box, so they carry out public context
    /// only unless the grant raises it. `exec` follows them when its grant sets `network =
    /// true` ([`Grant`]'s defaults depend on that key); these are its defaults without network.
    pub fn for_tool(tool: &str) -> GrantDefaults {
        use DataClass::{Private, Public, Secret};
        let (result_class, result_untrusted, max_context_class, when_untrusted) = match tool {
            "clock" | "echo" => (Public, false, Secret, WhenUntrusted::Allow),
            "read_file" | "list_dir" => (Private, false, Secret, WhenUntrusted::Allow),
            "write_file" => (Public, false, Secret, WhenUntrusted::Deny),
            "http_fetch" => (Public, true, Public, WhenUntrusted::Deny),
            EXEC_TOOL => (Private, false, Secret, WhenUntrusted::Deny),
            _ => (Private, true, Public, WhenUntrusted::Deny),
        };
        GrantDefaults {
            result_class,
            result_untrusted,
            max_context_class,
            when_untrusted,
        }
    }
}

/// One grant: `tool` may be called by the sessions `sessions` match, within its limits.
/// A call no grant allows is denied (`NoGrant`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "RawGrant")]
pub struct Grant {
    /// The tool (a built-in, or `<prefix>_<tool>` of an MCP server). Never `call_tool`.
    pub tool: String,
    /// Globs over session ids (`*`, `sub-*`, `heartbeat`).
    pub sessions: Vec<String>,
    /// For file tools: the roots the path arguments must lie under (absolute).
    pub paths: Vec<PathBuf>,
    /// For `http_fetch`: globs over the host names it may reach (`*.example.org`), each
    /// optionally with the one port it allows (`example.org:8080`, `http://example.org:8080`).
    pub hosts: Vec<String>,
    /// For `http_fetch`: the ports a `hosts` entry without a port may be fetched on
    /// ([`DEFAULT_PORTS`] when the grant does not say).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<u16>,
    /// For `http_fetch`, and `exec` with `network = true`: networks (CIDR) of non-global
    /// addresses (loopback, private, ...) it may connect to anyway; any other non-global
    /// address is refused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<String>,
    /// The class the tool's results are labelled with.
    pub result_class: DataClass,
    /// Whether the tool's results are labelled untrusted.
    pub result_untrusted: bool,
    /// The highest context class a call may carry (egress control).
    pub max_context_class: DataClass,
    /// Whether the call may run while the caller's context is untrusted (`ask`: the owner
    /// decides; `approve = "when_untrusted"` sets it).
    pub when_untrusted: WhenUntrusted,
    /// When a call asks the owner first (`always`: every call; `when_untrusted`: as
    /// `when_untrusted = "ask"`).
    pub approve: Approve,
    /// The most calls of this tool in one turn of one session; none: no limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_calls_per_turn: Option<u32>,
    /// For `exec`: the programs it may run and the walls they run in (flat keys in the
    /// grant: `programs`, `shell`, `rw_paths`, ...).
    #[serde(flatten)]
    pub exec: ExecGrant,
    /// For `http_fetch`: the methods the model may use and the headers brokerd attaches
    /// (flat keys in the grant: `methods`, `headers`, `allow_http_secrets`).
    #[serde(flatten)]
    pub http: HttpGrant,
}

/// A grant as written, before the per-tool defaults fill the keys it leaves out.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGrant {
    tool: String,
    #[serde(default = "every_session")]
    sessions: Vec<String>,
    #[serde(default)]
    paths: Vec<PathBuf>,
    #[serde(default)]
    hosts: Vec<String>,
    ports: Option<Vec<u16>>,
    #[serde(default)]
    networks: Vec<String>,
    result_class: Option<DataClass>,
    result_untrusted: Option<bool>,
    max_context_class: Option<DataClass>,
    when_untrusted: Option<WhenUntrusted>,
    #[serde(default)]
    approve: Approve,
    max_calls_per_turn: Option<u32>,
    #[serde(default)]
    programs: Vec<String>,
    #[serde(default)]
    shell: bool,
    #[serde(default)]
    rw_paths: Vec<PathBuf>,
    #[serde(default)]
    ro_paths: Vec<PathBuf>,
    #[serde(default)]
    network: bool,
    #[serde(default)]
    env: std::collections::BTreeMap<String, String>,
    timeout_ms: Option<u64>,
    max_output_bytes: Option<usize>,
    memory_mb: Option<u64>,
    max_processes: Option<u64>,
    methods: Option<Vec<String>>,
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    allow_http_secrets: bool,
}

fn every_session() -> Vec<String> {
    vec!["*".to_string()]
}

impl From<RawGrant> for Grant {
    fn from(raw: RawGrant) -> Grant {
        let mut d = GrantDefaults::for_tool(&raw.tool);
        if raw.tool == EXEC_TOOL && raw.network {
            // What came in from outside may be in the output, and the argv can carry data
            // out: with network, exec is labelled and limited like http_fetch.
            d.result_untrusted = true;
            d.max_context_class = DataClass::Public;
        }
        // Only a tool that takes hosts gets the default ports, so a grant of another tool
        // that lists none stays free of them (and the check can refuse any it lists).
        let ports = raw.ports.unwrap_or_else(|| {
            if HOST_TOOLS.contains(&raw.tool.as_str()) {
                DEFAULT_PORTS.to_vec()
            } else {
                Vec::new()
            }
        });
        let methods = raw.methods.unwrap_or_else(|| {
            if raw.tool == "http_fetch" {
                DEFAULT_METHODS.iter().map(|m| (*m).to_string()).collect()
            } else {
                Vec::new()
            }
        });
        Grant {
            result_class: raw.result_class.unwrap_or(d.result_class),
            result_untrusted: raw.result_untrusted.unwrap_or(d.result_untrusted),
            max_context_class: raw.max_context_class.unwrap_or(d.max_context_class),
            when_untrusted: approvals::resolve_when_untrusted(
                raw.approve,
                raw.when_untrusted,
                d.when_untrusted,
            ),
            approve: raw.approve,
            tool: raw.tool,
            sessions: raw.sessions,
            paths: raw.paths,
            hosts: raw.hosts,
            ports,
            networks: raw.networks,
            max_calls_per_turn: raw.max_calls_per_turn,
            exec: ExecGrant {
                programs: raw.programs,
                shell: raw.shell,
                rw_paths: raw.rw_paths,
                ro_paths: raw.ro_paths,
                network: raw.network,
                env: raw.env,
                timeout_ms: raw.timeout_ms,
                max_output_bytes: raw.max_output_bytes,
                memory_mb: raw.memory_mb,
                max_processes: raw.max_processes,
            },
            http: HttpGrant {
                methods,
                headers: raw.headers,
                allow_http_secrets: raw.allow_http_secrets,
            },
        }
    }
}

impl Grant {
    /// Whether this grant attaches a secret to its calls (`headers` of `http_fetch`, `env` of
    /// `exec`): the catalogue then says the tool is "authenticated as configured".
    pub fn injects_secret(&self) -> bool {
        self.http.injects_secret()
            || self
                .exec
                .env
                .values()
                .any(|value| crate::secrets::template::mentions_secret(value))
    }

    /// Checks this grant, the `i`th; `prefixes` are the `[[mcp]]` prefixes.
    pub(super) fn check(&self, i: usize, prefixes: &[&str], p: &mut Problems) {
        let key = |name: &str| format!("grants[{i}].{name}");
        let tool = self.tool.as_str();
        p.non_empty(&key("tool"), tool);
        // A grant never names a tool loopd answers itself: grants apply to the target tool.
        if proto::LOOPD_TOOLS.contains(&tool) {
            p.push(
                key("tool"),
                format!(
                    "{tool} is answered by loopd, never by brokerd: grant the target tool instead"
                ),
            );
        } else if !tool.trim().is_empty()
            && !BUILTIN_TOOLS.contains(&tool)
            && !prefixes.iter().any(|prefix| mcp_tool_of(tool, prefix))
        {
            p.push(
                key("tool"),
                format!(
                    "no such tool {tool:?}: not a built-in tool ({}) and no [[mcp]] prefix matches",
                    BUILTIN_TOOLS.join(", ")
                ),
            );
        }
        p.check(
            !self.sessions.is_empty(),
            key("sessions"),
            "must name at least one session glob",
        );
        for (j, glob) in self.sessions.iter().enumerate() {
            check_glob(&format!("grants[{i}].sessions[{j}]"), glob, p);
        }
        let is_path_tool = PATH_TOOLS.contains(&tool);
        if is_path_tool {
            p.check(
                !self.paths.is_empty(),
                key("paths"),
                format!("{tool} needs at least one root: with none, every call would be denied"),
            );
        } else {
            p.check(
                self.paths.is_empty(),
                key("paths"),
                format!(
                    "only {} take path roots; {tool} cannot be limited by them",
                    PATH_TOOLS.join(", ")
                ),
            );
        }
        for (j, root) in self.paths.iter().enumerate() {
            p.absolute_path(&format!("grants[{i}].paths[{j}]"), root);
        }
        super::reach::check(
            i,
            tool,
            HOST_TOOLS.contains(&tool),
            &self.hosts,
            &self.ports,
            &self.networks,
            p,
        );
        if tool == EXEC_TOOL {
            super::reach::check_exec_networks(i, self.exec.network, &self.networks, p);
        }
        approvals::check_grant(i, self.approve, self.when_untrusted, p);
        if let Some(n) = self.max_calls_per_turn {
            p.at_least(&key("max_calls_per_turn"), n, 1);
        }
        self.exec.check(i, tool, p);
        self.http.check(i, tool, p);
        p.check(
            !(tool == EXEC_TOOL && self.exec.network && !self.result_untrusted),
            key("result_untrusted"),
            "exec with network = true gives untrusted results (what came in from outside may \
             be in its output); leave result_untrusted out or set it to true",
        );
    }
}

/// True when `tool` is `<prefix>_<something>`.
fn mcp_tool_of(tool: &str, prefix: &str) -> bool {
    tool.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('_'))
        .is_some_and(|name| !name.is_empty())
}

/// A glob must not be empty and must parse (`globset` syntax).
pub(super) fn check_glob(key: &str, glob: &str, p: &mut Problems) {
    if glob.trim().is_empty() {
        p.push(key, "must not be empty");
    } else if let Err(e) = globset::Glob::new(glob) {
        p.push(key, format!("not a valid glob: {e}"));
    }
}
