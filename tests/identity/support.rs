//! What tests/identity.rs needs besides the common harness: keys generated here and tokens signed
//! with them (aws-lc-rs directly, not the gateway's jsonwebtoken, so the two sides are independent),
//! and a JWKS endpoint on loopback that counts its fetches.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair as _, RSA_PKCS1_SHA256,
    RsaKeyPair,
};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use serde_json::{Value, json};

use super::common::Reply;

pub const ISSUER: &str = "https://idp.test";
pub const AUDIENCE: &str = "https://gw.test/mcp";
/// The gateway's RFC 9728 metadata document for [`AUDIENCE`], which its challenges name.
pub const RESOURCE_METADATA: &str = "https://gw.test/.well-known/oauth-protected-resource/mcp";

/// Asserts that `reply`'s `WWW-Authenticate` challenge starts with `start` and names
/// [`RESOURCE_METADATA`]; `what` says which case failed.
pub fn assert_challenge(reply: &Reply, start: &str, what: &str) {
    let challenge = reply.header("www-authenticate").unwrap_or_default();
    let metadata = format!("resource_metadata=\"{RESOURCE_METADATA}\"");
    assert!(
        challenge.starts_with(start) && challenge.contains(&metadata),
        "{what}: {challenge}"
    );
}

enum Kind {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair),
    Ed(Ed25519KeyPair),
}

/// A signing key and its public JWK.
pub struct Signer {
    pub kid: String,
    pub alg: &'static str,
    kind: Kind,
    pub jwk: Value,
}

impl Signer {
    pub fn rsa(kid: &str) -> Signer {
        let key = RsaKeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).expect("RSA key");
        let public = key.public_key();
        let jwk = json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
            "n": B64.encode(public.modulus().big_endian_without_leading_zero()),
            "e": B64.encode(public.exponent().big_endian_without_leading_zero())});
        Signer {
            kid: kid.into(),
            alg: "RS256",
            kind: Kind::Rsa(key),
            jwk,
        }
    }

    pub fn ec(kid: &str) -> Signer {
        let rng = SystemRandom::new();
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("EC key");
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref())
            .expect("EC key parses");
        let point = key.public_key().as_ref().to_vec(); // 0x04 || x || y
        let jwk = json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig",
            "x": B64.encode(&point[1..33]), "y": B64.encode(&point[33..65])});
        Signer {
            kid: kid.into(),
            alg: "ES256",
            kind: Kind::Ec(key),
            jwk,
        }
    }

    pub fn ed(kid: &str) -> Signer {
        let rng = SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).expect("Ed25519 key");
        let key = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("Ed25519 key parses");
        let jwk = json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "use": "sig",
            "x": B64.encode(key.public_key().as_ref())});
        Signer {
            kid: kid.into(),
            alg: "EdDSA",
            kind: Kind::Ed(key),
            jwk,
        }
    }

    /// A token with this key's `alg` and `kid`, over `claims`.
    pub fn sign(&self, claims: &Value) -> String {
        self.sign_with_header(
            &json!({"alg": self.alg, "typ": "JWT", "kid": self.kid}),
            claims,
        )
    }

    pub fn sign_with_header(&self, header: &Value, claims: &Value) -> String {
        let input = format!(
            "{}.{}",
            B64.encode(header.to_string()),
            B64.encode(claims.to_string())
        );
        let rng = SystemRandom::new();
        let signature = match &self.kind {
            Kind::Rsa(key) => {
                let mut sig = vec![0; key.public_modulus_len()];
                key.sign(&RSA_PKCS1_SHA256, &rng, input.as_bytes(), &mut sig)
                    .expect("RSA sign");
                sig
            }
            Kind::Ec(key) => key
                .sign(&rng, input.as_bytes())
                .expect("EC sign")
                .as_ref()
                .to_vec(),
            Kind::Ed(key) => key.sign(input.as_bytes()).as_ref().to_vec(),
        };
        format!("{input}.{}", B64.encode(signature))
    }
}

/// The keys of the test issuer, generated once per test binary.
pub struct Keys {
    pub rsa: Signer,
    pub ec: Signer,
    pub ed: Signer,
    /// Not in any key set unless a test adds it.
    pub rotated: Signer,
}

pub fn keys() -> &'static Keys {
    static KEYS: OnceLock<Keys> = OnceLock::new();
    KEYS.get_or_init(|| Keys {
        rsa: Signer::rsa("rsa-1"),
        ec: Signer::ec("ec-1"),
        ed: Signer::ed("ed-1"),
        rotated: Signer::rsa("rsa-2"),
    })
}

/// `{"keys": [...]}` of these signers.
pub fn jwks(signers: &[&Signer]) -> String {
    json!({"keys": signers.iter().map(|s| s.jwk.clone()).collect::<Vec<_>>()}).to_string()
}

pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs()
}

/// Valid claims for `sub`, with `extra` merged over them (a `null` removes a claim).
pub fn claims(sub: &str, extra: Value) -> Value {
    let mut claims = json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub,
        "iat": now(), "exp": now() + 600});
    if let (Some(base), Some(extra)) = (claims.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            if v.is_null() {
                base.remove(k);
            } else {
                base.insert(k.clone(), v.clone());
            }
        }
    }
    claims
}

