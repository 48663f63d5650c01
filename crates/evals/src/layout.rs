//! One task's development layout, as `scripts/demo.sh` writes its own: a scratch root with
//! the task's files, brokerd's and loopd's configs (the runner's base with the task's TOML
//! merged over it), and boxd's config with every child's config pinned by its sha256.

use crate::task::{Task, relative_path};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// How long loopd waits for an answer to an approval the task leaves (`approvals = "ignore"`),
/// in milliseconds: it then denies the call, as the owner's silence does.
pub const IGNORED_APPROVAL_TIMEOUT_MS: u64 = 10_000;
/// The session every prompt of a task runs in.
pub const SESSION: &str = "eval";

/// The model server a run uses.
#[derive(Debug, Clone)]
pub enum ModelServer {
    /// A real llama-server with a GGUF model.
    Llama {
        /// The llama-server binary.
        server: PathBuf,
        /// The model file.
        gguf: PathBuf,
        /// `--chat-template-file`, when the model needs ours.
        template: Option<PathBuf>,
        /// Per-slot context (`-c` is three times this: three slots).
        slot_ctx: u32,
    },
    /// fakellama with a script (the harness's own check, not a model).
    Fake {
        /// The fakellama binary.
        fakellama: PathBuf,
        /// Its script; placeholders are replaced as in a task.
        script: PathBuf,
    },
}

/// Where one task's layout lives.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The task's directory (configs, state, logs).
    pub dir: PathBuf,
    /// The scratch root the task's files go in (`@ROOT@`).
    pub root: PathBuf,
    /// Sockets.
    pub run: PathBuf,
    /// The site's `host:port` (`@SITE@`).
    pub site: String,
}

impl Layout {
    /// The layout of a task under `dir`, with the site at `site` (`site.test:PORT`).
    pub fn new(dir: &Path, site: &str) -> Layout {
        Layout {
            dir: dir.to_path_buf(),
            root: dir.join("root"),
            run: dir.join("run"),
            site: site.to_string(),
        }
    }

    /// `text` with `@ROOT@`, `@SITE_URL@` and `@SITE@` replaced.
    pub fn fill(&self, text: &str) -> String {
        text.replace("@ROOT@", &self.root.to_string_lossy())
            .replace("@SITE_URL@", &format!("http://{}", self.site))
            .replace("@SITE@", &self.site)
    }

    /// loopd's socket.
    pub fn loopd_socket(&self) -> PathBuf {
        self.run.join("loopd.sock")
    }

    /// loopd's state dir.
    pub fn state(&self) -> PathBuf {
        self.dir.join("state")
    }

    /// The log of session `id`.
    pub fn session_log(&self, id: &str) -> PathBuf {
        self.state().join("sessions").join(id).join("log.jsonl")
    }

    /// Writes the scratch root, the memory notes and the configs; returns boxd's config.
    pub fn write(
        &self,
        task: &Task,
        model: &ModelServer,
        bin: &Path,
        system: &Path,
    ) -> anyhow::Result<PathBuf> {
        for dir in [&self.root, &self.run, &self.state().join("kv")] {
            std::fs::create_dir_all(dir)?;
        }
        set_mode(&self.run, 0o700)?;
        set_mode(&self.state().join("kv"), 0o700)?;
        // The exec sandbox runs as nobody when the runner is root: it must reach the root.
        set_mode(&self.root, 0o755)?;
        for (path, content) in &task.setup.files {
            let relative = relative_path(path).map_err(anyhow::Error::msg)?;
            let full = self.root.join(relative);
            if let Some(parent) = full.parent() {
                std::fs::create_dir_all(parent)?;
                // And write where its grants let it (`sed -i` under `rw_paths`), as a runner
                // that is not root could: its sandbox runs as the owner of these directories.
                for dir in parent.ancestors().take_while(|d| d.starts_with(&self.root)) {
                    if dir != self.root {
                        set_mode(dir, 0o777)?;
                    }
                }
            }
            std::fs::write(&full, self.fill(content))?;
        }
        self.write_memory(&task.setup.memory)?;
        let brokerd = self.dir.join("brokerd.toml");
        std::fs::write(&brokerd, self.brokerd_toml(task)?)?;
        let loopd = self.dir.join("loopd.toml");
        std::fs::write(&loopd, self.loopd_toml(task, system)?)?;
        let boxd = self.dir.join("boxd.toml");
        std::fs::write(&boxd, self.boxd_toml(model, bin, &brokerd, &loopd)?)?;
        Ok(boxd)
    }

    /// The memory notes, as loopd keeps them (`memory.jsonl`).
    fn write_memory(&self, notes: &[String]) -> anyhow::Result<()> {
        if notes.is_empty() {
            return Ok(());
        }
        let mut text = String::new();
        for note in notes {
            let note = bxcore::MemoryNote {
                time: bxcore::Timestamp::now(),
                session: bxcore::SessionId::new("earlier")?,
                text: self.fill(note),
                class: bxcore::DataClass::Private,
                untrusted: false,
            };
            text.push_str(&serde_json::to_string(&note)?);
            text.push('\n');
        }
        std::fs::write(self.state().join("memory.jsonl"), text)?;
        Ok(())
    }

    fn brokerd_toml(&self, task: &Task) -> anyhow::Result<String> {
        let base = format!(
            "socket = {:?}\nstate_dir = {:?}\n[http_fetch]\nresolve = {{ \"site.test\" = [\"127.0.0.1\"] }}\n",
            self.run.join("brokerd.sock"),
            self.dir.join("brokerd"),
        );
        merged(&base, &self.fill(&task.setup.brokerd))
    }

