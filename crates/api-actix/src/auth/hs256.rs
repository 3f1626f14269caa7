//! The one algorithm identity accepts, HS256, as jsonwebtoken's crypto provider. Its built-in
//! `rust_crypto` provider brings RSA (the `rsa` crate, RUSTSEC-2023-0071, no fixed release) and
//! elliptic curves this service never verifies; this provider knows HS256 alone, on the same
//! RustCrypto `hmac` and `sha2` the payment webhooks use, and refuses every other algorithm.

use ::signature::{Signer, Verifier};
use hmac::{Hmac, Mac};
use jsonwebtoken::crypto::{CryptoProvider, JwkUtils, JwtSigner, JwtVerifier};
use jsonwebtoken::errors::{ErrorKind, Result};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey};
use sha2::Sha256;

struct Hs256(Hmac<Sha256>);

impl Hs256 {
    fn new(secret: &[u8]) -> Result<Self> {
        Hmac::new_from_slice(secret)
            .map(Self)
            .map_err(|_| ErrorKind::InvalidKeyFormat.into())
    }
}

impl Signer<Vec<u8>> for Hs256 {
    fn try_sign(&self, message: &[u8]) -> std::result::Result<Vec<u8>, ::signature::Error> {
        let mut mac = self.0.clone();
        mac.update(message);
        Ok(mac.finalize().into_bytes().to_vec())
    }
}

impl Verifier<Vec<u8>> for Hs256 {
    fn verify(&self, message: &[u8], tag: &Vec<u8>) -> std::result::Result<(), ::signature::Error> {
        let mut mac = self.0.clone();
        mac.update(message);
        // Constant time (hmac's `verify_slice`).
        mac.verify_slice(tag)
            .map_err(::signature::Error::from_source)
    }
}

impl JwtSigner for Hs256 {
    fn algorithm(&self) -> Algorithm {
        Algorithm::HS256
    }
}

impl JwtVerifier for Hs256 {
    fn algorithm(&self) -> Algorithm {
        Algorithm::HS256
    }
}

fn signer(algorithm: &Algorithm, key: &EncodingKey) -> Result<Box<dyn JwtSigner>> {
    match algorithm {
        Algorithm::HS256 => Ok(Box::new(Hs256::new(key.try_get_hmac_secret()?)?)),
        _ => Err(ErrorKind::InvalidAlgorithm.into()),
    }
}

fn verifier(algorithm: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>> {
    match algorithm {
        Algorithm::HS256 => Ok(Box::new(Hs256::new(key.try_get_hmac_secret()?)?)),
        _ => Err(ErrorKind::InvalidAlgorithm.into()),
    }
}

static PROVIDER: CryptoProvider = CryptoProvider {
    signer_factory: signer,
    verifier_factory: verifier,
    // No JWK is ever read: keys are the configured secret.
    jwk_utils: JwkUtils::new_unimplemented(),
};

/// Makes HS256 the process's JWT crypto. Call it before the first token is made or checked
/// (`AuthMode::jwt` does); calling it again changes nothing.
pub fn install() {
    // Err only when a provider is installed already: this one, by an earlier call.
    let _ = PROVIDER.install_default();
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{Header, Validation, decode, encode};
    use serde_json::{Value, json};

    const SECRET: &[u8] = b"hs256-test-secret-9Vq2mX7cK4tB3zL6";

    #[test]
    fn a_token_signed_with_the_secret_verifies_and_another_secret_does_not() {
        install();
        let claims = json!({"sub": "7", "exp": 4_102_444_800_u64});
        let token = encode(
            &Header::default(),
            &claims,
            &EncodingKey::from_secret(SECRET),
        )
        .unwrap();
        let validation = Validation::new(Algorithm::HS256);
        let read = decode::<Value>(&token, &DecodingKey::from_secret(SECRET), &validation).unwrap();
        assert_eq!(read.claims["sub"], "7");
        let other = decode::<Value>(
            &token,
            &DecodingKey::from_secret(b"another-secret"),
            &validation,
        );
        assert_eq!(other.unwrap_err().kind(), &ErrorKind::InvalidSignature);
    }

    /// A token signed HS512 with the right secret, made by hand (this provider cannot make one).
    fn hs512_token() -> String {
        use base64::Engine as _;
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let head = b64(br#"{"alg":"HS512","typ":"JWT"}"#);
        let body = b64(br#"{"sub":"7","exp":4102444800}"#);
        let mut mac = Hmac::<sha2::Sha512>::new_from_slice(SECRET).unwrap();
        mac.update(format!("{head}.{body}").as_bytes());
        format!("{head}.{body}.{}", b64(&mac.finalize().into_bytes()))
    }

    #[test]
    fn a_token_of_another_algorithm_is_refused_even_when_the_validation_allows_it() {
        install();
        let key = DecodingKey::from_secret(SECRET);
        let token = hs512_token();
        let as_configured = decode::<Value>(&token, &key, &Validation::new(Algorithm::HS256));
        assert_eq!(
            as_configured.unwrap_err().kind(),
            &ErrorKind::InvalidAlgorithm
        );
        let allowed = decode::<Value>(&token, &key, &Validation::new(Algorithm::HS512));
        assert_eq!(allowed.unwrap_err().kind(), &ErrorKind::InvalidAlgorithm);
    }

    #[test]
    fn every_algorithm_but_hs256_is_refused() {
        install();
        for algorithm in [
            Algorithm::HS384,
            Algorithm::RS256,
            Algorithm::ES256,
            Algorithm::EdDSA,
        ] {
            let made = signer(&algorithm, &EncodingKey::from_secret(SECRET));
            assert_eq!(
                made.err().map(|e| e.into_kind()),
                Some(ErrorKind::InvalidAlgorithm)
            );
        }
    }
}
