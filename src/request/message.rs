//! A POST body as the HTTP layers read it: parsed once, by `http::check_body`, into the little the
//! layers need (which method, the `tools/call` parameters, the version an `initialize` asks for),
//! then carried in the request's [`Admitted`](crate::request::Admitted) to authentication's scope
//! check, session bookkeeping and the direct path. rmcp reads the bytes itself for what it serves.
//!
//! The body is scanned once: the envelope's fields are captured as raw JSON text, and only the
//! `params` the layers after will read are parsed further: a `tools/call`'s whole when the direct
//! path may answer it, only its tool's name when just the scope check needs it, nothing when rmcp
//! alone will read it ([`CallParams`]). So a call costs no more than it did before the layers
//! shared one parse, on either path.

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
    /// The `protocolVersion` it asks for, if it names one and its client declares none of the
    /// capabilities an upstream may ask of it (`sampling`, `elicitation`, `roots`): the session
    /// of a client that does is never answered by the direct path, whose one JSON answer has no
    /// stream to carry the upstream's requests to it (`relay::asks`).
    Initialize(Option<String>),
    /// Any other method, or none (a response).
    Other,
}

/// A `tools/call`'s parameters, as far as they were read.
#[derive(Clone, Debug)]
pub enum ToolsCall {
    Params(CallToolRequestParams),
    /// Only the tool's name was read (all the scope check needs), or the parameters are not
    /// what rmcp accepts (it will refuse them): the name, if it could be read.
    Named(Option<String>),
    /// Not read: no layer before rmcp looks at them.
    Unread,
}

impl ToolsCall {
    pub fn name(&self) -> Option<&str> {
        match self {
            ToolsCall::Params(p) => Some(&p.name),
            ToolsCall::Named(name) => name.as_deref(),
            ToolsCall::Unread => None,
        }
    }
}

/// How much of a `tools/call`'s parameters the layers after `check_body` need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallParams {
    /// The direct path may answer it: all of them.
    Whole,
    /// Only the scope check reads them: the tool's name.
    Name,
    /// Only rmcp reads them.
    Skip,
}

/// The arguments of the message at `index` of `body` (`{}` when absent), read again from the
/// bytes: for the receipt of a call refused before it was run, when they were not read before.
pub fn arguments_at(body: &[u8], index: usize) -> Value {
    let parsed: Value = serde_json::from_slice(body).unwrap_or_default();
    let message = match &parsed {
        Value::Array(all) => all.get(index).unwrap_or(&Value::Null),
        one => one,
    };
    match &message["params"]["arguments"] {
        Value::Null => Value::Object(Default::default()),
        arguments => arguments.clone(),
    }
}

