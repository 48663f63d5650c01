//! `[[llama.endpoints]]`: the model servers loopd may use, each with the roles it serves and
//! the slots it offers each role; and the plan every form resolves to ([`EndpointPlan`]), the
//! single `[llama] url` being one endpoint named [`DEFAULT_ENDPOINT_NAME`].

use super::{Llama, Slots};
use bxconfig::Problems;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The name of the one endpoint `[llama] url` describes.
pub const DEFAULT_ENDPOINT_NAME: &str = "default";
/// The most endpoints loopd watches.
pub const MAX_ENDPOINTS: usize = 16;
/// The most slots one endpoint may offer one role.
pub const MAX_SLOTS_PER_ROLE: usize = 64;
/// The longest endpoint name, in bytes.
pub const MAX_ENDPOINT_NAME_BYTES: usize = 64;

/// The kinds of model call loopd makes, each routed on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// A session's turns.
    Main,
    /// Summaries and compaction, after turns.
    Background,
    /// Child sessions' turns.
    Subagent,
}

impl Role {
    /// Every role, in a fixed order.
    pub const ALL: [Role; 3] = [Role::Main, Role::Background, Role::Subagent];

    /// The role's name as the config writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Main => "main",
            Role::Background => "background",
            Role::Subagent => "subagent",
        }
    }
}

/// Slot ids (`id_slot`) by role, as an endpoint lists them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RoleSlots {
    /// The slots for turns.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub main: Vec<u32>,
    /// The slots for summaries and compaction.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub background: Vec<u32>,
    /// The slots for subagents.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subagent: Vec<u32>,
}

impl RoleSlots {
    /// The slots listed for `role`.
    pub fn of(&self, role: Role) -> &[u32] {
        match role {
            Role::Main => &self.main,
            Role::Background => &self.background,
            Role::Subagent => &self.subagent,
        }
    }

    fn of_mut(&mut self, role: Role) -> &mut Vec<u32> {
        match role {
            Role::Main => &mut self.main,
            Role::Background => &mut self.background,
            Role::Subagent => &mut self.subagent,
        }
    }
}

/// One `[[llama.endpoints]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointConfig {
    /// What logs, errors and `boxctl status` call it: a-z, 0-9, `_` and `-`.
    pub name: String,
    /// `http://host:port[/prefix]`, `https://host[:port][/prefix]` or `unix:/path.sock`.
    pub url: String,
    /// A file holding its API key (`Authorization: Bearer`); none: no key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_file: Option<PathBuf>,
    /// For `https`: a PEM file of the one CA its certificate must chain to; none: the
    /// system's roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// The roles it serves; none: all three.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<Vec<Role>>,
    /// Its slots by role; a role it serves without slots here takes `[slots]`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<RoleSlots>,
}

/// One endpoint as loopd uses it, whichever form the config took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointPlan {
    /// Its name.
    pub name: String,
    /// Where it listens.
    pub url: String,
    /// Its API key file.
    pub api_key_file: Option<PathBuf>,
    /// Its CA file (https only).
    pub ca_file: Option<PathBuf>,
    /// The slots of each role it serves; empty for a role it does not serve.
    pub slots: RoleSlots,
    /// Where it stands in the config, for messages: `llama.endpoints[1] (cupboard)`.
    pub key: String,
}

/// Every endpoint `llama` names: its `[[llama.endpoints]]`, or the one its `url` names.
/// `slots` fills the roles an endpoint lists no slots for. Assumes a checked config.
pub fn plans(llama: &Llama, slots: &Slots) -> Vec<EndpointPlan> {
    if llama.endpoints.is_empty() {
        return vec![EndpointPlan {
            name: DEFAULT_ENDPOINT_NAME.to_string(),
            url: llama.url().to_string(),
            api_key_file: llama.api_key_file.clone(),
            ca_file: llama.ca_file.clone(),
            slots: RoleSlots::from(slots),
            key: "llama".to_string(),
        }];
    }
    llama
        .endpoints
        .iter()
        .enumerate()
        .map(|(i, e)| EndpointPlan {
            name: e.name.clone(),
            url: e.url.clone(),
            api_key_file: e.api_key_file.clone(),
            ca_file: e.ca_file.clone(),
            slots: resolved_slots(e, slots),
            key: format!("llama.endpoints[{i}] ({})", e.name),
        })
        .collect()
}

