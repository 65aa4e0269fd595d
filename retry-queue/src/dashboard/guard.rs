//! What every request goes through before a handler: the bearer token (a client address guessing it is locked out, see
//! [`throttle`](super::throttle)), read-only mode, the same-origin check on POSTs, the Host
//! check of a token-less loopback dashboard, and the security headers of every answer.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::ApiError;
use super::throttle::{Client, Throttle, Verdict, retry_after_secs};

/// The SHA-256 of a token: what the guard compares, in constant time, so that neither where a
/// guess first differs nor the secret's length shows in the time taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TokenDigest([u8; 32]);

impl TokenDigest {
    pub(crate) fn of(token: &str) -> TokenDigest {
        TokenDigest(Sha256::digest(token.as_bytes()).into())
    }

    /// Whether `given` is the token, in constant time (`subtle`).
    fn matches(&self, given: &str) -> bool {
        TokenDigest::of(given).0.ct_eq(&self.0).into()
    }
}

/// How the dashboard's router guards its routes (built from the options by
/// [`router_with`](super::router_with)).
#[derive(Debug, Default)]
pub(crate) struct Guard {
    /// `Some(digest of T)`: every `/api/…` request needs `Authorization: Bearer T`.
    pub(crate) token: Option<TokenDigest>,
    /// Every POST is refused with 403.
    pub(crate) read_only: bool,
    /// Only `Host: localhost`, `127.x.y.z` or `[::1]` (any port) is answered: a token-less
    /// dashboard on a loopback address, which a page of another site could otherwise reach
    /// through DNS rebinding (its own host name pointed at 127.0.0.1).
    pub(crate) loopback_hosts_only: bool,
    /// The wrong tokens seen lately, by client address.
    pub(crate) throttle: Throttle,
}

/// The middleware: checks in the order Host, lock-out (429), token (401), read-only (403),
/// origin (403); then adds the security headers (to every answer, the refusals of
/// [`limits`](super::limits) and of the handlers included).
pub(crate) async fn check(State(guard): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    let is_api = req.uri().path().starts_with("/api/") || req.uri().path() == "/api";
    let scheme = expected_scheme(&req);
    let client = Client::of(
        req.extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|info| info.0.ip()),
    );
    if let Err(refusal) = guard.admit(req.method(), req.headers(), is_api, scheme, client) {
        return with_headers(refusal.into_response(), true);
    }
    with_headers(next.run(req).await, is_api)
}

/// The scheme a page of this dashboard is served with: `https` when a TLS proxy in front says
/// so (`X-Forwarded-Proto: https`, which a cross-site page cannot set on a POST without a
/// CORS preflight this server never grants) or the request's URI does (HTTP/2); `http`
/// otherwise (what [`serve`](super::serve) speaks).
fn expected_scheme(req: &Request) -> &'static str {
    let forwarded = req
        .headers()
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .map(str::trim);
    let https = match forwarded {
        Some(proto) => proto.eq_ignore_ascii_case("https"),
        None => req.uri().scheme_str() == Some("https"),
    };
    if https { "https" } else { "http" }
}

impl Guard {
    fn admit(
        &self,
        method: &Method,
        headers: &HeaderMap,
        is_api: bool,
        scheme: &str,
        client: Client,
    ) -> Result<(), ApiError> {
        if self.loopback_hosts_only && !host_is_loopback(headers) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "this dashboard has no token and answers only to localhost, 127.0.0.1 or [::1] \
                 as the Host (with a port of digits, if any)",
            ));
        }
        if let Some(token) = &self.token {
            // The page and its script and style hold no data: the browser loads them without
            // a header, and the script asks for the token. Everything under /api needs it.
            if is_api {
                let now = Instant::now();
                // A locked-out address gets no answer about any token, the right one included.
                if let Some(left) = self.throttle.locked(client, now) {
                    return Err(ApiError::too_many(retry_after_secs(left)));
                }
                match bearer(headers) {
                    Some(given) if token.matches(given) => {}
                    // A guess: counted, and locks the address out once there were many.
                    Some(_) => {
                        return Err(match self.throttle.wrong_token(client, now) {
                            Verdict::Refused => ApiError::unauthorized(),
                            Verdict::Locked(left) => ApiError::too_many(retry_after_secs(left)),
                        });
                    }
                    // No token at all guesses nothing (the page's first call): not counted.
                    None => return Err(ApiError::unauthorized()),
                }
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
        same_origin(headers, scheme)
    }
}

/// The token of `Authorization: Bearer T`, trimmed; `None` without one.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

/// `Authorization: Bearer T` with exactly this token.
#[cfg(test)]
fn bearer_matches(headers: &HeaderMap, token: &str) -> bool {
    bearer(headers).is_some_and(|given| TokenDigest::of(token).matches(given))
}

/// A POST must come from the dashboard's own origin: its `Origin` (or, without one,
/// `Sec-Fetch-Site`, then `Referer`) must name the scheme and host the request was sent to.
/// A request with none of them is no browser's cross-site request (curl, scripts) and passes.
fn same_origin(headers: &HeaderMap, scheme: &str) -> Result<(), ApiError> {
    let refused = |why: &str| {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!("cross-origin request refused: {why}"),
        ))
    };
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let ours = |url: &str| match (origin_of(url), host) {
        (Some((their_scheme, authority)), Some(host)) => {
            their_scheme == scheme && authority.eq_ignore_ascii_case(host)
        }
        _ => false,
    };
    if let Some(origin) = headers.get(header::ORIGIN) {
        return match ours(origin.to_str().unwrap_or("")) {
            true => Ok(()),
            false => refused("the Origin is not this dashboard (scheme, host and port)"),
        };
    }
    if let Some(site) = headers.get("sec-fetch-site") {
        return match site.to_str().unwrap_or("") {
            "same-origin" | "none" => Ok(()),
            _ => refused("Sec-Fetch-Site is not same-origin"),
        };
    }
    if let Some(referer) = headers.get(header::REFERER) {
        return match ours(referer.to_str().unwrap_or("")) {
            true => Ok(()),
            false => refused("the Referer is not this dashboard (scheme, host and port)"),
        };
    }
    Ok(())
}

