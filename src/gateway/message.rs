//! A POST body as the HTTP layers read it: parsed once, by `http::check_body`, into the little the
//! layers need (which method, the `tools/call` parameters, the version an `initialize` asks for),
//! then carried in the request's [`Admitted`](super::request::Admitted) to authentication's scope
//! check, session bookkeeping and the direct path. rmcp reads the bytes itself for what it serves.
//!
//! The body is scanned once: the envelope's fields are captured as raw JSON text, and only the
//! `params` of the two methods the layers care about are parsed further (exactly what the direct
//! path parsed before, so a call costs no more than it did).

use std::borrow::Cow;

use rmcp::model::{CallToolRequestParams, RequestId};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use serde_json::value::RawValue;

/// A JSON body: one message, a batch, or valid JSON the layers have nothing to say about.
#[derive(Clone, Debug)]
pub enum Body {
    One(Message),
    Batch(Vec<Message>),
    /// Valid JSON that is no JSON-RPC message the layers can read (rmcp answers it).
    Other,
}

/// One JSON-RPC message, as far as the layers read it.
#[derive(Clone, Debug)]
pub struct Message {
    /// `"jsonrpc": "2.0"`, as written (no escapes).
    pub jsonrpc_2: bool,
    /// `None` for a notification or an id that is no JSON-RPC id.
    pub id: Option<RequestId>,
    pub method: Method,
    /// It names a method: with an id a request, else a notification (without, a response).
    pub has_method: bool,
}

impl Message {
    /// The id of a request (not of a response, whose id is the other side's).
    pub fn request_id(&self) -> Option<RequestId> {
        self.id.clone().filter(|_| self.has_method)
    }
}

/// What the layers know of a message's method.
#[derive(Clone, Debug)]
pub enum Method {
    ToolsCall(ToolsCall),
    /// The `protocolVersion` it asks for, if it names one.
    Initialize(Option<String>),
    /// Any other method, or none (a response).
    Other,
}

/// A `tools/call`'s parameters.
#[derive(Clone, Debug)]
pub enum ToolsCall {
    Params(CallToolRequestParams),
    /// Parameters rmcp will refuse: what could be read of them, for the scope check and the
    /// receipt of its refusal.
    Unreadable {
        name: Option<String>,
        arguments: Value,
    },
}

impl ToolsCall {
    pub fn name(&self) -> Option<&str> {
        match self {
            ToolsCall::Params(p) => Some(&p.name),
            ToolsCall::Unreadable { name, .. } => name.as_deref(),
        }
    }

    /// The arguments as a JSON value (`{}` when absent), for a refusal's receipt.
    pub fn arguments(&self) -> Value {
        match self {
            ToolsCall::Params(p) => match &p.arguments {
                Some(map) => Value::Object(map.clone()),
                None => Value::Object(Default::default()),
            },
            ToolsCall::Unreadable { arguments, .. } => arguments.clone(),
        }
    }
}

impl Body {
    /// Parses `bytes`; the error is the one to report for a body that is not JSON at all.
    pub fn parse(bytes: &[u8]) -> Result<Body, serde_json::Error> {
        let batch = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
        let parsed = if batch {
            serde_json::from_slice::<Vec<Envelope<'_>>>(bytes)
                .map(|all| Body::Batch(all.into_iter().map(Envelope::read).collect()))
        } else {
            serde_json::from_slice::<Envelope<'_>>(bytes).map(|one| Body::One(one.read()))
        };
        match parsed {
            Ok(body) => Ok(body),
            // Not the shape of a message (or not JSON): tell which (rare, so scanned again).
            Err(_) => serde_json::from_slice::<IgnoredAny>(bytes).map(|_| Body::Other),
        }
    }

    /// The messages of the body, in order.
    pub fn messages(&self) -> &[Message] {
        match self {
            Body::One(m) => std::slice::from_ref(m),
            Body::Batch(all) => all,
            Body::Other => &[],
        }
    }

    /// The `protocolVersion` a lone `initialize` asks for.
    pub fn initialize_version(&self) -> Option<&str> {
        match self {
            Body::One(Message {
                method: Method::Initialize(version),
                ..
            }) => version.as_deref(),
            _ => None,
        }
    }
}

