//! The schedule commands: `boxctl schedules` and `boxctl schedule run|pause|resume NAME`.

use super::{Failure, out, out_line};
use crate::cli::{EXIT_OK, ScheduleAction};
use crate::client::{Client, ClientError};
use crate::schedules::{paused_line, schedules_table, started_line};
use bxcore::Timestamp;

/// `boxctl schedules`: the table, or loopd's answer as it came with `--json`.
pub(super) async fn schedules(client: &Client, json: bool) -> Result<u8, Failure> {
    let answer = client.schedules().await?;
    if json {
        out_line(&answer.raw)?;
    } else {
        out(&schedules_table(&answer.value, &Timestamp::now()))?;
    }
    Ok(EXIT_OK)
}

/// `boxctl schedule run|pause|resume NAME`; a 404 is [`Failure::NoSchedule`] (its own exit
/// code), a 409 (the previous run still goes) the busy code.
pub(super) async fn schedule(
    client: &Client,
    json: bool,
    action: ScheduleAction,
) -> Result<u8, Failure> {
    let name = action.name();
    let answered = match &action {
        ScheduleAction::Run { .. } => client
            .run_schedule(name)
            .await
            .map(|a| (a.raw, started_line(&a.value))),
        ScheduleAction::Pause { .. } | ScheduleAction::Resume { .. } => {
            let paused = matches!(action, ScheduleAction::Pause { .. });
            client
                .pause_schedule(name, paused)
                .await
                .map(|a| (a.raw, paused_line(&a.value, &Timestamp::now())))
        }
    };
    let (raw, line) = match answered {
        Ok(answered) => answered,
        Err(e @ ClientError::Api { status: 404, .. }) => {
            return Err(Failure::NoSchedule(name.to_string(), e));
        }
        Err(e) => return Err(e.into()),
    };
    out_line(if json { &raw } else { &line })?;
    Ok(EXIT_OK)
}
