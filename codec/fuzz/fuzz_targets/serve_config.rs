//! Arbitrary text as `dtp serve`'s TOML configuration (SPEC FRM-5: no
//! input panics; every bad input gets a one-line error).
//!
//! Input: the bytes as text; bytes that are not UTF-8 are read lossily
//! (the server refuses such a file before parsing, so the parser only ever
//! sees text, but the replacement characters are text worth trying).
//!
//! The target compiles the server's own configuration modules
//! (`tools/src/config.rs`, `realtime_cfg.rs`, `terminal_cfg.rs`; `dtp-tools`
//! is a binary crate, so they cannot be a dependency) and runs what
//! `dtp serve` runs on the file before it opens any file or port:
//! `Config::parse`, then the engine's, the realtime front end's and the
//! terminal plane's checks.
//!
//! Oracle: no panic; every error is one non-empty line; a configuration
//! that is accepted prints (`dtp serve --print-config`) and the printed
//! text reads back to the same configuration.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

#[path = "../../../tools/src"]
#[allow(dead_code, unreachable_pub)]
mod tools {
    pub(crate) mod config;
    pub(crate) mod realtime_cfg;
    pub(crate) mod terminal_cfg;
}

pub(crate) use tools::{config, realtime_cfg, terminal_cfg};

use config::Config;

/// As `dtp`'s own (`tools/src/main.rs`), which these modules call.
pub(crate) fn congestion_name(s: &str) -> Option<String> {
    match s {
        "" | "system" => None,
        name => Some(name.to_owned()),
    }
}

fn one_line<T>(what: &str, r: Result<T, String>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            assert!(!e.trim().is_empty(), "{what}: empty error");
            assert!(
                !e.contains(['\n', '\r']),
                "{what}: error of more than one line: {e:?}"
            );
            None
        }
    }
}

fn check(text: &str) {
    let Some(config) = one_line("parse", Config::parse(text, None)) else {
        return;
    };
    one_line("engine", config.engine());
    let realtime = config.realtime.with_built_ins(config.terminal.is_some());
    one_line("realtime specs", realtime.specs());
    let login = dtp_gateway::realtime::LoginKey::new([7; 32], std::time::Instant::now());
    one_line("realtime front", realtime.front(login));
    if let Some(t) = &config.terminal {
        one_line("terminal", t.plane());
    }
    // `--print-config` of an accepted file reads back the same.
    let Some(printed) = one_line("print", config::annotated(&config)) else {
        return;
    };
    let again = match Config::parse(&printed, None) {
        Ok(c) => c,
        Err(e) => panic!("printed configuration does not read back: {e}\n{printed}"),
    };
    let (a, b) = (toml::to_string(&config), toml::to_string(&again));
    assert_eq!(
        a, b,
        "printed configuration reads back different\n{printed}"
    );
    // Relative file names are resolved against the file's folder.
    assert!(Config::parse(&printed, Some(Path::new("conf"))).is_ok());
}

fuzz_target!(|data: &[u8]| {
    match std::str::from_utf8(data) {
        Ok(text) => check(text),
        Err(_) => check(&String::from_utf8_lossy(data)),
    }
});