    fn loopd_toml(&self, task: &Task, system: &Path) -> anyhow::Result<String> {
        let base = format!(
            "socket = {:?}\nstate_dir = {:?}\n[llama]\nurl = \"unix:{}\"\n\
             [broker]\nsocket = {:?}\n[baseline]\nsystem = {:?}\n\
             [approvals]\ntimeout_ms = {IGNORED_APPROVAL_TIMEOUT_MS}\n",
            self.loopd_socket(),
            self.state(),
            self.run.join("llama.sock").display(),
            self.run.join("brokerd.sock"),
            system,
        );
        merged(&base, &self.fill(&task.setup.loopd))
    }

    fn boxd_toml(
        &self,
        model: &ModelServer,
        bin: &Path,
        brokerd: &Path,
        loopd: &Path,
    ) -> anyhow::Result<String> {
        let llama_sock = self.run.join("llama.sock");
        let kv = self.state().join("kv");
        let (name, command, args, pinned) = match model {
            ModelServer::Llama {
                server,
                gguf,
                template,
                slot_ctx,
            } => {
                let mut args = vec![
                    "-m".to_string(),
                    gguf.display().to_string(),
                    "-c".to_string(),
                    (slot_ctx * 3).to_string(),
                    "--parallel".to_string(),
                    "3".to_string(),
                    "--temp".to_string(),
                    "0".to_string(),
                    "--seed".to_string(),
                    "7".to_string(),
                    "--no-webui".to_string(),
                    "--host".to_string(),
                    llama_sock.display().to_string(),
                    "--slot-save-path".to_string(),
                    kv.display().to_string(),
                ];
                if let Some(t) = template {
                    args.extend(["--chat-template-file".to_string(), t.display().to_string()]);
                }
                let pinned = template.clone().unwrap_or_else(|| gguf.clone());
                ("llama-server", server.clone(), args, pinned)
            }
            ModelServer::Fake { fakellama, script } => {
                let filled = self.dir.join("fake-script.toml");
                std::fs::write(&filled, self.fill(&std::fs::read_to_string(script)?))?;
                let args = vec![
                    "--listen".to_string(),
                    llama_sock.display().to_string(),
                    "--script".to_string(),
                    filled.display().to_string(),
                    "--slot-save-path".to_string(),
                    kv.display().to_string(),
                ];
                ("fakellama", fakellama.clone(), args, filled)
            }
        };
        let child = |name: &str, command: &Path, args: &[String], config: &Path, ready: &Path| {
            anyhow::Ok(format!(
                "[[children]]\nname = {name:?}\ncommand = {command:?}\nargs = {args:?}\n\
                 config_file = {config:?}\nconfig_sha256 = {:?}\nready = {{ socket = {ready:?} }}\n\
                 start_timeout_ms = 300000\nstop_grace_ms = 10000\n",
                sha256_file(config)?,
            ))
        };
        let sock = |name: &str| self.run.join(format!("{name}.sock"));
        let brokerd_args = ["--config".to_string(), brokerd.display().to_string()];
        let loopd_args = ["--config".to_string(), loopd.display().to_string()];
        Ok(format!(
            "notify = false\nruntime_dir = {:?}\n[restart]\nmax_restarts = 0\n[log]\nlevel = \"info\"\n\n{}\n{}\n{}with_previous = true\n",
            self.run,
            child(name, &command, &args, &pinned, &llama_sock)?,
            child(
                "brokerd",
                &bin.join("brokerd"),
                &brokerd_args,
                brokerd,
                &sock("brokerd")
            )?,
            child(
                "loopd",
                &bin.join("loopd"),
                &loopd_args,
                loopd,
                &sock("loopd")
            )?,
        ))
    }
}

/// `base` with `extra` laid over it (TOML): a key of `extra` replaces the same key of `base`,
/// tables merge key by key.
pub fn merged(base: &str, extra: &str) -> anyhow::Result<String> {
    let parse = |text: &str| {
        text.parse::<toml::Table>()
            .map_err(|e| anyhow::anyhow!("not valid TOML: {e}\n{text}"))
    };
    let mut merged = parse(base)?;
    merge_into(&mut merged, parse(extra)?);
    Ok(toml::to_string(&merged)?)
}

fn merge_into(base: &mut toml::Table, extra: toml::Table) {
    for (key, value) in extra {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(into)), toml::Value::Table(from)) => merge_into(into, from),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// The sha256 of a file, as hex.
fn sha256_file(path: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(path)
        .map_err(|e| anyhow::anyhow!("cannot read {} to pin it: {e}", path.display()))?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}

fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tasks_toml_is_merged_over_the_runners() {
        let out = merged(
            "a = 1\n[broker]\nsocket = \"/s\"\n",
            "[broker]\ncore_tools = [\"read_file\"]\n[[grants]]\ntool = \"echo\"\n",
        )
        .unwrap();
        let table: toml::Table = out.parse().unwrap();
        assert_eq!(table["broker"]["socket"].as_str(), Some("/s"));
        assert_eq!(table["broker"]["core_tools"][0].as_str(), Some("read_file"));
        assert_eq!(table["grants"][0]["tool"].as_str(), Some("echo"));
    }

    #[test]
    fn placeholders_name_the_root_and_the_site() {
        let layout = Layout::new(Path::new("/t/x"), "site.test:9");
        assert_eq!(
            layout.fill("@ROOT@/a @SITE@ @SITE_URL@/p"),
            "/t/x/root/a site.test:9 http://site.test:9/p"
        );
    }
}
