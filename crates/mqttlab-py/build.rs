//! Names the source tree the module is built from, so that every run's manifest can say which
//! engine measured it: the commit checked out at build time (`git rev-parse HEAD`), with
//! `+modified` when the Rust sources then differed from it; `unknown` outside a git checkout (a
//! source archive).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".to_owned());
    // `:/` roots the paths at the repository's top, whatever directory cargo runs this in.
    let modified = git(&["status", "--porcelain", "--", ":/crates", ":/Cargo.toml", ":/Cargo.lock"]).is_some_and(|changes| !changes.is_empty());
    println!("cargo:rustc-env=MQTTLAB_ENGINE_COMMIT={commit}{}", if modified { "+modified" } else { "" });
    // Run again when the engine's sources change (as cargo would without these lines) and when
    // the checkout moves to another commit.
    for path in ["../../crates", "../../Cargo.toml", "../../Cargo.lock", "../../.git/HEAD", "../../.git/refs/heads"] {
        println!("cargo:rerun-if-changed={path}");
    }
}
