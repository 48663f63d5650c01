//! Looking at the endpoints: at start, until every role has one that is ready and matches the
//! config; then every `[llama] health_interval_ms` while loopd runs.

use super::Router;
use super::member::Member;
use crate::config::{Config, EndpointPlan, Expect, Role};
use crate::llama::{Client, ClientOptions, Health, InferError, ServerInfo, check_expectations};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How often the endpoints are looked at while loopd waits for them at start, in milliseconds.
pub const START_POLL_INTERVAL_MS: u64 = crate::llama::HEALTH_POLL_INTERVAL_MS;

/// Why loopd cannot start on its endpoints.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// An endpoint's settings cannot be used (its key file, its CA file, its URL).
    #[error("{key}: {error}")]
    Settings {
        /// Where it stands in the config.
        key: String,
        /// What is wrong.
        error: InferError,
    },
    /// The one llama-server did not become ready.
    #[error("llama-server at {url} is not ready: {error}")]
    NotReady {
        /// Its URL.
        url: String,
        /// Why.
        error: InferError,
    },
    /// The one llama-server does not match the config.
    #[error("llama-server at {url} does not match the config: {}", problems.join("; "))]
    Mismatch {
        /// Its URL.
        url: String,
        /// Each problem, one sentence.
        problems: Vec<String>,
    },
    /// With several endpoints: some role had no ready endpoint when the wait ran out.
    #[error("no endpoint ready for {} after {waited_ms} ms: {}", roles.join(", "), why.join("; "))]
    NoneReady {
        /// The roles without one.
        roles: Vec<&'static str>,
        /// How long loopd waited.
        waited_ms: u64,
        /// Each endpoint that is not up, and why.
        why: Vec<String>,
    },
}

fn member_of(cfg: &Config, plan: &EndpointPlan) -> Result<Member, StartError> {
    let options = ClientOptions::for_endpoint(
        &cfg.llama,
        &plan.key,
        &plan.url,
        plan.api_key_file.as_deref(),
        plan.ca_file.as_deref(),
    )
    .map_err(|error| StartError::Settings {
        key: plan.key.clone(),
        error,
    })?;
    Ok(Member::new(
        &plan.name,
        &plan.url,
        Client::new(options),
        plan.slots.clone(),
    ))
}

/// The router of `cfg`'s endpoints, once every role has one that is ready and matches the
/// config (waiting up to `[llama] health_wait_ms`). One endpoint (`[llama] url`) behaves as
/// loopd always did: it waits while the model loads or the connection is refused, and stops
/// on any other error or a mismatch.
pub async fn start(cfg: &Config) -> Result<Router, StartError> {
    let plans = crate::config::plans(&cfg.llama, &cfg.slots);
    let mut members = Vec::new();
    for plan in &plans {
        members.push(Arc::new(member_of(cfg, plan)?));
    }
    if let [only] = members.as_slice() {
        let info = start_one(only, &cfg.expect, cfg.llama.health_wait_ms).await?;
        return Ok(Router::with_members(members, info));
    }
    let reference = start_many(&members, &cfg.expect, cfg.llama.health_wait_ms).await?;
    Ok(Router::with_members(members, reference))
}

async fn start_one(
    member: &Member,
    expect: &Expect,
    wait_ms: u64,
) -> Result<ServerInfo, StartError> {
    let info = member
        .client
        .wait_until_ready(wait_ms)
        .await
        .map_err(|error| StartError::NotReady {
            url: member.url.clone(),
            error,
        })?;
    check_expectations(expect, &member.slots, &info).map_err(|problems| StartError::Mismatch {
        url: member.url.clone(),
        problems,
    })?;
    member.mark_up(info.clone());
    Ok(info)
}

