//! The browser client's unit tests (`web/test/*.test.mjs`) under Node's
//! built-in test runner, as part of `cargo test`: its decoder and ceilings
//! (SPEC RT-4, RT-13), the duplicate / gap / conflict table (RT-5), the
//! reconnect budgets (RT-7), the poll lease (RT-11) and the runtime driven
//! by stand-ins for fetch and the clock. Needs `node` (20 or later) on the
//! PATH; without it the test fails with one line saying so.

#![allow(clippy::expect_used, reason = "tests: a panic is the failure report")]

use std::path::Path;
use std::process::Command;

#[test]
fn the_browser_client_passes_its_node_tests() {
    let web = Path::new(env!("CARGO_MANIFEST_DIR")).join("web");
    let mut files: Vec<String> = std::fs::read_dir(web.join("test"))
        .expect("web/test is there")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".test.mjs"))
        .map(|n| format!("test/{n}"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no web/test/*.test.mjs");
    let out = match Command::new("node")
        .arg("--test")
        .args(&files)
        .current_dir(&web)
        .output()
    {
        Ok(out) => out,
        Err(e) => panic!(
            "node is needed to test the browser client (web/test), and it did not start: {e}"
        ),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "node --test failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("# fail 0"), "{stdout}");
}
