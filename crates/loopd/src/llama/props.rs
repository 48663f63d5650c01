//! What llama-server says about itself (`/health`, `/props`) and the start-up check of it
//! against `[expect]` and `[slots]`.

use serde::{Deserialize, Serialize};

use super::error::InferError;
use crate::config::{Expect, RoleSlots};

/// What `/health` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// `200 {"status":"ok"}`: ready.
    Ok,
    /// `503 unavailable_error` (e.g. "Loading model"): not yet.
    Loading {
        /// The server's message.
        message: String,
    },
}

/// The parts of `/props` loopd uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerInfo {
    /// Tokens of context per slot (`default_generation_settings.n_ctx`).
    pub n_ctx: u32,
    /// The number of slots (`total_slots`).
    pub total_slots: u32,
    /// The model's alias, or its path when it has none.
    pub model: String,
    /// The model's path (`model_path`; empty when not reported).
    pub model_path: String,
    /// The server's build (`build_info`; empty when not reported).
    pub build_info: String,
}

#[derive(Deserialize)]
struct Props {
    default_generation_settings: GenerationSettings,
    total_slots: u32,
    #[serde(default)]
    model_alias: Option<String>,
    #[serde(default)]
    model_path: Option<String>,
    #[serde(default)]
    build_info: Option<String>,
}

#[derive(Deserialize)]
struct GenerationSettings {
    n_ctx: u32,
}

impl ServerInfo {
    /// Reads a `/props` answer.
    pub(crate) fn from_props(body: &[u8]) -> Result<ServerInfo, InferError> {
        let props: Props = serde_json::from_slice(body).map_err(|e| InferError::BadResponse {
            message: format!("/props lacks what loopd needs ({e})"),
        })?;
        let model_path = props.model_path.unwrap_or_default();
        let model = props
            .model_alias
            .filter(|a| !a.is_empty())
            .unwrap_or_else(|| model_path.clone());
        Ok(ServerInfo {
            n_ctx: props.default_generation_settings.n_ctx,
            total_slots: props.total_slots,
            model,
            model_path,
            build_info: props.build_info.unwrap_or_default(),
        })
    }
}

/// Checks llama-server against the config: each `[expect]` value that is set must match
/// (`expect.model` matches the alias or the path), and each slot the endpoint lists for a
/// role (`[slots]`, or its `slots`) must exist. Every problem is one sentence in the error list.
pub fn check_expectations(
    expect: &Expect,
    slots: &RoleSlots,
    info: &ServerInfo,
) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    if let Some(n_ctx) = expect.n_ctx.filter(|n| *n != info.n_ctx) {
        problems.push(format!(
            "expect.n_ctx is {n_ctx} tokens per slot, but llama-server's slots hold {} \
             (check its -c and -np)",
            info.n_ctx
        ));
    }
    if let Some(count) = expect.slots.filter(|n| *n != info.total_slots) {
        problems.push(format!(
            "expect.slots is {count}, but llama-server has {} slots (check its -np)",
            info.total_slots
        ));
    }
    if let Some(model) = &expect.model
        && *model != info.model
        && *model != info.model_path
    {
        problems.push(format!(
            "expect.model is {model:?}, but llama-server serves {:?} (path {:?})",
            info.model, info.model_path
        ));
    }
    for (role, slot) in crate::config::Role::ALL.into_iter().flat_map(|role| {
        slots
            .of(role)
            .iter()
            .map(move |slot| (role.as_str(), *slot))
    }) {
        if slot >= info.total_slots {
            problems.push(format!(
                "slots.{role} is slot {slot}, but llama-server has {} slots (0 to {})",
                info.total_slots,
                info.total_slots.saturating_sub(1)
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn info() -> ServerInfo {
        ServerInfo {
            n_ctx: 8192,
            total_slots: 3,
            model: "qwen".into(),
            model_path: "/m/qwen.gguf".into(),
            build_info: "b1".into(),
        }
    }

    #[test]
    fn llama_props_reads_the_fields() {
        let body = br#"{"default_generation_settings":{"n_ctx":4096,"params":{}},
            "total_slots":4,"model_alias":"","model_path":"/m/x.gguf","build_info":"b6000-abc",
            "chat_template":"..."}"#;
        let got = ServerInfo::from_props(body).unwrap();
        assert_eq!(
            got,
            ServerInfo {
                n_ctx: 4096,
                total_slots: 4,
                model: "/m/x.gguf".into(),
                model_path: "/m/x.gguf".into(),
                build_info: "b6000-abc".into(),
            }
        );
        let e = ServerInfo::from_props(br#"{"n_ctx":4096,"total_slots":4}"#).unwrap_err();
        assert!(matches!(e, InferError::BadResponse { .. }), "{e:?}");
    }

    #[test]
    fn llama_expectations_matching_and_unset_pass() {
        let slots = RoleSlots::from(&crate::config::Slots::default());
        assert_eq!(
            check_expectations(&Expect::default(), &slots, &info()),
            Ok(())
        );
        let expect = Expect {
            n_ctx: Some(8192),
            slots: Some(3),
            model: Some("/m/qwen.gguf".into()),
        };
        assert_eq!(check_expectations(&expect, &slots, &info()), Ok(()));
    }

    #[test]
    fn llama_expectations_name_each_difference() {
        let expect = Expect {
            n_ctx: Some(4096),
            slots: Some(4),
            model: Some("llama".into()),
        };
        let slots = RoleSlots::from(&crate::config::Slots::one_main(0, 1, 3));
        let problems = check_expectations(&expect, &slots, &info()).unwrap_err();
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(
            problems[0].starts_with("expect.n_ctx is 4096"),
            "{problems:?}"
        );
        assert!(problems[1].starts_with("expect.slots is 4"), "{problems:?}");
        assert!(
            problems[2].starts_with("expect.model is \"llama\""),
            "{problems:?}"
        );
        assert_eq!(
            problems[3],
            "slots.subagent is slot 3, but llama-server has 3 slots (0 to 2)"
        );
    }
}