async fn start_many(
    members: &[Arc<Member>],
    expect: &Expect,
    wait_ms: u64,
) -> Result<ServerInfo, StartError> {
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    let mut reference: Option<ServerInfo> = None;
    loop {
        look_at_all(members, expect, &mut reference).await;
        let missing: Vec<&'static str> = Role::ALL
            .into_iter()
            .filter(|role| !members.iter().any(|m| m.serves(*role) && m.seen().up))
            .map(Role::as_str)
            .collect();
        if let (true, Some(info)) = (missing.is_empty(), &reference) {
            return Ok(info.clone());
        }
        if Instant::now() >= deadline {
            let why = members
                .iter()
                .filter(|m| !m.seen().up)
                .map(|m| {
                    let error = m.seen().last_error.clone().unwrap_or_default();
                    format!("{} ({}): {error}", m.name, m.url)
                })
                .collect();
            return Err(StartError::NoneReady {
                roles: missing,
                waited_ms: wait_ms,
                why,
            });
        }
        tokio::time::sleep(Duration::from_millis(START_POLL_INTERVAL_MS)).await;
    }
}

/// Looks at every endpoint at once; the first one up (in config order) becomes the
/// reference the others must match when there is none yet.
async fn look_at_all(members: &[Arc<Member>], expect: &Expect, reference: &mut Option<ServerInfo>) {
    let mut looks = JoinSet::new();
    for (i, member) in members.iter().enumerate() {
        let (member, expect) = (Arc::clone(member), expect.clone());
        looks.spawn(async move { (i, look(&member, &expect).await) });
    }
    let mut found: Vec<(usize, Result<ServerInfo, String>)> =
        looks.join_all().await.into_iter().collect();
    found.sort_by_key(|(i, _)| *i);
    for (i, result) in found {
        let member = &members[i];
        let alone = members.len() == 1;
        let result = result.and_then(|info| {
            let reference = reference.get_or_insert_with(|| info.clone());
            matches_reference(&info, reference, alone).map(|()| info)
        });
        record(member, result);
    }
}

/// `/health`, then `/props` checked against `[expect]` and the endpoint's slots.
async fn look(member: &Member, expect: &Expect) -> Result<ServerInfo, String> {
    match member.client.health().await {
        Ok(Health::Ok) => {}
        Ok(Health::Loading { message }) => return Err(format!("loading: {message}")),
        Err(e) => return Err(e.to_string()),
    }
    let info = member.client.props().await.map_err(|e| e.to_string())?;
    check_expectations(expect, &member.slots, &info)
        .map_err(|problems| format!("does not match the config: {}", problems.join("; ")))?;
    Ok(info)
}

/// Every endpoint must serve what the first did: a session moves between them, and loopd
/// planned its turns for that context size. `alone`: the one endpoint changed since start.
fn matches_reference(info: &ServerInfo, reference: &ServerInfo, alone: bool) -> Result<(), String> {
    if info.n_ctx == reference.n_ctx && info.model == reference.model {
        return Ok(());
    }
    if alone {
        return Err(format!(
            "now serves {:?} with {} tokens per slot, but loopd started with {:?} and {}: \
             restart loopd",
            info.model, info.n_ctx, reference.model, reference.n_ctx
        ));
    }
    Err(format!(
        "serves {:?} with {} tokens per slot, but the other endpoints serve {:?} with {}: \
         every endpoint needs the same model and context size",
        info.model, info.n_ctx, reference.model, reference.n_ctx
    ))
}

fn record(member: &Member, result: Result<ServerInfo, String>) {
    let was_up = member.seen().up;
    match result {
        Ok(info) => {
            if !was_up {
                tracing::info!(endpoint = %member.name, url = %member.url, model = %info.model, n_ctx = info.n_ctx, "endpoint is up");
            }
            member.mark_up(info);
        }
        Err(why) => {
            if was_up || member.seen().last_error.as_deref() != Some(why.as_str()) {
                tracing::warn!(endpoint = %member.name, url = %member.url, error = %why, "endpoint is down");
            }
            member.mark_down(why);
        }
    }
}

impl Router {
    /// Looks at every endpoint every `interval_ms` until `stop` is cancelled: one found
    /// down takes no new turn; one found up again (its call faults forgotten) does.
    pub async fn watch(self: Arc<Self>, expect: Expect, interval_ms: u64, stop: CancellationToken) {
        let mut reference = Some(self.reference.clone());
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(Duration::from_millis(interval_ms)) => {}
            }
            look_at_all(&self.members, &expect, &mut reference).await;
        }
    }
}
