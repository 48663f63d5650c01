//! A session's baselines: the current epoch's, written once into the log (or, in a log of
//! format 1, into a file of its own), and any epoch's, read back.

use super::Session;
use crate::session::StoreError;
use crate::session::baseline::{self, Baseline};
use bxcore::LogRecord;

impl Session {
    /// Writes the current epoch's baseline; refused if it was written before.
    pub fn write_baseline(&mut self, baseline: Baseline) -> Result<&Baseline, StoreError> {
        if baseline.epoch == self.epoch && self.baseline.is_some() {
            return Err(StoreError::BaselineExists {
                path: self.path.clone(),
                epoch: baseline.epoch,
            });
        }
        if baseline.epoch != self.epoch {
            return Err(StoreError::BadRecord {
                session: self.id.clone(),
                kind: "baseline",
                why: format!(
                    "it is for epoch {} but the session is in epoch {}",
                    baseline.epoch, self.epoch
                ),
            });
        }
        if self.version >= baseline::IN_LOG_SINCE_VERSION {
            let body = serde_json::to_value(&baseline).map_err(|e| StoreError::BadRecord {
                session: self.id.clone(),
                kind: "baseline",
                why: e.to_string(),
            })?;
            // No sync of its own: nothing depends on it before the turn's next synced append
            // (the model's answer, or the turn's end), which makes it durable too.
            self.append_with(
                LogRecord::Baseline {
                    epoch: baseline.epoch,
                    baseline: body,
                },
                false,
            )?;
        } else {
            baseline::write(&self.dir, &baseline, &self.syncs)?;
        }
        Ok(self.baseline.insert(baseline))
    }

    /// The current epoch's baseline, once written.
    pub fn current_baseline(&self) -> Option<&Baseline> {
        self.baseline.as_ref()
    }

    /// The baseline of epoch `epoch`, if written (read from the log, or from its file in a log
    /// of format 1).
    pub fn baseline(&self, epoch: u32) -> Result<Option<Baseline>, StoreError> {
        if self.version >= baseline::IN_LOG_SINCE_VERSION {
            baseline::in_log(&self.path, &self.records, 1, epoch)
        } else {
            baseline::read(&self.dir, epoch)
        }
    }
}
