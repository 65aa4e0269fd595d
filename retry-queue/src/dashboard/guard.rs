//! What every request goes through before a handler: the bearer token, read-only mode, the
//! same-origin check on POSTs, the Host check of a token-less loopback dashboard, and the
//! security headers of every answer.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::api::ApiError;

/// How the dashboard's router guards its routes (built from the options by
/// [`router_with`](super::router_with)).
#[derive(Clone, Debug, Default)]
pub(crate) struct Guard {
    /// `Some(T)`: every `/api/…` request needs `Authorization: Bearer T`.
    pub(crate) token: Option<String>,
    /// Every POST is refused with 403.
    pub(crate) read_only: bool,
    /// Only `Host: localhost`, `127.x.y.z` or `[::1]` (any port) is answered: a token-less
    /// dashboard on a loopback address, which a page of another site could otherwise reach
    /// through DNS rebinding (its own host name pointed at 127.0.0.1).
    pub(crate) loopback_hosts_only: bool,
}

/// The middleware: checks in the order Host, token (401), read-only (403), origin (403);
/// then adds the security headers.
pub(crate) async fn check(State(guard): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    let is_api = req.uri().path().starts_with("/api/") || req.uri().path() == "/api";
    if let Err(refusal) = guard.admit(req.method(), req.headers(), is_api) {
        return with_headers(refusal.into_response(), true);
    }
    with_headers(next.run(req).await, is_api)
}

impl Guard {
    fn admit(&self, method: &Method, headers: &HeaderMap, is_api: bool) -> Result<(), ApiError> {
        if self.loopback_hosts_only && !host_is_loopback(headers) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "this dashboard has no token and answers only to localhost, 127.0.0.1 or [::1] \
                 as the Host",
            ));
        }
        if let Some(token) = &self.token {
            // The page and its script and style hold no data: the browser loads them without
            // a header, and the script asks for the token. Everything under /api needs it.
            if is_api && !bearer_matches(headers, token) {
                return Err(ApiError::unauthorized());
            }
        }
        if method == Method::GET || method == Method::HEAD {
            return Ok(());
        }
        if self.read_only {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "this dashboard is read-only (started with --read-only): no action is allowed",
            ));
        }
        same_origin(headers)
    }
}

/// `Authorization: Bearer T` with exactly this token (compared in constant time).
fn bearer_matches(headers: &HeaderMap, token: &str) -> bool {
    let Some(given) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    else {
        return false;
    };
    constant_time_eq(given.trim().as_bytes(), token.as_bytes())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A POST must come from the dashboard's own origin: its `Origin` (or, without one,
/// `Sec-Fetch-Site`, then `Referer`) must name the host the request was sent to. A request with
/// none of them is no browser's cross-site request (curl, scripts) and passes.
fn same_origin(headers: &HeaderMap) -> Result<(), ApiError> {
    let refused = |why: &str| {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!("cross-origin request refused: {why}"),
        ))
    };
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        return match (authority(origin), host) {
            (Some(authority), Some(host)) if authority.eq_ignore_ascii_case(host) => Ok(()),
            _ => refused("the Origin is not this dashboard"),
        };
    }
    if let Some(site) = headers.get("sec-fetch-site") {
        return match site.to_str().unwrap_or("") {
            "same-origin" | "none" => Ok(()),
            _ => refused("Sec-Fetch-Site is not same-origin"),
        };
    }
    if let Some(referer) = headers.get(header::REFERER) {
        let referer = referer.to_str().unwrap_or("");
        return match (authority(referer), host) {
            (Some(authority), Some(host)) if authority.eq_ignore_ascii_case(host) => Ok(()),
            _ => refused("the Referer is not this dashboard"),
        };
    }
    Ok(())
}

/// The `host[:port]` of an `http(s)://` URL or origin; `None` for anything else (`null`).
fn authority(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    (!authority.is_empty() && !authority.contains('@')).then_some(authority)
}

/// Whether the `Host` header names a loopback host (a missing one, HTTP/1.0, passes).
fn host_is_loopback(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST) else {
        return true;
    };
    let Ok(host) = host.to_str() else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _port)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The headers of every answer: no sniffing, no framing, no referrer; a strict content
/// security policy (only this dashboard's own script and style); no caching of API answers.
fn with_headers(mut response: Response, is_api: bool) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
             img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
        ),
    );
    if is_api {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn origin_must_name_the_host() {
        let ok = headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
        ]);
        assert!(same_origin(&ok).is_ok());
        let other = headers(&[("host", "127.0.0.1:8080"), ("origin", "http://evil.test")]);
        assert!(same_origin(&other).is_err());
        let port = headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:9090"),
        ]);
        assert!(same_origin(&port).is_err());
        let null = headers(&[("host", "127.0.0.1:8080"), ("origin", "null")]);
        assert!(same_origin(&null).is_err());
        let site = headers(&[("host", "127.0.0.1:8080"), ("sec-fetch-site", "cross-site")]);
        assert!(same_origin(&site).is_err());
        let referer = headers(&[
            ("host", "127.0.0.1:8080"),
            ("referer", "http://evil.test/page"),
        ]);
        assert!(same_origin(&referer).is_err());
        let script = headers(&[("host", "127.0.0.1:8080")]);
        assert!(same_origin(&script).is_ok());
    }

    #[test]
    fn loopback_hosts() {
        for host in [
            "localhost:8080",
            "127.0.0.1:1",
            "[::1]:80",
            "127.0.0.1",
            "LOCALHOST",
        ] {
            let map = headers(&[("host", host)]);
            assert!(host_is_loopback(&map), "{host}");
        }
        for host in ["evil.test:8080", "10.0.0.1:80", "localhost.evil.test"] {
            let map = headers(&[("host", host)]);
            assert!(!host_is_loopback(&map), "{host}");
        }
    }

    #[test]
    fn bearer() {
        let map = headers(&[("authorization", "Bearer s3cret")]);
        assert!(bearer_matches(&map, "s3cret"));
        assert!(!bearer_matches(&map, "s3cre"));
        assert!(!bearer_matches(&headers(&[]), "s3cret"));
        let basic = headers(&[("authorization", "Basic s3cret")]);
        assert!(!bearer_matches(&basic, "s3cret"));
    }
}
