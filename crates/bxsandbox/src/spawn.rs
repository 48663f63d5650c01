//! How bubblewrap is started. By default `Command::spawn`; a daemon that reaps children of its
//! own (brokerd is a child subreaper and reaps the zombies it did not spawn) passes a
//! [`Spawner`] that registers the child first, or its reaper would take bubblewrap's exit
//! status and the run would fail with `ECHILD` ("No child processes").

use std::io;
use std::sync::Arc;
use tokio::process::{Child, Command};

/// The function a [`Spawner`] calls.
pub type SpawnFn = dyn Fn(&mut Command) -> io::Result<Child> + Send + Sync;

/// Starts bubblewrap for the probe and every run of the walls it found.
#[derive(Clone)]
pub struct Spawner(Arc<SpawnFn>);

impl Spawner {
    /// A spawner that calls `spawn` (which must start the command it is given).
    pub fn new(spawn: impl Fn(&mut Command) -> io::Result<Child> + Send + Sync + 'static) -> Self {
        Spawner(Arc::new(spawn))
    }

    /// `Command::spawn` itself.
    pub fn plain() -> Self {
        Spawner::new(|command| command.spawn())
    }

    /// Starts `command`.
    pub fn spawn(&self, command: &mut Command) -> io::Result<Child> {
        (self.0)(command)
    }
}

impl Default for Spawner {
    fn default() -> Self {
        Spawner::plain()
    }
}

impl std::fmt::Debug for Spawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Spawner")
    }
}
