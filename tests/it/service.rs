//! `contrib/cairn.service`: systemd accepts the unit (`systemd-analyze verify`, with its
//! `ExecStart` pointed at the binary under test), rates its sandbox as well hardened
//! (`systemd-analyze security --offline`), and cairn accepts the command line the unit runs.

use std::path::Path;
use std::process::Command;

/// The unit, its `ExecStart` binary replaced by the one under test.
fn unit_for_this_build(dir: &Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/contrib/cairn.service"
    ))
    .unwrap();
    assert!(
        text.contains("ExecStart=/usr/local/bin/cairn "),
        "the unit runs /usr/local/bin/cairn"
    );
    let path = dir.join("cairn.service");
    std::fs::write(
        &path,
        text.replace("/usr/local/bin/cairn", env!("CARGO_BIN_EXE_cairn")),
    )
    .unwrap();
    path
}

#[test]
fn systemd_accepts_the_unit_and_rates_it_hardened() {
    assert!(
        Command::new("systemd-analyze")
            .arg("--version")
            .output()
            .is_ok(),
        "systemd-analyze missing: `apt-get install systemd` (contrib/test.sh does)"
    );
    let tmp = tempfile::tempdir().unwrap();
    let unit = unit_for_this_build(tmp.path());
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && said.trim().is_empty(),
        "systemd-analyze verify: {said}"
    );

    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=true"])
        .arg(&unit)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let level: f64 = text
        .lines()
        .find_map(|l| l.split("Overall exposure level for cairn.service: ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in: {text}"));
    // systemd's scale: 0 (no exposure) to 10 (unsandboxed); under 2 is "OK".
    assert!(level <= 2.0, "exposure {level}: {text}");
}

#[test]
fn cairn_accepts_the_units_command_line() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/contrib/cairn.service"
    ))
    .unwrap();
    let exec = text
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap();
    let mut args: Vec<String> = exec.split_whitespace().skip(1).map(String::from).collect();
    assert_eq!(args.last().map(String::as_str), Some("run"));
    // The same options, with a scratch data dir and the example configuration, asking for the
    // status instead of running: a misspelled option would stop clap first (exit code 2).
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("cairn.toml");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/config/cairn.example.toml"),
        &config,
    )
    .unwrap();
    for (i, a) in args.clone().iter().enumerate() {
        match a.as_str() {
            "/var/lib/cairn" => args[i] = tmp.path().join("data").display().to_string(),
            "/etc/cairn/cairn.toml" => args[i] = config.display().to_string(),
            _ => {}
        }
    }
    *args.last_mut().unwrap() = "status".into();
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(&args)
        .env("CAIRN_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cairn {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("running:    false"));
}