impl Body {
    /// Parses `bytes`, reading as much of a `tools/call`'s parameters as `calls` says; the
    /// error is the one to report for a body that is not JSON at all.
    pub fn parse(bytes: &[u8], calls: CallParams) -> Result<Body, serde_json::Error> {
        // rmcp refuses a body that is not UTF-8 anywhere, but serde_json skips the fields it
        // ignores without checking their text (found by fuzz/, `jsonrpc_direct`): such a body is
        // read as no message at all and left to rmcp. Parsing from `&str` then checks no text twice.
        let Ok(text) = std::str::from_utf8(bytes) else {
            return serde_json::from_slice::<IgnoredAny>(bytes).map(|_| Body::Other);
        };
        let batch = text.trim_start().starts_with('[');
        let parsed = if batch {
            serde_json::from_str::<Vec<Envelope<'_>>>(text)
                .map(|all| Body::Batch(all.into_iter().map(|one| one.read(calls)).collect()))
        } else {
            serde_json::from_str::<Envelope<'_>>(text).map(|one| Body::One(one.read(calls)))
        };
        match parsed {
            Ok(body) => Ok(body),
            // Not the shape of a message (or not JSON): tell which (rare, so scanned again).
            Err(_) => serde_json::from_str::<IgnoredAny>(text).map(|_| Body::Other),
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
struct NameOnly {
    name: Option<String>,
}

#[derive(Deserialize)]
struct InitializeParams {
    #[serde(rename = "protocolVersion")]
    protocol_version: String,
    #[serde(default)]
    capabilities: Option<AskableCapabilities>,
}

/// The client capabilities an upstream's requests need (present or not).
#[derive(Deserialize)]
struct AskableCapabilities {
    #[serde(default)]
    sampling: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    elicitation: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    roots: Option<serde::de::IgnoredAny>,
}

impl InitializeParams {
    /// The version the direct path may answer the session with (see [`Method::Initialize`]).
    fn direct_version(self) -> Option<String> {
        let askable = self
            .capabilities
            .is_some_and(|c| c.sampling.is_some() || c.elicitation.is_some() || c.roots.is_some());
        (!askable).then_some(self.protocol_version)
    }
}

impl Envelope<'_> {
    fn read(self, calls: CallParams) -> Message {
        let params = self.params.map(RawValue::get);
        let method = self
            .method
            .and_then(|m| serde_json::from_str::<Cow<'_, str>>(m.get()).ok());
        let method = match method.as_deref() {
            Some("tools/call") => Method::ToolsCall(tools_call(params, calls)),
            Some("initialize") => Method::Initialize(
                params
                    .and_then(|p| serde_json::from_str::<InitializeParams>(p).ok())
                    .and_then(InitializeParams::direct_version),
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

fn tools_call(params: Option<&str>, calls: CallParams) -> ToolsCall {
    let name_only = |params: &str| {
        let read = serde_json::from_str::<NameOnly>(params).ok();
        ToolsCall::Named(read.and_then(|r| r.name))
    };
    match (params, calls) {
        (_, CallParams::Skip) => ToolsCall::Unread,
        (None, _) => ToolsCall::Named(None),
        (Some(params), CallParams::Name) => name_only(params),
        (Some(params), CallParams::Whole) => {
            match serde_json::from_str::<CallToolRequestParams>(params) {
                Ok(params) => ToolsCall::Params(params),
                Err(_) => name_only(params),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: a `tools/call` is read with its parameters (or only its name, or not at all, as
    /// asked), an `initialize` with its version, a batch message by message, and JSON that is no
    /// message is told from a body that is not JSON (whose error is the one the 400 reports).
    #[test]
    fn bodies_are_read_once_into_what_the_layers_need() {
        use CallParams::{Name, Skip, Whole};
        let call = br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"m":1}}}"#;
        let Ok(Body::One(m)) = Body::parse(call, Whole) else {
            panic!("one message")
        };
        assert!(m.jsonrpc_2);
        assert_eq!(m.id, Some(RequestId::Number(3)));
        let Method::ToolsCall(ToolsCall::Params(p)) = &m.method else {
            panic!("a readable tools/call: {m:?}")
        };
        assert_eq!(p.name, "echo");
        let read = |calls| match Body::parse(call, calls) {
            Ok(Body::One(Message {
                method: Method::ToolsCall(call),
                ..
            })) => call,
            other => panic!("a tools/call: {other:?}"),
        };
        assert!(matches!(read(Name), ToolsCall::Named(Some(n)) if n == "echo"));
        assert!(matches!(read(Skip), ToolsCall::Unread));
        assert_eq!(
            arguments_at(call, 0),
            serde_json::json!({"m": 1}),
            "arguments read again for a receipt"
        );

        // Key order does not matter; unreadable parameters keep the name.
        let odd = br#"{"params":{"name":"echo","arguments":5},"method":"tools/call","id":"x","jsonrpc":"1.0"}"#;
        let Ok(Body::One(m)) = Body::parse(odd, Whole) else {
            panic!("one message")
        };
        assert!(!m.jsonrpc_2);
        let Method::ToolsCall(call) = &m.method else {
            panic!("a tools/call")
        };
        assert!(matches!(call, ToolsCall::Named(Some(n)) if n == "echo"));
        assert_eq!(arguments_at(odd, 0), serde_json::json!(5));

        let init = br#"[{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}, {"jsonrpc":"2.0","method":"ping"}]"#;
        let Ok(body) = Body::parse(init, Skip) else {
            panic!("a batch")
        };
        assert_eq!(body.messages().len(), 2);
        assert!(matches!(
            &body.messages()[0].method,
            Method::Initialize(Some(v)) if v == "2025-11-25"
        ));
        assert_eq!(body.initialize_version(), None, "only a lone initialize");
        assert_eq!(arguments_at(init, 1), serde_json::json!({}));
        let lone = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#;
        assert_eq!(
            Body::parse(lone, Skip)
                .ok()
                .as_ref()
                .and_then(Body::initialize_version),
            Some("2025-06-18")
        );
        // A client an upstream may ask something of is never answered by the direct path.
        for askable in ["sampling", "elicitation", "roots"] {
            let asks = format!(
                r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{"{askable}":{{}}}}}}}}"#
            );
            let parsed = Body::parse(asks.as_bytes(), Skip).ok();
            assert_eq!(
                parsed.as_ref().and_then(Body::initialize_version),
                None,
                "{askable}"
            );
        }

        assert!(matches!(Body::parse(b"42", Whole), Ok(Body::Other)));
        assert!(matches!(Body::parse(b"[1, 2]", Whole), Ok(Body::Other)));
        let broken = Body::parse(b"{\"jsonrpc\": ", Whole).expect_err("not JSON");
        let reference = serde_json::from_slice::<IgnoredAny>(b"{\"jsonrpc\": ").expect_err("e");
        assert_eq!(broken.to_string(), reference.to_string());
    }
}