/// HS256 over `claims`, keyed with `secret` (the classic "public key as HMAC secret" attack).
pub fn hs256(kid: &str, secret: &[u8], claims: &Value) -> String {
    let header = json!({"alg": "HS256", "typ": "JWT", "kid": kid});
    let input = format!(
        "{}.{}",
        B64.encode(header.to_string()),
        B64.encode(claims.to_string())
    );
    let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, secret);
    let tag = aws_lc_rs::hmac::sign(&key, input.as_bytes());
    format!("{input}.{}", B64.encode(tag.as_ref()))
}

/// An unsigned token (`alg: none`).
pub fn unsigned(claims: &Value) -> String {
    let header = json!({"alg": "none", "typ": "JWT"});
    format!(
        "{}.{}.",
        B64.encode(header.to_string()),
        B64.encode(claims.to_string())
    )
}

/// One request to a [`TestServer`]: method, path (with query) and body.
pub struct Request {
    pub method: String,
    pub path: String,
    pub body: Vec<u8>,
}

type Handler = dyn Fn(&Request) -> (u16, String) + Send + Sync;

/// A tiny HTTP/1.1 server on loopback, one connection at a time, stopped on drop.
pub struct TestServer {
    pub base: String,
    stop: Arc<AtomicBool>,
    addr: std::net::SocketAddr,
}

impl TestServer {
    pub fn start(handler: Arc<Handler>) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind test server");
        let addr = listener.local_addr().expect("address");
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut stream) = stream else { continue };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let Some(request) = read_request(&stream) else {
                    continue;
                };
                let (status, body) = handler(&request);
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        TestServer {
            base: format!("http://{addr}"),
            stop,
            addr,
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

fn read_request(stream: &TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut words = line.split_whitespace();
    let (method, path) = (words.next()?.to_string(), words.next()?.to_string());
    let mut length = 0;
    loop {
        line.clear();
        if reader.read_line(&mut line).ok()? == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request { method, path, body })
}

/// A JWKS endpoint on loopback: serves whatever key set it holds and counts the fetches.
pub struct JwksServer {
    pub url: String,
    body: Arc<Mutex<String>>,
    hits: Arc<AtomicUsize>,
    _server: TestServer,
}

impl JwksServer {
    pub fn start(body: String) -> JwksServer {
        let body = Arc::new(Mutex::new(body));
        let hits = Arc::new(AtomicUsize::new(0));
        let (b, h) = (body.clone(), hits.clone());
        let server = TestServer::start(Arc::new(move |_: &Request| {
            h.fetch_add(1, Ordering::SeqCst);
            (200, b.lock().expect("body").clone())
        }));
        JwksServer {
            url: format!("{}/jwks.json", server.base),
            body,
            hits,
            _server: server,
        }
    }

    pub fn serve(&self, body: String) {
        *self.body.lock().expect("body") = body;
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// A minimal OAuth authorization server for the SDK's own OAuth flow: metadata (RFC 8414),
/// dynamic registration (RFC 7591) and a token endpoint. The authorization step happens in the
/// client's test script, whose code is the space-separated scopes the "user" granted; the token
/// endpoint turns it into a JWT for `sub` with those scopes, signed by the test RSA key.
pub fn authorization_server(sub: &'static str, extra_claims: Value) -> TestServer {
    let base: Arc<OnceLock<String>> = Arc::new(OnceLock::new());
    let b = base.clone();
    let server = TestServer::start(Arc::new(move |r: &Request| {
        let base = b.get().cloned().unwrap_or_default();
        match (r.method.as_str(), r.path.as_str()) {
            ("GET", "/.well-known/oauth-authorization-server") => (
                200,
                json!({"issuer": base, "authorization_endpoint": format!("{base}/authorize"),
                    "token_endpoint": format!("{base}/token"),
                    "registration_endpoint": format!("{base}/register"),
                    "response_types_supported": ["code"],
                    "grant_types_supported": ["authorization_code"],
                    "code_challenge_methods_supported": ["S256"],
                    "token_endpoint_auth_methods_supported": ["none"]})
                .to_string(),
            ),
            ("POST", "/register") => {
                let mut client: Value = serde_json::from_slice(&r.body).unwrap_or(json!({}));
                client["client_id"] = json!("narrowgate-test-client");
                (201, client.to_string())
            }
            ("POST", "/token") => {
                let form = String::from_utf8_lossy(&r.body).to_string();
                let code = form
                    .split('&')
                    .filter_map(|kv| kv.split_once('='))
                    .find(|(k, _)| *k == "code")
                    .map(|(_, v)| percent_decode(v))
                    .unwrap_or_default();
                let mut extra = extra_claims.clone();
                extra["scope"] = json!(code);
                let access_token = keys().rsa.sign(&claims(sub, extra));
                (
                    200,
                    json!({"access_token": access_token, "token_type": "Bearer",
                        "expires_in": 600, "scope": code})
                    .to_string(),
                )
            }
            _ => (404, "{}".to_string()),
        }
    }));
    let _ = base.set(server.base.clone());
    server
}

/// `application/x-www-form-urlencoded` value decoding.
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(b'?'));
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).to_string()
}
