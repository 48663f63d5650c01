//! What a chatd config must say, and how its credential is found.
#![allow(clippy::unwrap_used)]

use super::*;

fn good() -> Config {
    Config {
        matrix: Matrix {
            homeserver: "https://matrix.example.org".into(),
            user: "@box:example.org".into(),
            password_file: Some(PathBuf::from("/run/secrets/matrix-password")),
            owners: vec!["@me:example.org".into()],
            ..Matrix::default()
        },
        rooms: vec![RoomEntry {
            room: "!home:example.org".into(),
            session: "home".into(),
        }],
        ..Config::default()
    }
}

fn problems(cfg: &Config) -> Vec<String> {
    match cfg.validate() {
        Ok(()) => Vec::new(),
        Err(problems) => problems
            .iter()
            .map(|p| format!("{}: {}", p.key, p.message))
            .collect(),
    }
}

#[test]
fn a_complete_config_is_valid() {
    assert_eq!(problems(&good()), Vec::<String>::new());
}

#[test]
fn a_config_without_owners_or_credentials_says_so() {
    let mut cfg = good();
    cfg.matrix.owners.clear();
    cfg.matrix.password_file = None;
    let all = problems(&cfg).join("\n");
    assert!(all.contains("matrix.owners"), "{all}");
    assert!(all.contains("exactly one of matrix.password_file"), "{all}");
    let mut both = good();
    both.matrix.access_token_file = Some(PathBuf::from("/t"));
    assert!(problems(&both).join("\n").contains("exactly one"));
}

#[test]
fn ids_that_are_not_matrix_ids_are_named() {
    let mut cfg = good();
    cfg.matrix.user = "box".into();
    cfg.matrix.owners = vec!["me@example.org".into(), "@box:example.org".into()];
    cfg.rooms.push(RoomEntry {
        room: "home".into(),
        session: "sub-x".into(),
    });
    cfg.rooms.push(cfg.rooms[0].clone());
    let all = problems(&cfg).join("\n");
    for needle in [
        "matrix.user",
        "matrix.owners[0]",
        "rooms[1].room",
        "rooms[1].session",
        "rooms[2].room: this room is listed twice",
    ] {
        assert!(all.contains(needle), "{needle}: {all}");
    }
    let mut own = good();
    own.matrix.owners = vec![own.matrix.user.clone()];
    assert!(problems(&own).join("\n").contains("its own owner"));
}

#[test]
fn a_relative_credential_lies_under_the_credentials_directory() {
    let cfg = good();
    assert_eq!(
        cfg.credential().unwrap(),
        Credential::Password(PathBuf::from("/run/secrets/matrix-password"))
    );
    let mut token = good();
    token.matrix.password_file = None;
    token.matrix.access_token_file = Some(PathBuf::from("matrix-token"));
    // The test process has no $CREDENTIALS_DIRECTORY (systemd sets it for a unit).
    if std::env::var_os(CREDENTIALS_DIRECTORY).is_none() {
        let err = token.credential().unwrap_err();
        assert!(err.contains("CREDENTIALS_DIRECTORY"), "{err}");
    }
}

#[test]
fn the_shipped_config_is_valid_and_names_its_credential_relatively() {
    let shipped = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/chatd.toml");
    let cfg: Config = bxconfig::Loader::new(shipped, ENV_PREFIX)
        .load_valid()
        .unwrap();
    assert_eq!(cfg.matrix.max_class, DataClass::Private);
    assert_eq!(
        cfg.matrix.password_file.as_deref(),
        Some(Path::new("matrix-password"))
    );
    assert_eq!(cfg.loopd_socket, Config::default().loopd_socket);
}
