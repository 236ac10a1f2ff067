//! How the explorer's pages are written: every text from the chain or the visitor escaped on
//! its way in ([`Html::text`]), amounts, times and links in one form, and the page around them
//! (the same look as the status page, no script, nothing from elsewhere).

use std::fmt::Write;

use bitcoin::Amount;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Response, StatusCode};

/// What the explorer's pages may load: their own inline style, nothing else; forms post to
/// this origin only; no other site frames them.
const POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// A page's body being written. Text goes in through [`Html::text`] (escaped); markup through
/// [`Html::raw`], from this module's callers' own literals only. Links are relative to the page
/// (`root` leads from it to the server's root), so the pages work behind a proxy that serves
/// cairn under a path of its own.
pub struct Html {
    out: String,
    root: String,
}

impl Html {
    /// A page at `path` (the request's path): its links climb one level for each of its
    /// folders.
    pub fn at(path: &str) -> Self {
        let depth = path.matches('/').count().saturating_sub(1);
        Html {
            out: String::new(),
            root: "../".repeat(depth),
        }
    }

    /// The same page's other part (its links as relative).
    pub fn part(&self) -> Self {
        Html {
            out: String::new(),
            root: self.root.clone(),
        }
    }

    /// `path` (from the server's root: `/explorer/...`) relative to this page.
    pub fn relative(&self, path: &str) -> String {
        let relative = format!("{}{}", self.root, path.trim_start_matches('/'));
        match relative.is_empty() {
            true => "./".into(),
            false => relative,
        }
    }

    /// Appends markup written by the explorer itself (never a field of the chain or a request).
    pub fn raw(&mut self, markup: &str) -> &mut Self {
        self.out.push_str(markup);
        self
    }

    /// Appends `text` escaped for an element's content or a quoted attribute.
    pub fn text(&mut self, text: impl std::fmt::Display) -> &mut Self {
        let mut plain = String::new();
        let _ = write!(plain, "{text}");
        escape_into(&mut self.out, &plain);
        self
    }

    /// Appends `text` escaped, cut after [`MAX_TEXT`] characters (a script of a megabyte).
    pub fn short_text(&mut self, text: &str) -> &mut Self {
        match text.char_indices().nth(MAX_TEXT) {
            Some((at, _)) => self.text(&text[..at]).raw("…"),
            None => self.text(text),
        }
    }

    /// A link to `path` (from the server's root, built from parsed values) with `text` escaped.
    pub fn link(&mut self, path: &str, text: impl std::fmt::Display) -> &mut Self {
        let href = self.relative(path);
        self.raw("<a href=\"")
            .text(href)
            .raw("\">")
            .text(text)
            .raw("</a>")
    }

    /// A row of a definition list: `name` (the explorer's) and `value` (escaped).
    pub fn pair(&mut self, name: &str, value: impl std::fmt::Display) -> &mut Self {
        self.raw("<dt>")
            .raw(name)
            .raw("</dt><dd>")
            .text(value)
            .raw("</dd>")
    }

    /// The markup written so far.
    pub fn into_string(self) -> String {
        self.out
    }
}

/// Characters of a script or of an OP_RETURN's text a page shows at most.
pub const MAX_TEXT: usize = 1_000;

/// Escapes the five characters that matter in HTML content and quoted attributes.
fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

/// An amount in BTC with its eight decimals, as Core's RPC and explorers show it.
pub fn btc(sats: u64) -> String {
    format!("{:.8} BTC", Amount::from_sat(sats).to_btc())
}

/// A signed amount in BTC (a script's net change in a transaction).
pub fn signed_btc(sats: i64) -> String {
    let sign = if sats < 0 { "-" } else { "+" };
    format!("{sign}{}", btc(sats.unsigned_abs()))
}

