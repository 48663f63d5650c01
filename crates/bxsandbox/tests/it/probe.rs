//! The probe: the walls it finds, and failing closed.

use crate::common::walls;
use bxsandbox::{ProbeOptions, Spec, Status};

#[tokio::test]
async fn without_bwrap_on_path_the_probe_says_so_and_nothing_runs() {
    let empty = tempfile::tempdir().unwrap();
    let options = ProbeOptions {
        search_path: empty.path().as_os_str().to_owned(),
        shim: Some(env!("CARGO_BIN_EXE_bxsandbox-shim").into()),
    };
    let why = bxsandbox::probe(&options).await.unwrap_err();
    assert_eq!(
        why.to_string(),
        "unavailable: bubblewrap is not installed (no bwrap on PATH)"
    );
}

#[tokio::test]
async fn a_missing_shim_is_unavailable_by_name() {
    let options = ProbeOptions {
        search_path: std::env::var_os("PATH").unwrap_or_default(),
        shim: Some("/nonexistent/bxsandbox-shim".into()),
    };
    let why = bxsandbox::probe(&options).await.unwrap_err().reason;
    // Without bwrap the first wall missing is named instead.
    assert!(
        why.contains("/nonexistent/bxsandbox-shim") || why.contains("no bwrap"),
        "{why}"
    );
}

#[tokio::test]
async fn the_probe_names_its_walls_and_true_runs() {
    let Some(walls) = walls().await else { return };
    assert!(walls.bwrap().is_absolute());
    let landlock = match walls.landlock() {
        Some(abi) => format!("bubblewrap + Landlock v{abi}"),
        None => "bubblewrap".to_owned(),
    };
    let network = match walls.network() {
        bxsandbox::Network::Slirp(_) => "network through slirp4netns".to_owned(),
        bxsandbox::Network::Unavailable(why) => format!("no network: {why}"),
    };
    assert_eq!(walls.describe(), format!("{landlock}; {network}"));
    let outcome = bxsandbox::run(&Spec::new(["true"]), &walls).await.unwrap();
    assert_eq!(outcome.status, Status::Exited(0));
    let outcome = bxsandbox::run(&Spec::new(["false"]), &walls).await.unwrap();
    assert_eq!(outcome.status, Status::Exited(1));
}
