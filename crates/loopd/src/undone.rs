//! Turns the owner undid (`boxctl undo`, an `undone` record): their records stay in the log,
//! but the model's context leaves them out from the undo on. Each record belongs to a turn:
//! a turn's records run from its user record to its end; overheard text belongs to the task it
//! came with, the user record after it. Records of no turn (a compaction's note) are kept.

use bxcore::LogRecord;

/// `records` less those of turns an `undone` record among them names.
pub fn kept(records: &[LogRecord]) -> impl Iterator<Item = &LogRecord> {
    let ranges: Vec<(u64, u64)> = records
        .iter()
        .filter_map(|r| match r {
            LogRecord::Undone {
                from_turn, to_turn, ..
            } => Some((*from_turn, *to_turn)),
            _ => None,
        })
        .collect();
    let turns = if ranges.is_empty() {
        Vec::new()
    } else {
        turn_of_each(records)
    };
    records.iter().enumerate().filter_map(move |(i, record)| {
        let turn = turns.get(i).copied().flatten();
        let undone =
            turn.is_some_and(|t| ranges.iter().any(|(from, to)| (*from..=*to).contains(&t)));
        (!undone).then_some(record)
    })
}

/// The turn each record belongs to, if any.
fn turn_of_each(records: &[LogRecord]) -> Vec<Option<u64>> {
    let mut out = vec![None; records.len()];
    let mut current = None;
    for (i, record) in records.iter().enumerate() {
        match record {
            LogRecord::User { turn, .. } => {
                current = Some(*turn);
                out[i] = current;
            }
            LogRecord::TurnEnd { .. } => {
                out[i] = current;
                current = None;
            }
            LogRecord::Overheard { .. } => {}
            _ => out[i] = current,
        }
    }
    // Overheard text: the turn of the user record right after it.
    let mut next = None;
    for (i, record) in records.iter().enumerate().rev() {
        match record {
            LogRecord::User { turn, .. } => next = Some(*turn),
            LogRecord::Overheard { .. } => out[i] = next,
            _ => next = None,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bxcore::{Timestamp, TurnEnd};

    fn turn(n: u64, text: &str) -> [LogRecord; 2] {
        let time = Timestamp::now();
        [
            LogRecord::User {
                time,
                turn: n,
                content: text.into(),
                task_id: None,
            },
            LogRecord::TurnEnd {
                time,
                turn: n,
                end: TurnEnd::Done,
            },
        ]
    }

    fn users<'a>(records: impl Iterator<Item = &'a LogRecord>) -> Vec<&'a str> {
        records
            .filter_map(|r| match r {
                LogRecord::User { content, .. } => Some(content.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_turns_an_undo_names_are_left_out_and_the_rest_kept() {
        let time = Timestamp::now();
        let mut records: Vec<LogRecord> = Vec::new();
        records.extend(turn(1, "one"));
        records.push(LogRecord::Overheard {
            time,
            from: "@bob:x".into(),
            content: "heard before two".into(),
            class: bxcore::DataClass::Public,
            untrusted: true,
        });
        records.extend(turn(2, "two"));
        records.extend(turn(3, "three"));
        assert_eq!(users(kept(&records)), ["one", "two", "three"]);
        records.push(LogRecord::Undone {
            time,
            from_turn: 2,
            to_turn: 3,
            files: 1,
        });
        records.extend(turn(4, "four"));
        assert_eq!(users(kept(&records)), ["one", "four"]);
        assert!(
            !kept(&records).any(|r| matches!(r, LogRecord::Overheard { .. })),
            "what came with an undone task goes with it"
        );
    }
}
