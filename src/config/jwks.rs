//! A JSON Web Key Set (`oauth.jwks_file`, or what `oauth.jwks_url` serves): the issuer's signature
//! keys the gateway accepts. Read here, where the configuration is checked at load (a file with
//! no usable key is refused then), and by `policy`'s token validator, which keeps and refreshes
//! the keys. Only asymmetric signature keys of the accepted algorithms are kept; an HMAC (`oct`)
//! key in a public key set would let anyone holding the set sign tokens.

use std::path::Path;

use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey};

/// One verification key of the issuer.
pub struct SigningKey {
    pub kid: Option<String>,
    /// The `alg` the JWK pins, if any: a token must then use exactly it.
    pub alg: Option<Algorithm>,
    pub family: AlgorithmFamily,
    pub key: DecodingKey,
}

/// Keeps the signature keys of an asymmetric family we accept; everything else (HMAC `oct`
/// keys, encryption keys, unknown key types) is dropped.
pub fn parse(bytes: &[u8]) -> Result<Vec<SigningKey>, String> {
    let set: JwkSet = serde_json::from_slice(bytes)
        .map_err(|e| format!("not a JSON Web Key Set ({{\"keys\": [...]}}): {e}"))?;
    let mut keys = Vec::new();
    for jwk in &set.keys {
        if matches!(&jwk.common.public_key_use, Some(u) if *u != PublicKeyUse::Signature) {
            continue;
        }
        let family = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => AlgorithmFamily::Rsa,
            AlgorithmParameters::EllipticCurve(_) => AlgorithmFamily::Ec,
            AlgorithmParameters::OctetKeyPair(_) => AlgorithmFamily::Ed,
            _ => continue,
        };
        let alg = match jwk.common.key_algorithm {
            Some(a) => match Algorithm::try_from(a) {
                Ok(alg) if accepted(alg) => Some(alg),
                _ => continue,
            },
            None => None,
        };
        let Ok(key) = DecodingKey::from_jwk(jwk) else {
            continue;
        };
        keys.push(SigningKey {
            kid: jwk.common.key_id.clone(),
            alg,
            family,
            key,
        });
    }
    Ok(keys)
}

/// Reads and parses a `jwks_file`: an error unless it holds at least one usable key.
pub fn read_file(path: &Path) -> Result<Vec<SigningKey>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let keys = parse(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    if keys.is_empty() {
        return Err(format!(
            "{} holds no RS256, ES256 or EdDSA signature key",
            path.display()
        ));
    }
    Ok(keys)
}

/// The token algorithms the gateway accepts.
fn accepted(alg: Algorithm) -> bool {
    matches!(alg, Algorithm::RS256 | Algorithm::ES256 | Algorithm::EdDSA)
}
