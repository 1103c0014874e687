//! The RS256 JSON Web Tokens the host signs as an OAuth client: Google's JWT
//! bearer grant (RFC 7523 §2.1) and Entra ID's client assertion (§2.2). A JWT
//! is `base64url(header).base64url(claims).base64url(signature)`; the
//! signature is RSASSA-PKCS1-v1_5 with SHA-256 over the first two parts,
//! made by aws-lc-rs (already the TLS provider). Keys come from PEM files
//! (PKCS#8 `PRIVATE KEY` or PKCS#1 `RSA PRIVATE KEY`), parsed by
//! rustls-pki-types.

use std::fmt;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::Value;

/// An RSA private key that signs assertions. Its `Debug` never shows it.
pub struct SigningKey {
    key: RsaKeyPair,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningKey(<redacted>)")
    }
}

/// Why a key could not be read (never holds the key).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("no PEM private key (`PRIVATE KEY` or `RSA PRIVATE KEY`) found")]
    NoPem,
    #[error("the private key is not an RSA key aws-lc-rs accepts ({0})")]
    NotRsa(String),
    #[error("no PEM certificate found")]
    NoCertificate,
}

impl SigningKey {
    /// The RSA key in a PEM text.
    pub fn from_pem(pem: &[u8]) -> Result<Self, KeyError> {
        let der = PrivateKeyDer::from_pem_slice(pem).map_err(|_| KeyError::NoPem)?;
        let key = match &der {
            PrivateKeyDer::Pkcs8(pkcs8) => RsaKeyPair::from_pkcs8(pkcs8.secret_pkcs8_der()),
            PrivateKeyDer::Pkcs1(pkcs1) => RsaKeyPair::from_der(pkcs1.secret_pkcs1_der()),
            _ => return Err(KeyError::NotRsa("not PKCS#8 or PKCS#1".to_owned())),
        }
        .map_err(|rejected| KeyError::NotRsa(rejected.to_string()))?;
        Ok(Self { key })
    }

    /// `header.claims.signature`, each part base64url without padding. The
    /// header's `alg` is set to RS256 and `typ` to JWT.
    pub fn sign_jwt(&self, mut header: serde_json::Map<String, Value>, claims: &Value) -> Result<String, String> {
        header.insert("alg".to_owned(), Value::from("RS256"));
        header.insert("typ".to_owned(), Value::from("JWT"));
        let header = serde_json::to_vec(&header).map_err(|error| error.to_string())?;
        let claims = serde_json::to_vec(claims).map_err(|error| error.to_string())?;
        let signed = format!("{}.{}", URL_SAFE_NO_PAD.encode(header), URL_SAFE_NO_PAD.encode(claims));
        let mut signature = vec![0; self.key.public_modulus_len()];
        self.key
            .sign(&RSA_PKCS1_SHA256, &SystemRandom::new(), signed.as_bytes(), &mut signature)
            .map_err(|_| "the RSA signature failed".to_owned())?;
        Ok(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature)))
    }
}

/// The first certificate of a PEM text, and its SHA-1 thumbprint as Entra ID
/// reads it in an assertion's `x5t` header (base64url of the DER's SHA-1).
pub fn certificate_thumbprint(pem: &[u8]) -> Result<String, KeyError> {
    let certificate = CertificateDer::pem_slice_iter(pem).next().and_then(Result::ok).ok_or(KeyError::NoCertificate)?;
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, certificate.as_ref());
    Ok(URL_SAFE_NO_PAD.encode(digest.as_ref()))
}

#[cfg(test)]
mod tests {
    use aws_lc_rs::encoding::AsDer;
    use aws_lc_rs::rsa::KeySize;
    use aws_lc_rs::signature::{KeyPair as _, RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};

    use super::*;

    fn pem(der: &[u8], label: &str) -> String {
        let body = base64::engine::general_purpose::STANDARD.encode(der);
        let lines: Vec<&str> = body.as_bytes().chunks(64).map(|line| std::str::from_utf8(line).unwrap()).collect();
        format!("-----BEGIN {label}-----\n{}\n-----END {label}-----\n", lines.join("\n"))
    }

    #[test]
    fn a_signed_jwt_verifies_with_the_public_half() {
        let generated = RsaKeyPair::generate(KeySize::Rsa2048).unwrap();
        let pkcs8 = AsDer::<aws_lc_rs::encoding::Pkcs8V1Der>::as_der(&generated).unwrap();
        let key = SigningKey::from_pem(pem(pkcs8.as_ref(), "PRIVATE KEY").as_bytes()).unwrap();
        let public = generated.public_key().as_ref().to_vec();
        let mut header = serde_json::Map::new();
        header.insert("kid".into(), "k1".into());
        let jwt = key.sign_jwt(header, &serde_json::json!({"iss": "a@b"})).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(header, serde_json::json!({"alg": "RS256", "typ": "JWT", "kid": "k1"}));
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        let signed = format!("{}.{}", parts[0], parts[1]);
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &public).verify(signed.as_bytes(), &signature).unwrap();
        assert_eq!(format!("{key:?}"), "SigningKey(<redacted>)");
    }

    #[test]
    fn a_key_that_is_not_pem_or_not_rsa_is_a_typed_error() {
        assert_eq!(SigningKey::from_pem(b"not a key").unwrap_err(), KeyError::NoPem);
        let garbage = pem(b"definitely not der", "PRIVATE KEY");
        assert!(matches!(SigningKey::from_pem(garbage.as_bytes()), Err(KeyError::NotRsa(_))));
        assert_eq!(certificate_thumbprint(b"nothing").unwrap_err(), KeyError::NoCertificate);
    }
}