fn resolved_slots(e: &EndpointConfig, defaults: &Slots) -> RoleSlots {
    let mut out = RoleSlots::default();
    let given = e.slots.clone().unwrap_or_default();
    for role in served(e) {
        let listed = given.of(role);
        *out.of_mut(role) = if listed.is_empty() {
            default_slots(defaults, role)
        } else {
            listed.to_vec()
        };
    }
    out
}

fn default_slots(defaults: &Slots, role: Role) -> Vec<u32> {
    match role {
        Role::Main => defaults.main.0.clone(),
        Role::Background => vec![defaults.background],
        Role::Subagent => vec![defaults.subagent],
    }
}

fn served(e: &EndpointConfig) -> Vec<Role> {
    e.roles.clone().unwrap_or_else(|| Role::ALL.to_vec())
}

/// Checks the form the endpoints take and each `[[llama.endpoints]]` entry.
pub(super) fn check(llama: &Llama, slots: &Slots, expected_slots: Option<u32>, p: &mut Problems) {
    if llama.endpoints.is_empty() {
        check_url("llama.url", llama.url(), p);
        check_files(
            "llama",
            llama.api_key_file.as_deref(),
            llama.ca_file.as_deref(),
            llama.url(),
            p,
        );
        return;
    }
    for (set, key) in [
        (llama.url.is_some(), "llama.url"),
        (llama.api_key_file.is_some(), "llama.api_key_file"),
        (llama.ca_file.is_some(), "llama.ca_file"),
    ] {
        p.check(
            !set,
            key,
            "set it in each [[llama.endpoints]] entry instead: with endpoints listed, [llama] \
             keeps only the settings they share (timeouts, retries, answer size)",
        );
    }
    p.check(
        llama.endpoints.len() <= MAX_ENDPOINTS,
        "llama.endpoints",
        format!(
            "at most {MAX_ENDPOINTS} endpoints, has {}",
            llama.endpoints.len()
        ),
    );
    let mut names: Vec<&str> = Vec::new();
    for (i, e) in llama.endpoints.iter().enumerate() {
        let key = format!("llama.endpoints[{i}]");
        check_name(&key, &e.name, &names, p);
        names.push(&e.name);
        check_url(&format!("{key}.url"), &e.url, p);
        check_files(
            &key,
            e.api_key_file.as_deref(),
            e.ca_file.as_deref(),
            &e.url,
            p,
        );
        check_roles(&key, e, p);
        check_slots(&key, e, slots, expected_slots, p);
    }
    for role in Role::ALL {
        p.check(
            llama.endpoints.iter().any(|e| served(e).contains(&role)),
            "llama.endpoints",
            format!(
                "no endpoint serves the role {:?}: list it in some entry's roles",
                role.as_str()
            ),
        );
    }
}

fn check_name(key: &str, name: &str, seen: &[&str], p: &mut Problems) {
    let valid = !name.is_empty()
        && name.len() <= MAX_ENDPOINT_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    p.check(
        valid,
        format!("{key}.name"),
        format!("{name:?}: 1 to {MAX_ENDPOINT_NAME_BYTES} characters of a-z, 0-9, _ and -"),
    );
    p.check(
        !seen.contains(&name),
        format!("{key}.name"),
        format!("{name:?} names another endpoint too: each needs its own name"),
    );
}

