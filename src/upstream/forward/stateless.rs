//! What a call to a stateless (2026-07-28) upstream carries besides the call itself: who sends
//! it, in `_meta` (protocol version, client info and capabilities, the log level), and what it
//! is, in the standard headers (`Mcp-Method`, `Mcp-Name`).
//!
//! Both go with every call, so both are cheap: the `_meta` entries are serialised once, when
//! the forwarder is made ([`Identity`]), and written into each call's body next to the call's
//! own `_meta` keys ([`Params`]) without copying the parameters or building a map; the headers
//! are written after the session's, without copying its header map (`h1`).

use rmcp::model::{CallToolRequestParams, ClientConfig, ProtocolVersion};
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::value::RawValue;

/// Whether `name` can go in a header as it is (visible ASCII and spaces): what `Mcp-Name`
/// carries for the forwarder (rmcp encodes other names, and sends those calls).
pub fn fits_a_header(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// The `_meta` entries that say who sends a stateless call, serialised.
#[derive(Default)]
pub struct Identity {
    entries: Vec<(&'static str, Box<RawValue>)>,
}

impl Identity {
    /// The entries for `client`, as rmcp's client sends them in every request. The log level
    /// is every level, as the gateway asks of a legacy upstream (`call_relay::ask_for_every_log`):
    /// 2026-07-28 has no `logging/setLevel`, and each client hears only what its own level
    /// lets through.
    pub fn of(client: &ClientConfig) -> Identity {
        let mut entries = Vec::new();
        let mut add = |key: &'static str, value: serde_json::Result<Box<RawValue>>| {
            if let Ok(value) = value {
                entries.push((key, value));
            }
        };
        add(
            "io.modelcontextprotocol/protocolVersion",
            serde_json::value::to_raw_value(&ProtocolVersion::V_2026_07_28),
        );
        add(
            "io.modelcontextprotocol/clientInfo",
            serde_json::value::to_raw_value(&client.client_info),
        );
        add(
            "io.modelcontextprotocol/clientCapabilities",
            serde_json::value::to_raw_value(&client.capabilities),
        );
        add(
            "io.modelcontextprotocol/logLevel",
            serde_json::value::to_raw_value("debug"),
        );
        Identity { entries }
    }

    fn has(&self, key: &str) -> bool {
        self.entries.iter().any(|(k, _)| *k == key)
    }
}

/// A call's parameters as a stateless call sends them: its own `_meta` keys (those the
/// identity does not set: the gateway's say who sends the call) and the identity's, then the
/// rest of the parameters.
pub struct Params<'a> {
    pub params: &'a CallToolRequestParams,
    pub identity: &'a Identity,
}

impl Serialize for Params<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let params = self.params;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("_meta", &Meta(self))?;
        map.serialize_entry("name", &params.name)?;
        if let Some(arguments) = &params.arguments {
            map.serialize_entry("arguments", arguments)?;
        }
        if let Some(responses) = &params.input_responses {
            map.serialize_entry("inputResponses", responses)?;
        }
        if let Some(state) = &params.request_state {
            map.serialize_entry("requestState", state)?;
        }
        map.end()
    }
}

struct Meta<'a>(&'a Params<'a>);

impl Serialize for Meta<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Params { params, identity } = self.0;
        let mut map = serializer.serialize_map(None)?;
        if let Some(own) = &params.meta {
            for (key, value) in own.iter() {
                if !identity.has(key) {
                    map.serialize_entry(key, value)?;
                }
            }
        }
        for (key, value) in &identity.entries {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ClientCapabilities, Implementation, RequestMetaObject};
    use serde_json::json;

    /// Proves: a stateless call's body is the call's parameters with the identity's `_meta`
    /// entries added to its own (a key of the identity's set by the client is the gateway's),
    /// the same as adding them to the parameters and serialising those; and the parameters
    /// without `_meta` of their own get one.
    #[test]
    fn the_identity_joins_the_calls_own_meta() {
        let client = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("narrowgate", "1.0"),
        );
        let identity = Identity::of(&client);
        let mut params = CallToolRequestParams::new("echo").with_arguments(
            json!({"message": "hi"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        );
        let mut meta = RequestMetaObject::new();
        meta.insert("progressToken".into(), json!("p-1"));
        meta.insert("io.modelcontextprotocol/logLevel".into(), json!("error"));
        params.meta = Some(meta);
        params.request_state = Some("s".into());
        let written = serde_json::to_value(Params {
            params: &params,
            identity: &identity,
        })
        .expect("json");
        assert_eq!(
            written,
            json!({
                "_meta": {
                    "progressToken": "p-1",
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientInfo": {"name": "narrowgate", "version": "1.0"},
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/logLevel": "debug"
                },
                "name": "echo",
                "arguments": {"message": "hi"},
                "requestState": "s"
            })
        );
        let bare = CallToolRequestParams::new("echo");
        let written = serde_json::to_value(Params {
            params: &bare,
            identity: &identity,
        })
        .expect("json");
        assert_eq!(
            written["_meta"]["io.modelcontextprotocol/logLevel"],
            "debug"
        );
        assert!(written.get("arguments").is_none());
    }
}
