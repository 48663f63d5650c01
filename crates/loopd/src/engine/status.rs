//! `GET /v1/status`: how loopd, the broker and the model server are.

use super::Inner;
use proto::api::{BrokerStatus, LlamaStatus, LoopdStatus, SlotRoles, Status};

/// The status now: the endpoints as the router last found them (it looks every `[llama]
/// health_interval_ms`).
pub async fn status(inner: &std::sync::Arc<Inner>) -> Status {
    let models = &inner.parts.models;
    let endpoints = models.statuses();
    let ok = endpoints.iter().any(|e| e.state == "up");
    let error = if ok {
        None
    } else {
        Some(
            endpoints
                .iter()
                .map(|e| {
                    let why = e.last_error.as_deref().unwrap_or(&e.state);
                    match endpoints.len() {
                        1 => why.to_string(),
                        _ => format!("{}: {why}", e.name),
                    }
                })
                .collect::<Vec<_>>()
                .join("; "),
        )
    };
    let (running, queued) = {
        let lanes = inner.lock_lanes();
        (
            lanes.values().filter(|l| l.is_running()).count() as u64,
            lanes.values().map(|l| l.queued() as u64).sum(),
        )
    };
    let parts = &inner.parts;
    Status {
        loopd: LoopdStatus {
            version: env!("CARGO_PKG_VERSION").to_string(),
            uptime_s: inner.started.elapsed().as_secs(),
            running,
            queued,
        },
        broker: broker_status(&parts.tools).await,
        llama: LlamaStatus {
            url: parts.cfg.llama.describe(),
            ok,
            error,
            n_ctx: u64::from(models.server().n_ctx),
            total_slots: u64::from(models.server().total_slots),
            model: models.server().model.clone(),
            slots: SlotRoles {
                main: parts.cfg.slots.main.first(),
                background: parts.cfg.slots.background,
                subagent: parts.cfg.slots.subagent,
            },
            endpoints,
        },
        usage: parts.meter.usage_today(),
        kv: models.kv().map(|kv| kv.status()),
    }
}

/// How the tool broker is.
async fn broker_status(tools: &super::ToolSource) -> BrokerStatus {
    match tools {
        super::ToolSource::Fake(_) => BrokerStatus {
            kind: "fake".to_string(),
            socket: None,
            ok: true,
            note: crate::tools::FAKE_TOOLS_NOTE.to_string(),
            exec: None,
            checkpoints: None,
        },
        super::ToolSource::Broker { broker, .. } => {
            let (ok, note, exec, checkpoints) = match broker.health().await {
                Ok(health) => (
                    true,
                    "tools run under brokerd's grants".to_string(),
                    health.exec,
                    health.checkpoints,
                ),
                Err(e) => (false, e.to_string(), None, None),
            };
            BrokerStatus {
                kind: "brokerd".to_string(),
                socket: Some(broker.socket().display().to_string()),
                ok,
                note,
                exec,
                checkpoints,
            }
        }
    }
}