/// `url` must be `http://`, `https://` or `unix:/path`, without a user or password (they
/// would be logged with the URL, and are never sent: use `api_key_file`).
pub(super) fn check_url(key: &str, url: &str, p: &mut Problems) {
    match url.strip_prefix(super::llama::UNIX_URL_PREFIX) {
        Some("") => p.push(key, "unix: needs a socket path, as in unix:/run/llama.sock"),
        Some(path) => p.socket_path(key, Path::new(path)),
        None => {
            p.http_url(key, url);
            let authority = url
                .split("://")
                .nth(1)
                .and_then(|rest| rest.split('/').next());
            p.check(
                !authority.is_some_and(|a| a.contains('@')),
                key,
                "must not hold a user or password (USER@HOST): they would be logged with the \
                 URL; give the key in api_key_file",
            );
        }
    }
}

/// Whether `url` reaches only this machine: a Unix socket, or http(s) to a loopback address.
fn is_local(url: &str) -> bool {
    if url.starts_with(super::llama::UNIX_URL_PREFIX) {
        return true;
    }
    let Ok(uri) = url.parse::<http::Uri>() else {
        return false;
    };
    let host = uri.host().unwrap_or("");
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn check_files(key: &str, api_key: Option<&Path>, ca: Option<&Path>, url: &str, p: &mut Problems) {
    if let Some(file) = api_key {
        p.path_non_empty(&format!("{key}.api_key_file"), file);
        p.check(
            url.starts_with("https://") || is_local(url),
            format!("{key}.api_key_file"),
            "would be sent in the clear over http:// to another machine: use an https:// url \
             (or reach llama-server on loopback or a Unix socket)",
        );
    }
    if let Some(file) = ca {
        p.path_non_empty(&format!("{key}.ca_file"), file);
        p.check(
            url.starts_with("https://"),
            format!("{key}.ca_file"),
            "only an https:// url has a certificate to check",
        );
    }
}

fn check_roles(key: &str, e: &EndpointConfig, p: &mut Problems) {
    let Some(roles) = &e.roles else { return };
    p.check(
        !roles.is_empty(),
        format!("{key}.roles"),
        "lists no role: drop the endpoint, or name main, background or subagent",
    );
    for (i, role) in roles.iter().enumerate() {
        p.check(
            !roles[..i].contains(role),
            format!("{key}.roles"),
            format!("{:?} is listed twice", role.as_str()),
        );
    }
}

fn check_slots(
    key: &str,
    e: &EndpointConfig,
    defaults: &Slots,
    expected_slots: Option<u32>,
    p: &mut Problems,
) {
    let roles = served(e);
    if let Some(given) = &e.slots {
        for role in Role::ALL {
            p.check(
                given.of(role).is_empty() || roles.contains(&role),
                format!("{key}.slots.{}", role.as_str()),
                format!(
                    "lists slots for {:?}, which is not in its roles",
                    role.as_str()
                ),
            );
        }
    }
    let resolved = resolved_slots(e, defaults);
    let mut taken: Vec<(u32, Role)> = Vec::new();
    for role in Role::ALL {
        let list = resolved.of(role);
        let at = format!("{key}.slots.{}", role.as_str());
        p.check(
            list.len() <= MAX_SLOTS_PER_ROLE,
            &at,
            format!("at most {MAX_SLOTS_PER_ROLE} slots, has {}", list.len()),
        );
        for slot in list {
            if let Some((_, other)) = taken.iter().find(|(s, _)| s == slot) {
                p.push(
                    &at,
                    format!(
                        "slot {slot} is already {}'s (listed, or taken from [slots]): each \
                         role needs slots of its own",
                        other.as_str()
                    ),
                );
            } else {
                taken.push((*slot, role));
            }
            if let Some(n) = expected_slots {
                p.check(
                    *slot < n,
                    &at,
                    format!(
                        "slot {slot} does not exist: expect.slots is {n} (slots 0 to {})",
                        n.saturating_sub(1)
                    ),
                );
            }
        }
    }
}

impl From<&Slots> for RoleSlots {
    /// `[slots]`'s main slots, and one slot for each other role.
    fn from(slots: &Slots) -> RoleSlots {
        RoleSlots {
            main: slots.main.0.clone(),
            background: vec![slots.background],
            subagent: vec![slots.subagent],
        }
    }
}
