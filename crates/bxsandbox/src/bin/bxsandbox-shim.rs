//! The program bubblewrap runs inside the sandbox: sets the rlimits and Landlock, then execs
//! the program (see `bxsandbox::shim`). With `--net` first, the network helper that makes a
//! run's network namespace and then becomes bubblewrap (see `bxsandbox::net`).

fn main() {
    // Lossy rather than a panic: the outer process only ever passes UTF-8.
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if args.get(1).map(String::as_str) == Some(bxsandbox::net::HELPER_ARG) {
        // On success bubblewrap has replaced this process; only an error comes back.
        let Err(err) = bxsandbox::net::helper_main(&args);
        eprintln!("{}: {err}", bxsandbox::shim::SHIM_NAME);
        std::process::exit(bxsandbox::shim::SHIM_FAILED_EXIT);
    }
    // On success the program has replaced this process; only an error comes back.
    let Err(err) = bxsandbox::shim::main(&args);
    eprintln!("{}: {err}", bxsandbox::shim::SHIM_NAME);
    std::process::exit(err.exit_code());
}
