//! Headless Chromium, for the pages cairn serves: what a browser's DOM holds once a page's
//! script ran, and screenshots.

use std::process::Command;

/// Chromium without a display, as root (no sandbox), given time for the page's script.
pub fn chromium(args: &[String]) -> std::process::Output {
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--virtual-time-budget=8000",
        ])
        .args(args)
        .output()
        .expect("chromium (Debian package chromium; contrib/test.sh installs it)");
    assert!(
        out.status.success(),
        "chromium {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The page after its script ran, as Chromium's DOM.
pub fn rendered(url: &str) -> String {
    String::from_utf8(chromium(&["--dump-dom".into(), url.into()]).stdout).unwrap()
}

/// The text of the element with `id` in a dumped DOM.
pub fn text_of(dom: &str, id: &str) -> String {
    let at = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in {dom}"));
    let start = at + dom[at..].find('>').unwrap() + 1;
    let end = start + dom[start..].find('<').unwrap();
    dom[start..end].to_string()
}

/// The value of attribute `name` of the element with `id`.
pub fn attribute_of(dom: &str, id: &str, name: &str) -> Option<String> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let tag_end = at + dom[at..].find('>')?;
    let tag_start = dom[..at].rfind('<')?;
    let tag = &dom[tag_start..tag_end];
    let from = tag.find(&format!("{name}=\""))? + name.len() + 2;
    Some(tag[from..from + tag[from..].find('"')?].to_string())
}

/// Saves a screenshot of `url` at `$CARGO_TARGET_TMPDIR/NAME` (for people to look at), `width`
/// by `height` pixels, and checks it is a PNG of some substance.
pub fn screenshot(url: &str, name: &str, width: u32, height: u32) {
    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_file(&shot);
    chromium(&[
        format!("--screenshot={}", shot.display()),
        format!("--window-size={width},{height}"),
        url.to_string(),
    ]);
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "screenshot of {} bytes",
        png.len()
    );
}
