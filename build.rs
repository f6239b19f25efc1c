//! Records the commit `otb` is built from (`OTB_COMMIT`, empty outside a git
//! checkout), which `otb report` writes into a report's provenance.

fn main() {
    // A commit, a checkout or a branch switch moves HEAD's log.
    println!("cargo:rerun-if-changed=.git/logs/HEAD");
    println!("cargo:rerun-if-env-changed=OTB_COMMIT");
    let commit = std::env::var("OTB_COMMIT").ok().unwrap_or_else(|| {
        std::process::Command::new("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    });
    println!("cargo:rustc-env=OTB_COMMIT={commit}");
}