/// A message's fields as raw JSON text: one scan of the body, nothing parsed yet.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<&'a RawValue>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct NameAndArguments {
    name: Option<String>,
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct InitializeParams {
    #[serde(rename = "protocolVersion")]
    protocol_version: String,
}

impl Envelope<'_> {
    fn read(self) -> Message {
        let params = self.params.map(RawValue::get);
        let method = self
            .method
            .and_then(|m| serde_json::from_str::<Cow<'_, str>>(m.get()).ok());
        let method = match method.as_deref() {
            Some("tools/call") => Method::ToolsCall(tools_call(params)),
            Some("initialize") => Method::Initialize(
                params
                    .and_then(|p| serde_json::from_str::<InitializeParams>(p).ok())
                    .map(|p| p.protocol_version),
            ),
            _ => Method::Other,
        };
        Message {
            has_method: self.method.is_some(),
            jsonrpc_2: self.jsonrpc.is_some_and(|v| v.get() == "\"2.0\""),
            id: self
                .id
                .and_then(|id| serde_json::from_str::<RequestId>(id.get()).ok()),
            method,
        }
    }
}

fn tools_call(params: Option<&str>) -> ToolsCall {
    let Some(params) = params else {
        return ToolsCall::Unreadable {
            name: None,
            arguments: Value::Object(Default::default()),
        };
    };
    match serde_json::from_str::<CallToolRequestParams>(params) {
        Ok(params) => ToolsCall::Params(params),
        Err(_) => {
            let read = serde_json::from_str::<NameAndArguments>(params).ok();
            let (name, arguments) = read.map_or((None, None), |r| (r.name, r.arguments));
            ToolsCall::Unreadable {
                name,
                arguments: arguments.unwrap_or_else(|| Value::Object(Default::default())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: a `tools/call` is read with its parameters, an `initialize` with its version, a
    /// batch message by message, and JSON that is no message is told from a body that is not
    /// JSON (whose error is the one the 400 reports).
    #[test]
    fn bodies_are_read_once_into_what_the_layers_need() {
        let call = br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"m":1}}}"#;
        let Ok(Body::One(m)) = Body::parse(call) else {
            panic!("one message")
        };
        assert!(m.jsonrpc_2);
        assert_eq!(m.id, Some(RequestId::Number(3)));
        let Method::ToolsCall(ToolsCall::Params(p)) = &m.method else {
            panic!("a readable tools/call: {m:?}")
        };
        assert_eq!(p.name, "echo");

        // Key order does not matter; an unreadable `arguments` keeps the name.
        let odd = br#"{"params":{"name":"echo","arguments":5},"method":"tools/call","id":"x","jsonrpc":"1.0"}"#;
        let Ok(Body::One(m)) = Body::parse(odd) else {
            panic!("one message")
        };
        assert!(!m.jsonrpc_2);
        let Method::ToolsCall(call) = &m.method else {
            panic!("a tools/call")
        };
        assert_eq!(call.name(), Some("echo"));
        assert_eq!(call.arguments(), serde_json::json!(5));

        let init = br#"[{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}, {"jsonrpc":"2.0","method":"ping"}]"#;
        let Ok(body) = Body::parse(init) else {
            panic!("a batch")
        };
        assert_eq!(body.messages().len(), 2);
        assert!(matches!(
            &body.messages()[0].method,
            Method::Initialize(Some(v)) if v == "2025-11-25"
        ));
        assert_eq!(body.initialize_version(), None, "only a lone initialize");
        let lone = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#;
        assert_eq!(
            Body::parse(lone)
                .ok()
                .as_ref()
                .and_then(Body::initialize_version),
            Some("2025-06-18")
        );

        assert!(matches!(Body::parse(b"42"), Ok(Body::Other)));
        assert!(matches!(Body::parse(b"[1, 2]"), Ok(Body::Other)));
        let broken = Body::parse(b"{\"jsonrpc\": ").expect_err("not JSON");
        let reference = serde_json::from_slice::<IgnoredAny>(b"{\"jsonrpc\": ").expect_err("e");
        assert_eq!(broken.to_string(), reference.to_string());
    }
}
