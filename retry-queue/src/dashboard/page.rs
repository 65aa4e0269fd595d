//! The page: one HTML shell, its script and its style, embedded in the binary. The shell holds
//! no task data (the script fetches it from the API and writes it as text); the two values it
//! does carry, the path the router is mounted at and read-only mode, are HTML-escaped.

use axum::extract::Request;
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/dash.js");
const CHART: &str = include_str!("assets/chart.js");
const WORKERS_SCRIPT: &str = include_str!("assets/workers.js");
const VIEWS_SCRIPT: &str = include_str!("assets/views.js");
const TASKS_SCRIPT: &str = include_str!("assets/tasks.js");
const STYLE: &str = include_str!("assets/dash.css");

/// `GET /`: the shell, with the mount path (for the script's API calls) and read-only mode.
pub(crate) async fn index(read_only: bool, req: Request) -> Html<String> {
    let base = mount_path(&req);
    Html(render(&base, read_only))
}

/// The path the router is nested at in an app (`""` at the root), from axum's `NestedPath`.
fn mount_path(req: &Request) -> String {
    req.extensions()
        .get::<axum::extract::NestedPath>()
        .map(|nested| nested.as_str().trim_end_matches('/').to_owned())
        .unwrap_or_default()
}

/// The shell with its two placeholders filled in, escaped.
pub(crate) fn render(base: &str, read_only: bool) -> String {
    INDEX
        .replace("{{BASE}}", &escape(base))
        .replace("{{READ_ONLY}}", if read_only { "true" } else { "false" })
}

/// `GET /assets/dash.js`.
pub(crate) async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}

/// `GET /assets/chart.js`: the queue page's chart of its history.
pub(crate) async fn chart() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        CHART,
    )
        .into_response()
}

/// `GET /assets/workers.js`: the Workers and Schedulers pages and the "no worker" banner.
pub(crate) async fn workers_script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        WORKERS_SCRIPT,
    )
        .into_response()
}

/// `GET /assets/views.js`: the router and the refresh chain.
pub(crate) async fn views_script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        VIEWS_SCRIPT,
    )
        .into_response()
}

/// `GET /assets/tasks.js`: the task lists (search, selections, flags) and the task page.
pub(crate) async fn tasks_script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        TASKS_SCRIPT,
    )
        .into_response()
}

/// The page's icon: a circling arrow (a retry), so that a page load asks for no `/favicon.ico`
/// (a 404, logged as an error in the console; outside the mount path, it is not ours either).
const FAVICON: &str = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 16 16\">\
<path d=\"M13 8a5 5 0 1 1-1.5-3.5\" fill=\"none\" stroke=\"#2563eb\" stroke-width=\"2\"/>\
<path d=\"M12 1v4H8\" fill=\"none\" stroke=\"#2563eb\" stroke-width=\"2\"/></svg>";

/// `GET /assets/favicon.svg`: the page's icon.
pub(crate) async fn favicon() -> Response {
    ([(header::CONTENT_TYPE, "image/svg+xml")], FAVICON).into_response()
}

/// `GET /assets/dash.css`.
pub(crate) async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}

/// Escapes text for HTML content and quoted attribute values.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
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
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            escape(r#"<script>alert("x" & 'y')</script>"#),
            "&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)&lt;/script&gt;"
        );
    }

    #[test]
    fn the_mount_path_is_escaped() {
        let html = render("/\"><script>alert(1)</script>", true);
        assert!(!html.contains("<script>alert(1)</script>"));
        assert!(html.contains("&quot;&gt;&lt;script&gt;"));
        assert!(html.contains(r#"data-read-only="true""#));
        assert!(!html.contains("{{"));
    }
}
