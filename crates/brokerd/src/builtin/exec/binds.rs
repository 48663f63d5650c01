//! The `ro_paths` and `rw_paths` of every `exec` grant, pinned once (`bxsandbox::Pinned`):
//! resolved and held open when brokerd starts, so a call binds what the owner configured and
//! nothing else. A path re-resolved at each call could be redirected by an earlier call that
//! renamed its parent and planted a symlink; a pinned one is bound by its descriptor, and a
//! call whose path no longer resolves to the pinned device and inode is refused, naming it.
//!
//! A path that did not exist at start is pinned at the first call that finds it (the owner
//! may create a directory after brokerd started); `--check-config` refuses any bound path
//! beneath an `rw_paths` entry (`config::exec`), so no call can have created it.

use crate::config::{EXEC_TOOL, Grant};
use crate::tool::ToolError;
use bxsandbox::Pinned;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Every pinned path of the grants, by the path as configured.
#[derive(Debug, Default)]
pub struct Binds {
    pinned: Mutex<BTreeMap<PathBuf, Pinned>>,
}

impl Binds {
    /// Pins every `ro_paths` and `rw_paths` entry of the `exec` grants now. One that cannot
    /// be pinned (it does not exist yet) is logged and tried again at its first call.
    pub fn pin_grants(grants: &[Grant]) -> Binds {
        let mut pinned = BTreeMap::new();
        let paths = grants
            .iter()
            .filter(|g| g.tool == EXEC_TOOL)
            .flat_map(|g| g.exec.ro_paths.iter().chain(&g.exec.rw_paths));
        for path in paths {
            match Pinned::new(path) {
                Ok(pin) => {
                    pinned.insert(path.clone(), pin);
                }
                Err(e) => tracing::warn!(
                    "an exec grant's path cannot be pinned now; its calls fail until it \
                     exists: {e}"
                ),
            }
        }
        Binds {
            pinned: Mutex::new(pinned),
        }
    }

    /// The pin of `path` (the `what` key of a grant): the one made at start, else one made
    /// now, the first time the path exists.
    pub fn get(&self, what: &str, path: &Path) -> Result<Pinned, ToolError> {
        let mut pinned = self.pinned.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pin) = pinned.get(path) {
            return Ok(pin.clone());
        }
        let pin = Pinned::new(path).map_err(|e| {
            ToolError::Failed(format!(
                "exec cannot bind {what} of its grant, so nothing ran: {e}"
            ))
        })?;
        pinned.insert(path.to_owned(), pin.clone());
        Ok(pin)
    }

    /// The pins of `paths`, in order.
    pub fn all(&self, what: &str, paths: &[PathBuf]) -> Result<Vec<Pinned>, ToolError> {
        paths.iter().map(|p| self.get(what, p)).collect()
    }
}
