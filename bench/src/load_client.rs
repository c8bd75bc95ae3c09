//! The bench's own HTTP/1.1 client. It shares the machine, and for in-process servers the
//! process, with what it measures, so it does little per request: a prepared set of headers,
//! a body of bytes, keep-alive connections that each carry one request at a time (one per
//! concurrent caller, as wrk keeps), and the whole answer read back.

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE, HOST};
use hyper::{HeaderMap, Method, Request};
use hyper_util::rt::TokioIo;
use std::sync::Mutex;
use tokio::net::TcpStream;

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("`{0}` is not an http://host:port base")]
    Base(String),
    #[error("connecting to {authority}: {source}")]
    Connect {
        authority: String,
        source: std::io::Error,
    },
    #[error("a header value: {0}")]
    Header(#[from] hyper::header::InvalidHeaderValue),
    #[error(transparent)]
    Http(#[from] hyper::Error),
    #[error("building a request: {0}")]
    Request(#[from] hyper::http::Error),
}

/// An answer, read in full.
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// Connections to one server (`http://host:port`), every request carrying the same headers.
pub struct LoadClient {
    authority: String,
    headers: HeaderMap,
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
}

impl LoadClient {
    /// A client of the server at `base` that sends `headers` (and `Host`) with every request.
    pub fn new(base: &str, mut headers: HeaderMap) -> Result<Self, LoadError> {
        let authority = base
            .strip_prefix("http://")
            .map(|rest| rest.trim_end_matches('/'))
            .filter(|authority| !authority.is_empty() && !authority.contains('/'))
            .ok_or_else(|| LoadError::Base(base.to_owned()))?;
        let host =
            HeaderValue::from_str(authority).map_err(|_| LoadError::Base(base.to_owned()))?;
        headers.insert(HOST, host);
        Ok(Self {
            authority: authority.to_owned(),
            headers,
            idle: Mutex::new(Vec::new()),
        })
    }

    /// Posts a JSON body to `path` (with `extra` headers) and reads the whole answer.
    pub async fn post_json(
        &self,
        path: &str,
        body: Vec<u8>,
        extra: &[(HeaderName, HeaderValue)],
    ) -> Result<Answer, LoadError> {
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(path)
            .body(Full::new(Bytes::from(body)))?;
        let headers = request.headers_mut();
        headers.clone_from(&self.headers);
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in extra {
            headers.insert(name, value.clone());
        }
        self.send(request).await
    }

    async fn send(&self, request: Request<Full<Bytes>>) -> Result<Answer, LoadError> {
        let mut connection = self.connection().await?;
        let response = connection.send_request(request).await?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await?.to_bytes();
        self.idle.lock().expect("idle connections").push(connection);
        Ok(Answer {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        })
    }

    /// An idle connection that is still open, or a new one.
    async fn connection(&self) -> Result<SendRequest<Full<Bytes>>, LoadError> {
        loop {
            let idle = self.idle.lock().expect("idle connections").pop();
            match idle {
                Some(mut connection) if !connection.is_closed() => {
                    if connection.ready().await.is_ok() {
                        return Ok(connection);
                    }
                }
                Some(_) => {}
                None => return self.connect().await,
            }
        }
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, LoadError> {
        let connect_error = |source| LoadError::Connect {
            authority: self.authority.clone(),
            source,
        };
        let stream = TcpStream::connect(&self.authority)
            .await
            .map_err(connect_error)?;
        stream.set_nodelay(true).map_err(connect_error)?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            // Ends when the server or the last sender closes it; its error is the sender's.
            let _ = connection.await;
        });
        Ok(sender)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderMap as Received, Uri};
    use axum::routing::post;
    use axum::{Json, Router};
    use serde_json::{json, Value};

    /// A server answering every POST with what it received.
    async fn echo_server() -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free port");
        let base = format!("http://{}", listener.local_addr().expect("bound"));
        let echo = |uri: Uri, headers: Received, body: String| async move {
            let header = |name: &str| {
                headers
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            };
            Json(json!({
                "path": uri.path(),
                "host": header("host"),
                "authorization": header("authorization"),
                "content_type": header("content-type"),
                "key": header("idempotency-key"),
                "body": body,
            }))
        };
        let router = Router::new().route("/{*path}", post(echo));
        tokio::spawn(async move { axum::serve(listener, router).await });
        base
    }

    #[tokio::test]
    async fn every_request_carries_the_clients_headers_its_own_and_its_body() {
        let base = echo_server().await;
        let headers = HeaderMap::from_iter([(
            hyper::header::AUTHORIZATION,
            HeaderValue::from_static("Bearer k"),
        )]);
        let client = LoadClient::new(&base, headers).expect("a client");
        for key in ["first", "second"] {
            let extra = [(
                HeaderName::from_static("idempotency-key"),
                HeaderValue::from_static(key),
            )];
            let answer = client
                .post_json("/v1/things", br#"{"a":1}"#.to_vec(), &extra)
                .await
                .expect("an answer");
            assert_eq!(answer.status, 200);
            let echoed: Value = serde_json::from_slice(&answer.body).expect("JSON");
            let authority = base.trim_start_matches("http://");
            assert_eq!(
                echoed,
                json!({
                    "path": "/v1/things", "host": authority, "authorization": "Bearer k",
                    "content_type": "application/json", "key": key, "body": r#"{"a":1}"#,
                })
            );
        }
        assert_eq!(
            client.idle.lock().expect("idle").len(),
            1,
            "one connection, reused"
        );
    }

    #[test]
    fn a_base_must_be_http_with_a_host_and_nothing_after_it() {
        for base in [
            "https://127.0.0.1:1",
            "127.0.0.1:1",
            "http://",
            "http://a:1/path",
        ] {
            assert!(
                matches!(
                    LoadClient::new(base, HeaderMap::new()),
                    Err(LoadError::Base(_))
                ),
                "{base}"
            );
        }
        assert!(LoadClient::new("http://127.0.0.1:1/", HeaderMap::new()).is_ok());
    }
}
