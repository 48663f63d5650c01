//! Signing in to the homeserver: the session chatd kept, else its password or access token,
//! with the SDK's SQLite store (room state, end-to-end keys) under the state directory.

use crate::config::{Config, Credential};
use crate::error::ChatError;
use crate::store::Store;
use matrix_sdk::authentication::matrix::MatrixSession;
use matrix_sdk::{Client, SessionMeta, SessionTokens};
use std::io::Read;
use std::path::Path;

/// The name the bot's device shows in the owner's list of sessions.
pub const DEVICE_NAME: &str = "boxmaker chatd";
/// The largest credential file read, in bytes.
const MAX_CREDENTIAL_BYTES: u64 = 4096;
/// A device id for asking the homeserver whose an access token is; never stored.
const ASKING_DEVICE: &str = "CHATDWHOAMI";

/// A client signed in as the config's user: the session kept in `store` when there is one,
/// else a new one (kept there at once, so a restart reuses the device and its keys).
pub async fn signed_in(cfg: &Config, store: &Store) -> Result<Client, ChatError> {
    let client = Client::builder()
        .homeserver_url(&cfg.matrix.homeserver)
        .sqlite_store(store.sdk_dir(), None)
        .build()
        .await
        .map_err(|e| ChatError::Matrix(format!("cannot set up the client: {e}")))?;
    if let Some(session) = store.session()? {
        if session.meta.user_id.as_str() != cfg.matrix.user {
            return Err(ChatError::Config(format!(
                "the kept session is {}'s, the config names {}: move {} away to sign in anew",
                session.meta.user_id,
                cfg.matrix.user,
                store.sdk_dir().display()
            )));
        }
        client
            .restore_session(session)
            .await
            .map_err(|e| ChatError::Matrix(format!("cannot restore the kept session: {e}")))?;
        return Ok(client);
    }
    let session = match cfg.credential().map_err(ChatError::Config)? {
        Credential::Password(file) => {
            let password = read_secret(&file)?;
            client
                .matrix_auth()
                .login_username(&cfg.matrix.user, &password)
                .initial_device_display_name(DEVICE_NAME)
                .send()
                .await
                .map_err(|e| {
                    ChatError::Matrix(format!("cannot sign in as {}: {e}", cfg.matrix.user))
                })?;
            client.matrix_auth().session().ok_or_else(|| {
                ChatError::Matrix("signed in, but the client holds no session".into())
            })?
        }
        Credential::AccessToken(file) => {
            let token = read_secret(&file)?;
            let session = session_of_token(cfg, token).await?;
            client
                .restore_session(session.clone())
                .await
                .map_err(|e| ChatError::Matrix(format!("cannot use the access token: {e}")))?;
            session
        }
    };
    store.save_session(&session)?;
    tracing::info!(user = %session.meta.user_id, device = %session.meta.device_id, "signed in");
    Ok(client)
}

/// The session an access token stands for: its user and device, asked of the homeserver by a
/// client without a store.
async fn session_of_token(cfg: &Config, access_token: String) -> Result<MatrixSession, ChatError> {
    let matrix = |why: String| ChatError::Matrix(why);
    let user_id = matrix_sdk::ruma::UserId::parse(&cfg.matrix.user)
        .map_err(|e| ChatError::Config(format!("matrix.user: {e}")))?;
    let asking = Client::builder()
        .homeserver_url(&cfg.matrix.homeserver)
        .build()
        .await
        .map_err(|e| matrix(format!("cannot set up the client: {e}")))?;
    let tokens = SessionTokens {
        access_token,
        refresh_token: None,
    };
    asking
        .restore_session(MatrixSession {
            meta: SessionMeta {
                user_id,
                device_id: ASKING_DEVICE.into(),
            },
            tokens: tokens.clone(),
        })
        .await
        .map_err(|e| matrix(format!("cannot use the access token: {e}")))?;
    let whoami = asking.whoami().await.map_err(|e| {
        matrix(format!(
            "the homeserver does not take the access token: {e}"
        ))
    })?;
    if whoami.user_id.as_str() != cfg.matrix.user {
        return Err(ChatError::Config(format!(
            "the access token is {}'s, the config names {}",
            whoami.user_id, cfg.matrix.user
        )));
    }
    let device_id = whoami.device_id.ok_or_else(|| {
        ChatError::Config(
            "the access token belongs to no device (end-to-end keys need one): give a \
             password instead"
                .into(),
        )
    })?;
    Ok(MatrixSession {
        meta: SessionMeta {
            user_id: whoami.user_id,
            device_id,
        },
        tokens,
    })
}

/// The first line of the credential file `path`, which must not be empty.
fn read_secret(path: &Path) -> Result<String, ChatError> {
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_CREDENTIAL_BYTES).read_to_string(&mut text))
        .map_err(|source| ChatError::Io {
            what: "the credential file",
            path: path.to_path_buf(),
            source,
        })?;
    let secret = text.lines().next().unwrap_or("").trim().to_owned();
    if secret.is_empty() {
        return Err(ChatError::Config(format!(
            "the credential file {} is empty",
            path.display()
        )));
    }
    Ok(secret)
}
