//! The command-line flags every daemon shares: `--config FILE` and `--check-config FILE`.

use std::path::PathBuf;

/// `--config FILE` and `--check-config FILE`, to `#[command(flatten)]` into a daemon's flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConfigArgs {
    /// The config file (TOML) to run with. Environment variables PREFIX_SECTION__KEY and the
    /// flags below override what it says.
    #[arg(long, value_name = "FILE", conflicts_with = "check_config")]
    pub config: Option<PathBuf>,
    /// Check FILE instead of running: print the resolved config (file, then environment
    /// overrides, then flags) as TOML and exit 0, or print every problem (file, key, why) and
    /// exit 1.
    #[arg(long, value_name = "FILE")]
    pub check_config: Option<PathBuf>,
}
