//! The walls: what the program cannot read, write, reach or inherit.

use crate::common::{open_dir, pin, sh, stdout, walls};
use bxsandbox::{Spec, Status};

#[tokio::test]
async fn shadow_and_root_cannot_be_read() {
    let Some(walls) = walls().await else { return };
    let outcome = sh(&walls, "cat /etc/shadow", Spec::new(["sh"])).await;
    assert_ne!(outcome.status, Status::Exited(0));
    let outcome = sh(&walls, "ls /root", Spec::new(["sh"])).await;
    assert_ne!(outcome.status, Status::Exited(0));
    // Nor a host directory that was not bound.
    let outcome = sh(&walls, "ls /home /var /work", Spec::new(["sh"])).await;
    assert_ne!(outcome.status, Status::Exited(0));
}

#[tokio::test]
async fn writing_outside_rw_paths_fails_also_through_a_planted_symlink() {
    let Some(walls) = walls().await else { return };
    let rw = open_dir();
    let outside = open_dir();
    std::os::unix::fs::symlink(outside.path(), rw.path().join("escape")).unwrap();
    let mut spec = Spec::new(["sh"]);
    spec.rw_paths.push(pin(rw.path()));
    let script = "echo in > inside.txt; echo out > escape/planted.txt; echo x > /usr/x; \
                  echo done";
    let outcome = sh(&walls, script, spec).await;
    assert_eq!(stdout(&outcome), "done\n");
    assert_eq!(
        std::fs::read_to_string(rw.path().join("inside.txt")).unwrap(),
        "in\n"
    );
    assert!(!outside.path().join("planted.txt").exists());
    assert!(!std::path::Path::new("/usr/x").exists());
}

#[tokio::test]
async fn a_symlinked_rw_path_binds_its_target_not_the_link() {
    let Some(walls) = walls().await else { return };
    let real = open_dir();
    let links = open_dir();
    let link = links.path().join("link");
    std::os::unix::fs::symlink(real.path(), &link).unwrap();
    let mut spec = Spec::new(["sh"]);
    spec.rw_paths.push(pin(&link));
    spec.cwd = Some(link);
    let outcome = sh(&walls, "pwd", spec).await;
    assert_eq!(
        stdout(&outcome).trim(),
        real.path().canonicalize().unwrap().to_str().unwrap()
    );
}

#[tokio::test]
async fn a_loopback_server_of_the_host_cannot_be_reached_without_network() {
    let Some(walls) = walls().await else { return };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // bash's /dev/tcp opens a TCP connection with no other tool.
    let script = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let mut spec = Spec::new(["bash"]);
    spec.argv = vec!["bash".into(), "-c".into(), script.clone()];
    let outcome = bxsandbox::run(&spec, &walls).await.unwrap();
    assert_ne!(stdout(&outcome), "connected\n");
    assert_ne!(outcome.status, Status::Exited(0));

    // The server is there: the host itself connects (with network = true the sandbox does
    // not either: `network::with_network_the_hosts_loopback_cannot_be_reached`).
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
}

#[tokio::test]
async fn the_environment_is_the_fixed_list_plus_the_specs() {
    let Some(walls) = walls().await else { return };
    let mut spec = Spec::new(["env"]);
    spec.env.push(("GREETING".into(), "hello".into()));
    let outcome = bxsandbox::run(&spec, &walls).await.unwrap();
    let mut names: Vec<String> = stdout(&outcome)
        .lines()
        .filter_map(|l| l.split_once('=').map(|(n, _)| n.to_owned()))
        .collect();
    names.sort();
    // PWD is bubblewrap's own, from --chdir.
    assert_eq!(
        names,
        ["GREETING", "HOME", "LANG", "PATH", "PWD", "TERM"],
        "{outcome:?}"
    );
    assert!(stdout(&outcome).contains("TERM=dumb\n"));
    assert!(stdout(&outcome).contains("HOME=/tmp\n"));
}

#[tokio::test]
async fn an_env_value_reaches_the_program_but_not_bubblewraps_command_line() {
    let Some(walls) = walls().await else { return };
    let value = "s3cr3t-token-value";
    let mut spec = Spec::new(["sh"]);
    spec.env.push(("API_KEY".into(), value.into()));
    // Inside the pid namespace, pid 1 is bubblewrap itself (its init), with bubblewrap's
    // command line: what any user of the host could read in /proc/PID/cmdline.
    let script = "printf 'env=%s\\n' \"$API_KEY\"; tr '\\0' ' ' < /proc/1/cmdline";
    let outcome = sh(&walls, script, spec).await;
    let out = stdout(&outcome);
    assert_eq!(outcome.status, Status::Exited(0), "{outcome:?}");
    assert!(out.starts_with(&format!("env={value}\n")), "{out}");
    let cmdline = out.lines().nth(1).unwrap_or_default();
    assert!(cmdline.contains("--unshare-all"), "{out}");
    assert!(!cmdline.contains(value), "{out}");
}

#[tokio::test]
async fn no_new_privileges_and_no_capabilities_inside() {
    let Some(walls) = walls().await else { return };
    let script = "grep -E '^(NoNewPrivs|CapEff|CapBnd)' /proc/self/status";
    let outcome = sh(&walls, script, Spec::new(["sh"])).await;
    let out = stdout(&outcome);
    assert!(out.contains("NoNewPrivs:\t1"), "{out}");
    assert!(out.contains("CapEff:\t0000000000000000"), "{out}");
    assert!(out.contains("CapBnd:\t0000000000000000"), "{out}");
}

#[tokio::test]
async fn stdin_is_fed_and_the_pid_namespace_is_private() {
    let Some(walls) = walls().await else { return };
    let mut spec = Spec::new(["sh"]);
    spec.stdin = b"one\ntwo\n".to_vec();
    let outcome = sh(&walls, "wc -l; ls /proc | grep -c '^[0-9]'", spec).await;
    let out = stdout(&outcome);
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("2"));
    // bubblewrap's init, sh, ls and grep at most: none of the host's processes.
    let seen: u32 = lines.next().unwrap().parse().unwrap();
    assert!(seen <= 5, "{out}");
}

#[tokio::test]
async fn landlock_when_the_kernel_has_it_denies_what_the_binds_allow() {
    let Some(walls) = walls().await else { return };
    if walls.landlock().is_none() {
        return;
    }
    // bubblewrap lets anyone list the sandbox's root; Landlock's rules cover only the binds,
    // /proc, /dev and /tmp, so the root itself is beneath no rule and cannot be listed.
    let outcome = sh(&walls, "ls / >/dev/null && echo listed", Spec::new(["sh"])).await;
    assert_eq!(stdout(&outcome), "", "{outcome:?}");
}
