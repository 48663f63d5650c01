#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The prompt-injection suite: an adversarial model (fakellama obeying every injected
//! instruction), the real brokerd and loopd, and servers under the attacker's control. Each
//! module is one attack; each test fails if the attack gets through.

mod common;
mod internal_address;
mod reserved_sessions;
mod subagent_inheritance;
mod tool_descriptions;
mod tool_failures;
mod weather_page;
