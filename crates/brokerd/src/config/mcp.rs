//! `[[mcp]]`: external tool servers brokerd runs over stdio (the Model Context Protocol).

use bxconfig::Problems;
use bxcore::{DataClass, Labels};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One MCP server: started by brokerd, its tools offered as `<prefix>_<tool>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServer {
    /// The server's name, for logs, the audit log and the `server` label of brokerd's
    /// metrics: `[a-z0-9_]`, unique.
    pub name: String,
    /// The program to run.
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables set for it.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Prefix of its tools in the catalogue: `[a-z0-9_]`, unique.
    pub prefix: String,
    /// The class of its tools' descriptions (the text its author wrote and the model reads
    /// through `find_tool`, or in the tools array for a core tool). Default `public`.
    #[serde(default)]
    pub description_class: DataClass,
    /// Whether its tools' descriptions are untrusted: they may carry instructions nobody on
    /// the box gave. Default `true`; set `false` only for a server whose author you trust.
    #[serde(default = "untrusted_by_default")]
    pub description_untrusted: bool,
}

fn untrusted_by_default() -> bool {
    true
}

impl McpServer {
    /// The label of this server's tool descriptions.
    pub fn description_labels(&self) -> Labels {
        Labels::new(self.description_class, self.description_untrusted)
    }

    /// Checks this server, the `i`th.
    pub(super) fn check(&self, i: usize, p: &mut Problems) {
        let key = |name: &str| format!("mcp[{i}].{name}");
        // The name is also the `server` label of brokerd's metrics, which prometheus-client
        // writes unescaped: the prefix's rule keeps a quote or a newline out of the exposition.
        check_word(&key("name"), &self.name, p);
        p.non_empty(&key("command"), &self.command);
        check_word(&key("prefix"), &self.prefix, p);
        for name in self.env.keys() {
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                p.push(key("env"), format!("not a valid variable name: {name:?}"));
            }
        }
    }
}

/// Checks that `value`, at `key`, is a non-empty word of `[a-z0-9_]`.
pub(super) fn check_word(key: &str, value: &str, p: &mut Problems) {
    if value.is_empty() {
        p.push(key, "must not be empty");
    } else if !value
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        p.push(key, format!("only a-z, 0-9 and _ are allowed: {value:?}"));
    }
}
