//! The chatd process: signs in, then runs the channel until SIGTERM or SIGINT.

use crate::channel::Channel;
use crate::config::Config;
use crate::error::ChatError;
use crate::login::signed_in;
use crate::notices::Notices;
use crate::store::Store;
use matrix_sdk::ruma::RoomId;
use tokio::signal::unix::{SignalKind, signal};

/// Runs chatd with `cfg` until a signal stops it.
pub fn run(cfg: Config) -> Result<(), ChatError> {
    // matrix-sdk's HTTP client brings rustls with aws-lc-rs beside the workspace's ring: with
    // two providers built in, rustls needs the process's chosen one. `Err`: one is installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| ChatError::Config(format!("cannot start the runtime: {e}")))?;
    runtime.block_on(serve(cfg))
}

async fn serve(cfg: Config) -> Result<(), ChatError> {
    let signal_error =
        |e: std::io::Error| ChatError::Config(format!("cannot listen for signals: {e}"));
    let mut term = signal(SignalKind::terminate()).map_err(signal_error)?;
    let mut int = signal(SignalKind::interrupt()).map_err(signal_error)?;
    let store = Store::open(&cfg.state_dir)?;
    let client = tokio::select! {
        client = signed_in(&cfg, &store) => client?,
        _ = term.recv() => return Ok(()),
        _ = int.recv() => return Ok(()),
    };
    let notices = Notices {
        client: client.clone(),
        loopd: boxctl::Client::new(&cfg.loopd_socket),
        store: store.clone(),
        default_room: match cfg.matrix.notify_room.as_deref().map(RoomId::parse) {
            Some(Ok(room)) => Some(room),
            Some(Err(e)) => return Err(ChatError::Config(format!("matrix.notify_room: {e}"))),
            None => None,
        },
        max_class: cfg.matrix.max_class,
    };
    notices.prime().await?;
    let channel = Channel::new(cfg, client, store)?;
    tracing::info!("chatd serves its rooms");
    tokio::select! {
        result = channel.run() => result,
        result = notices.run() => result,
        _ = term.recv() => {
            tracing::info!("SIGTERM: chatd stops");
            Ok(())
        }
        _ = int.recv() => {
            tracing::info!("SIGINT: chatd stops");
            Ok(())
        }
    }
}