/// A Unix time as UTC `YYYY-MM-DD HH:MM:SS`.
pub fn utc(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A whole page: `title` (escaped) over `body`, answered with `status`.
pub fn page(status: StatusCode, title: &str, body: Html) -> Response<Full<Bytes>> {
    let mut html = body.part();
    let (home, search, mempool) = (
        html.relative("/"),
        html.relative("/explorer/search"),
        html.relative("/explorer/mempool"),
    );
    html.raw(HEAD)
        .raw("<title>")
        .text(title)
        .raw(" · cairn</title></head><body><header><b><a href=\"")
        .text(home)
        .raw("\">cairn</a></b><form action=\"")
        .text(search)
        .raw(SEARCH)
        .text(mempool)
        .raw("\">mempool</a></header><main><h1>")
        .text(title)
        .raw("</h1>")
        .raw(&body.into_string())
        .raw("</main></body></html>");
    let mut response = Response::new(Full::new(Bytes::from(html.into_string())));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(
        hyper::header::CONTENT_SECURITY_POLICY,
        hyper::header::HeaderValue::from_static(POLICY),
    );
    headers.insert(
        hyper::header::X_CONTENT_TYPE_OPTIONS,
        hyper::header::HeaderValue::from_static("nosniff"),
    );
    response
}

/// A redirect from the page at `from` (the request's path) to `to` (a path from the server's
/// root, built from parsed values), relative as the pages' links are.
pub fn see_other(from: &str, to: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::SEE_OTHER;
    let location = Html::at(from).relative(to);
    if let Ok(value) = hyper::header::HeaderValue::from_str(&location) {
        response
            .headers_mut()
            .insert(hyper::header::LOCATION, value);
    }
    response
}

const HEAD: &str = r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; background: #f4f5f7; color: #1d232b; }
header { background: #1d232b; color: #fff; padding: 10px 20px; display: flex; gap: 16px; align-items: center; flex-wrap: wrap; }
header a { color: #fff; } header b { font-size: 18px; }
header input { width: min(60ch, 70vw); font: inherit; padding: 3px 6px; }
main { padding: 16px 20px; }
h1 { font-size: 18px; margin: 0 0 12px; overflow-wrap: anywhere; }
section { background: #fff; border-radius: 6px; padding: 12px 16px; margin-bottom: 16px; box-shadow: 0 1px 2px rgba(0,0,0,.08); }
h2 { font-size: 13px; text-transform: uppercase; letter-spacing: .05em; color: #5a6675; margin: 0 0 8px; }
dl { display: grid; grid-template-columns: auto 1fr; gap: 2px 12px; margin: 0; }
dt { color: #5a6675; } dd { margin: 0; font-variant-numeric: tabular-nums; overflow-wrap: anywhere; }
table { border-collapse: collapse; width: 100%; font-size: 12px; }
td, th { text-align: left; padding: 3px 8px 3px 0; vertical-align: top; overflow-wrap: anywhere; }
th { color: #5a6675; font-weight: 600; }
.hash, td.hash { font-family: ui-monospace, monospace; font-size: 12px; }
.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.bar { fill: #2f6db5; } svg text { font-size: 10px; fill: #5a6675; }
</style>"#;

/// The search form after its action, up to the mempool link's target.
const SEARCH: &str = r#"" method="get" role="search"><input name="q" placeholder="address, txid, block hash or height, txid:vout" aria-label="search"> <button>Search</button></form><a href=""#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_relative_to_the_page() {
        let tx = "/explorer/tx/ab";
        assert_eq!(
            Html::at("/explorer/block/00").relative(tx),
            "../../explorer/tx/ab"
        );
        assert_eq!(
            Html::at("/explorer/mempool").relative(tx),
            "../explorer/tx/ab"
        );
        assert_eq!(Html::at("/explorer").relative(tx), "explorer/tx/ab");
        let mut html = Html::at("/explorer/tx/ab");
        html.link("/tx/ab/hex", "<hex>");
        assert_eq!(
            html.into_string(),
            "<a href=\"../../tx/ab/hex\">&lt;hex&gt;</a>"
        );
    }

    #[test]
    fn long_text_is_cut() {
        let mut html = Html::at("/");
        html.short_text(&"é".repeat(MAX_TEXT + 5));
        assert_eq!(html.into_string(), format!("{}…", "é".repeat(MAX_TEXT)));
    }

    #[test]
    fn text_is_escaped_and_markup_kept() {
        let mut html = Html::at("/");
        html.raw("<p>")
            .text("<script>alert('x') & \"y\"</script>")
            .raw("</p>");
        assert_eq!(
            html.into_string(),
            "<p>&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;</p>"
        );
    }

    #[test]
    fn amounts_and_times_read_as_core_shows_them() {
        assert_eq!(btc(0), "0.00000000 BTC");
        assert_eq!(btc(2_100_000_000_000_000), "21000000.00000000 BTC");
        assert_eq!(signed_btc(-150_000_000), "-1.50000000 BTC");
        assert_eq!(signed_btc(1), "+0.00000001 BTC");
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_231_006_505), "2009-01-03 18:15:05 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(4_102_444_799), "2099-12-31 23:59:59 UTC");
    }
}
