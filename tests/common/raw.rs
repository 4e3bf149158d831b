//! MCP over plain HTTP, to send what SDK clients never would (bad headers, stolen sessions,
//! stateless 2026-07-28 requests) and to read exactly what the gateway answered: status,
//! headers and body. Also a dependency-free HTTP GET for `/readyz` and other plain endpoints.

use std::time::Duration;

use serde_json::{Value, json};

/// A minimal blocking HTTP GET (no client crate needed): `(status, body)`.
pub fn http_get(base: &str, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let authority = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(authority).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    // Bodies may be chunked: keep the JSON between the first `{` and the last `}`.
    let body = match (body.find('{'), body.rfind('}')) {
        (Some(a), Some(b)) if a < b => body[a..=b].to_string(),
        _ => body,
    };
    Some((status, body))
}

/// One HTTP answer from the MCP endpoint.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Reply {
    /// The JSON-RPC message in the body: plain JSON, or the last `data:` event of an SSE stream.
    pub fn message(&self) -> Value {
        if let Ok(v) = serde_json::from_str(&self.body) {
            return v;
        }
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .next_back()
            .unwrap_or_else(|| panic!("no JSON-RPC message in body: {:?}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }
}

/// Raw MCP over HTTP, to send what SDK clients never would.
pub struct Raw {
    pub url: String,
    client: reqwest::Client,
    /// Added to every [`post`](Self::post) (see [`with_headers`](Self::with_headers)).
    extra: Vec<(String, String)>,
}

impl Raw {
    pub fn new(url: &str) -> Raw {
        Raw {
            url: url.to_string(),
            client: reqwest::Client::new(),
            extra: Vec::new(),
        }
    }

    /// This client, adding `headers` to everything it [`post`](Self::post)s (a `traceparent`,
    /// say).
    pub fn with_headers(&self, headers: &[(&str, &str)]) -> Raw {
        let mut extra = self.extra.clone();
        extra.extend(headers.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        Raw {
            url: self.url.clone(),
            client: self.client.clone(),
            extra,
        }
    }

    /// POSTs `body` with MCP's Accept header plus `headers` (and this client's own).
    pub async fn post(&self, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut all = vec![("accept", "application/json, text/event-stream")];
        all.extend_from_slice(headers);
        all.extend(self.extra.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        self.post_exactly(&all, body).await
    }

    /// POSTs `body` as JSON with exactly `headers` (no Accept added).
    pub async fn post_exactly(&self, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut request = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .body(body.to_string());
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        let response = request.send().await.expect("POST reaches the gateway");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.text().await.unwrap_or_default();
        Reply {
            status,
            headers,
            body,
        }
    }

    /// `initialize` + `notifications/initialized` at `version`; returns the session id.
    pub async fn open_session(&self, key: Option<&str>, version: &str) -> String {
        let auth = key.map(|k| format!("Bearer {k}"));
        let mut headers = vec![];
        if let Some(a) = &auth {
            headers.push(("authorization", a.as_str()));
        }
        let reply = self.post(&headers, &initialize_body(version)).await;
        assert_eq!(reply.status, 200, "initialize failed: {reply:?}");
        let session = reply.header("mcp-session-id").expect("session id");
        headers.push(("mcp-session-id", session.as_str()));
        headers.push(("mcp-protocol-version", version));
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let ack = self.post(&headers, &note.to_string()).await;
        assert_eq!(ack.status, 202, "initialized notification: {ack:?}");
        session
    }

    /// `tools/call` of `name` with `arguments`, as `key` in a session of its own at `version`.
    pub async fn call_in_new_session(
        &self,
        key: &str,
        version: &str,
        name: &str,
        arguments: Value,
    ) -> Reply {
        let session = self.open_session(Some(key), version).await;
        let params = json!({"name": name, "arguments": arguments});
        self.request(Some(key), &session, version, "tools/call", params)
            .await
    }

    /// A JSON-RPC request (id 7) inside a session.
    pub async fn request(
        &self,
        key: Option<&str>,
        session: &str,
        version: &str,
        method: &str,
        params: Value,
    ) -> Reply {
        let auth = key.map(|k| format!("Bearer {k}"));
        let mut headers = vec![
            ("mcp-session-id", session),
            ("mcp-protocol-version", version),
        ];
        if let Some(a) = &auth {
            headers.push(("authorization", a.as_str()));
        }
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        self.post(&headers, &body.to_string()).await
    }
}

/// The body of an `initialize` request (id 0) asking for protocol `version`.
pub fn initialize_body(version: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw-test", "version": "1"}}})
    .to_string()
}

/// The body of a stateless MCP 2026-07-28 `tools/call` with JSON-RPC `id`: no session, the
/// protocol version, client info and capabilities ride in `params._meta`.
pub fn stateless_call_body(id: Value, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": name, "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}}})
}

/// The headers of a stateless 2026-07-28 `tools/call` of `name` as the caller with `key`
/// (SEP-2243's `Mcp-Method` and `Mcp-Name` included; no Accept).
pub fn stateless_call_headers(key: &str, name: &str) -> Vec<(&'static str, String)> {
    vec![
        ("authorization", format!("Bearer {key}")),
        ("mcp-protocol-version", "2026-07-28".to_string()),
        ("mcp-method", "tools/call".to_string()),
        ("mcp-name", name.to_string()),
    ]
}

/// Text of every text block of a `CallToolResult` JSON, joined.
pub fn result_text(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names in a `tools/list` result JSON (`{"tools": [...]}`), sorted.
pub fn sorted_tool_names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("not a tool list: {list}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names
}
