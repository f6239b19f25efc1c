//! `otb`: the command line of opaquetools. Argument parsing and dispatch only; the
//! work lives in the `pipeline`, `stages`, `datasets` and `llm` crates.

// The doc comments of `cli` are clap's help text (`<model>` is a placeholder there,
// not HTML).
#![allow(rustdoc::invalid_html_tags)]

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    // SIGPIPE stays ignored (Rust's default): a write to a chess engine that died is
    // an error (EPIPE) the engine code handles by restarting it, not a signal that
    // ends otb with a staging folder left behind. A closed pipe on stdout (`otb status
    // ... | head`) still ends otb quietly: `cli::StdoutClosed` below.
    // A file-size limit (`ulimit -f`) makes writes fail with an error the stage
    // reports (nothing is published), instead of killing the process.
    // SAFETY: setting a signal's disposition before any thread starts.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let result = cli::main();
    // How many times the command walked an experiment's drive to read the store (a
    // command reads each experiment once; tests/plan_cli.rs holds it to that).
    if std::env::var_os("OTB_TRACE_WALKS").is_some() {
        eprintln!("otb: walks: {}", stages::driver::walks());
    }
    match result {
        Ok(code) => code,
        Err(err) if err.chain().any(|c| c.is::<cli::StdoutClosed>()) => ExitCode::SUCCESS,
        Err(err) => {
            let code = cli::exit_code(&err);
            eprintln!("otb: error: {}", one_line(&err));
            if cli::class_of(&err) == Some(stages::error::ErrorClass::Bug) {
                eprintln!("otb: this is a bug in otb, not in your input or your machine; please report it with the command that gave it");
            }
            ExitCode::from(code)
        }
    }
}

/// The error and its causes on one line (`a: b: c`), without repeating a cause that the
/// message already contains.
fn one_line(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let s = cause.to_string();
        if out.contains(&s) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&s);
    }
    out.replace('\n', " ")
}