/// The scheme (`http` or `https`) and `host[:port]` of an URL or origin; `None` for anything
/// else (`null`, other schemes, user info).
fn origin_of(url: &str) -> Option<(&'static str, &str)> {
    let (scheme, rest) = if let Some(rest) = url.strip_prefix("http://") {
        ("http", rest)
    } else {
        ("https", url.strip_prefix("https://")?)
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    (!authority.is_empty() && !authority.contains('@')).then_some((scheme, authority))
}

/// Whether the `Host` header names a loopback host, with a port of digits if any (a missing
/// header, HTTP/1.0, passes). `localhost:evil.test` is no loopback host: a browser never
/// sends it, and whatever reads the name after us may stop at another colon.
fn host_is_loopback(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST) else {
        return true;
    };
    let Ok(host) = host.to_str() else {
        return false;
    };
    let (name, port) = match host.strip_prefix('[') {
        Some(v6) => {
            let Some((address, after)) = v6.split_once(']') else {
                return false;
            };
            let port = match after {
                "" => None,
                after => match after.strip_prefix(':') {
                    Some(port) => Some(port),
                    None => return false,
                },
            };
            return port.is_none_or(is_port)
                && address.parse::<Ipv6Addr>().is_ok_and(|ip| ip.is_loopback());
        }
        None => match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        },
    };
    port.is_none_or(is_port)
        && (name.eq_ignore_ascii_case("localhost")
            || name
                .parse::<Ipv4Addr>()
                .is_ok_and(|ip| IpAddr::V4(ip).is_loopback()))
}

/// A port: 1 to 5 ASCII digits, at most 65535.
fn is_port(port: &str) -> bool {
    !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) && port.parse::<u16>().is_ok()
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
        assert!(same_origin(&ok, "http").is_ok());
        let other = headers(&[("host", "127.0.0.1:8080"), ("origin", "http://evil.test")]);
        assert!(same_origin(&other, "http").is_err());
        let port = headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:9090"),
        ]);
        assert!(same_origin(&port, "http").is_err());
        let null = headers(&[("host", "127.0.0.1:8080"), ("origin", "null")]);
        assert!(same_origin(&null, "http").is_err());
        let site = headers(&[("host", "127.0.0.1:8080"), ("sec-fetch-site", "cross-site")]);
        assert!(same_origin(&site, "http").is_err());
        let referer = headers(&[
            ("host", "127.0.0.1:8080"),
            ("referer", "http://evil.test/page"),
        ]);
        assert!(same_origin(&referer, "http").is_err());
        let script = headers(&[("host", "127.0.0.1:8080")]);
        assert!(same_origin(&script, "http").is_ok());
    }

    #[test]
    fn origin_must_name_the_scheme() {
        let https = headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "https://127.0.0.1:8080"),
        ]);
        assert!(same_origin(&https, "http").is_err());
        assert!(same_origin(&https, "https").is_ok());
        let http = headers(&[
            ("host", "dash.example:443"),
            ("origin", "http://dash.example:443"),
        ]);
        assert!(same_origin(&http, "https").is_err());
        let referer = headers(&[
            ("host", "127.0.0.1:8080"),
            ("referer", "https://127.0.0.1:8080/#/"),
        ]);
        assert!(same_origin(&referer, "http").is_err());
        assert!(same_origin(&referer, "https").is_ok());
        let other = headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "ftp://127.0.0.1:8080"),
        ]);
        assert!(same_origin(&other, "http").is_err());
    }

    #[test]
    fn loopback_hosts() {
        for host in [
            "localhost:8080",
            "127.0.0.1:1",
            "[::1]:80",
            "127.0.0.1",
            "LOCALHOST",
            "localhost:65535",
            "[::1]",
        ] {
            let map = headers(&[("host", host)]);
            assert!(host_is_loopback(&map), "{host}");
        }
        for host in [
            "evil.test:8080",
            "10.0.0.1:80",
            "localhost.evil.test",
            "localhost:evil.test",
            "localhost:evil.com",
            "127.0.0.1:80:81",
            "localhost:",
            "localhost:99999",
            "localhost:+80",
            "[::1]evil.test",
            "[::1]:evil",
            "[::1",
            "[127.0.0.1]:80",
            "::1",
        ] {
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
        let longer = headers(&[("authorization", "Bearer s3cret!")]);
        assert!(!bearer_matches(&longer, "s3cret"));
        // The secret's bytes repeated do not match it.
        let repeated = headers(&[("authorization", "Bearer s3crets3cret")]);
        assert!(!bearer_matches(&repeated, "s3cret"));
        let spaced = headers(&[("authorization", "Bearer  s3cret ")]);
        assert!(bearer_matches(&spaced, "s3cret"));
        assert!(!TokenDigest::of("s3cret").matches(""));
        assert!(!TokenDigest::of("").matches("x"));
    }
}
