//! `POST /v1/chat/completions`: check, render, tokenise, pick a rule and a slot, answer.

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::record::RecordedRequest;
use crate::reply::{Answer, ReplySource};
use crate::request::ChatRequest;
use crate::sse::{Meta, StreamOptions, completion_json, stream_events, unix_now};
use crate::state::State;
use crate::template::render_prompt;
use crate::tokenize::tokenize;
use crate::usage::Usage;

/// Events buffered between the generating task and the connection.
const STREAM_BUFFER_EVENTS: usize = 16;

/// What the HTTP layer sends back for a chat request.
#[derive(Debug)]
pub enum ChatReply {
    /// A JSON document with this status.
    Json(StatusCode, Value),
    /// An event stream fed by a spawned task.
    Stream(crate::stream_body::FrameBody),
}

impl From<ApiError> for ChatReply {
    fn from(error: ApiError) -> Self {
        ChatReply::Json(error.status, error.to_json())
    }
}

/// Answers one chat request and records it.
pub async fn chat(state: &Arc<State>, path: &str, body: &[u8]) -> ChatReply {
    let value = serde_json::from_slice::<Value>(body);
    let body_value = match &value {
        Ok(v) => v.clone(),
        Err(_) => Value::String(String::from_utf8_lossy(body).into_owned()),
    };
    let mut record = RecordedRequest::new(path, body_value);
    let reply = match value {
        Ok(value) => answer(state, &value, &mut record).await,
        Err(e) => ApiError::invalid_request(format!("the body is not valid JSON: {e}")).into(),
    };
    if let ChatReply::Json(status, _) = &reply {
        record.status = status.as_u16();
    }
    tracing::info!(
        path,
        status = record.status,
        slot = ?record.slot_used,
        prompt_tokens = record.prompt_tokens,
        cache_n = record.cache_n,
        rule = ?record.rule,
        stream = record.stream,
        "chat request"
    );
    state.records.push(record);
    reply
}

async fn sleep_ms(duration: Duration) {
    if !duration.is_zero() {
        tokio::time::sleep(duration).await;
    }
}

async fn answer(state: &Arc<State>, body: &Value, record: &mut RecordedRequest) -> ChatReply {
    let request = match ChatRequest::from_json(body) {
        Ok(r) => r,
        Err(e) => return e.into(),
    };
    record.stream = request.stream;
    // A template without tool support ignores the tools: not rendered, calls not parsed.
    let tools: &[Value] = if state.tool_template {
        &request.tools
    } else {
        &[]
    };
    let parse_tool_calls = state.tool_template && request.tool_calls_parsed;
    // Rendering the history through a tool-capable template parses every earlier call's
    // arguments; llama-server refuses the whole request when one is not JSON.
    if state.tool_template
        && let Some(error) = request.call_arguments_error()
    {
        return error.into();
    }
    let prompt = render_prompt(&request.messages, tools);
    let tokens = tokenize(&prompt);
    record.prompt = prompt;
    record.prompt_tokens = tokens.len();
    let n_ctx = usize::try_from(state.n_ctx).unwrap_or(usize::MAX);
    if tokens.len() >= n_ctx {
        return ApiError::exceed_context(tokens.len(), state.n_ctx).into();
    }

    let (role, content) = request
        .last_message()
        .map(|m| (m.role.as_str(), m.content.as_str()))
        .unwrap_or_default();
    let (picked, default_reply) = state.pick_rule(role, content);
    let rule = picked.as_ref().map(|(_, rule)| rule);
    record.rule = picked.as_ref().map(|(label, _)| label.clone());
    let rule_delay = Duration::from_millis(rule.and_then(|r| r.delay_ms).unwrap_or(0));
    if let Some(error) = rule.and_then(|r| r.error.as_ref()) {
        sleep_ms(rule_delay).await;
        let status =
            StatusCode::from_u16(error.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return ApiError::new(status, &error.kind, error.message.clone()).into();
    }

    let (mut lease, common_prefix) = state.slots.acquire(request.id_slot, &tokens).await;
    record.slot_used = Some(lease.id());
    if let Some(n) = state.hold_until_busy {
        let limit = Duration::from_millis(crate::options::HOLD_UNTIL_BUSY_MAX_MS);
        if !state.slots.wait_until_busy(n, limit).await {
            tracing::warn!(
                n,
                "fakellama: {n} slots were never busy at once; answering anyway"
            );
        }
    }
    let mut usage = Usage::for_prompt(tokens.len(), common_prefix, request.cache_prompt);
    usage.prompt_us_per_token = state.profile.prompt_us_per_token;
    usage.predicted_us_per_token = state.profile.predicted_us_per_token;
    record.cache_n = usage.cache_n;
    record.prompt_n = usage.prompt_n();

    let room = n_ctx - tokens.len();
    let budget = request
        .max_tokens
        .map_or(room, |m| usize::try_from(m).unwrap_or(usize::MAX).min(room));
    let source = ReplySource::new(rule, &default_reply, request.enable_thinking);
    let answer = Answer::generate(source, parse_tool_calls, budget, || state.next_id());
    usage.completion_tokens = answer.generated.len();
    record.completion_tokens = usage.completion_tokens;
    // The last generated token is sampled but never evaluated: the slot keeps the others.
    let evaluated = answer.generated.len().saturating_sub(1);
    let mut cached = tokens;
    cached.extend(answer.generated.iter().take(evaluated).cloned());
    lease.set_cache(cached);

    let meta = Meta {
        id: format!("chatcmpl-{}", state.next_id()),
        model: state.model_path.clone(),
    };
    let mid_stream_error = rule.and_then(|r| r.error_mid_stream.as_ref());
    sleep_ms(rule_delay).await;

    // A real-time profile takes the times it reports (`Profile::real_time`).
    let (prefill, per_token) = if state.profile.real_time {
        let us = |per: u64, n: usize| Duration::from_micros(per.saturating_mul(n as u64));
        (
            us(usage.prompt_us_per_token, usage.prompt_n()),
            us(usage.predicted_us_per_token, 1),
        )
    } else {
        (Duration::ZERO, Duration::ZERO)
    };
    if !request.stream {
        sleep_ms(state.delay + prefill + per_token * usage.completion_tokens as u32).await;
        drop(lease);
        if let Some(error) = mid_stream_error {
            return ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                &error.kind,
                error.message.clone(),
            )
            .into();
        }
        return ChatReply::Json(StatusCode::OK, completion_json(&meta, &answer, &usage));
    }

    let options = StreamOptions {
        include_usage: request.include_usage,
        ping: rule.is_some_and(|r| r.ping),
        error_mid_stream: mid_stream_error
            .map(|e| json!({"error":{"code":500,"message":e.message,"type":e.kind}})),
    };
    let events = stream_events(&meta, &answer, &usage, &options);
    let (sender, body) = crate::stream_body::stream_body(STREAM_BUFFER_EVENTS);
    let delay = state.delay + per_token;
    tokio::spawn(async move {
        let _lease = lease;
        sleep_ms(prefill).await;
        for mut event in events {
            if matches!(event, crate::sse::Event::Data(_)) {
                sleep_ms(delay).await;
            }
            event.stamp(unix_now());
            if sender.send(event.to_bytes()).await.is_err() {
                tracing::debug!("client went away mid-stream");
                break;
            }
        }
    });
    ChatReply::Stream(body)
}
