//! The program bubblewrap runs inside the sandbox: sets the rlimits and Landlock, then execs
//! the program (see `bxsandbox::shim`).

fn main() {
    // Lossy rather than a panic: the outer process only ever passes UTF-8.
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // On success the program has replaced this process; only an error comes back.
    let Err(err) = bxsandbox::shim::main(&args);
    eprintln!("{}: {err}", bxsandbox::shim::SHIM_NAME);
    std::process::exit(err.exit_code());
}
