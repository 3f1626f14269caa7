//! The payment provider's signature on a webhook (the scheme of Stripe's `Stripe-Signature`):
//! `Payment-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`. Several
//! `v1` entries may be sent while the provider rotates its secret; one match is enough.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// How far the signature's timestamp may be from the server's clock, in seconds, either way:
/// an event captured and replayed later is refused.
pub const TOLERANCE_S: i64 = 300;

/// Why a signature was refused. Nothing is recorded for a refused event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// No `Payment-Signature` header.
    #[error("the Payment-Signature header is missing")]
    Missing,
    /// Not `t=<seconds>,v1=<64 hex digits>`.
    #[error("the Payment-Signature header is not t=<unix seconds>,v1=<hex HMAC-SHA256>")]
    Malformed,
    /// `t` is more than [`TOLERANCE_S`] from now.
    #[error("the signature's timestamp is more than 300 s from the server's clock")]
    Stale,
    /// No `v1` is the body's HMAC under the secret.
    #[error("the signature does not match the body")]
    Mismatch,
}

fn mac(secret: &[u8], timestamp: i64, body: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret)
        .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The `Payment-Signature` header value for `body` at `timestamp` (what the provider sends; the
/// `sign-payment` command and the tests use it).
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let tag = mac(secret, timestamp, body).finalize().into_bytes();
    format!("t={timestamp},v1={}", hex::encode(tag))
}

/// Checks `header` against `body` at `now` (unix seconds). Every candidate is compared in
/// constant time.
pub fn verify(
    secret: &[u8],
    header: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    let mut timestamp = None;
    let mut candidates = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) if timestamp.is_none() => {
                timestamp = Some(t.parse::<i64>().map_err(|_| SignatureError::Malformed)?);
            }
            Some(("v1", sig)) => {
                let sig = hex::decode(sig).map_err(|_| SignatureError::Malformed)?;
                if sig.len() != 32 {
                    return Err(SignatureError::Malformed);
                }
                candidates.push(sig);
            }
            // Other schemes (a future v2) are ignored, as Stripe's clients do.
            Some((_, _)) => {}
            None => return Err(SignatureError::Malformed),
        }
    }
    let timestamp = timestamp.ok_or(SignatureError::Malformed)?;
    if candidates.is_empty() {
        return Err(SignatureError::Malformed);
    }
    if now.abs_diff(timestamp) > TOLERANCE_S.unsigned_abs() {
        return Err(SignatureError::Stale);
    }
    let expected = mac(secret, timestamp, body);
    if candidates
        .iter()
        .any(|sig| expected.clone().verify_slice(sig).is_ok())
    {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    const SECRET: &[u8] = b"whsec_test_3f9a1c27d04b4e8e9a6b5f1d2c3e4a5b";
    const BODY: &[u8] = br#"{"eventId":"evt_1"}"#;
    const NOW: i64 = 1_764_579_600;

    #[test]
    fn a_signature_made_with_the_secret_verifies_and_matches_a_known_vector() {
        // Computed independently: `printf '1.{}' | openssl dgst -sha256 -hmac Jefe`.
        assert_eq!(
            sign(b"Jefe", 1, b"{}"),
            "t=1,v1=dc7943cccf20f64327d263db5e2aca27c2b8175e8e6e7ea04f482091bf456b0f"
        );
        let header = sign(SECRET, NOW, BODY);
        assert_eq!(verify(SECRET, Some(&header), BODY, NOW), Ok(()));
    }

    #[rstest]
    #[case::missing(None, SignatureError::Missing)]
    #[case::empty(Some(""), SignatureError::Malformed)]
    #[case::no_timestamp(Some("v1=00"), SignatureError::Malformed)]
    #[case::no_signature(Some("t=1764579600"), SignatureError::Malformed)]
    #[case::short_signature(Some("t=1764579600,v1=abcd"), SignatureError::Malformed)]
    #[case::not_hex(Some("t=1764579600,v1=zz"), SignatureError::Malformed)]
    #[case::not_a_number(Some("t=soon,v1=00"), SignatureError::Malformed)]
    #[case::wrong(
        Some("t=1764579600,v1=0000000000000000000000000000000000000000000000000000000000000000"),
        SignatureError::Mismatch
    )]
    fn a_header_that_does_not_carry_a_valid_signature_is_refused(
        #[case] header: Option<&str>,
        #[case] expected: SignatureError,
    ) {
        assert_eq!(verify(SECRET, header, BODY, NOW), Err(expected));
    }

    #[rstest]
    #[case(NOW - 300, Ok(()))]
    #[case(NOW + 300, Ok(()))]
    #[case(NOW - 301, Err(SignatureError::Stale))]
    #[case(NOW + 301, Err(SignatureError::Stale))]
    fn a_signature_is_good_for_300_seconds_either_side_of_the_clock(
        #[case] signed_at: i64,
        #[case] expected: Result<(), SignatureError>,
    ) {
        let header = sign(SECRET, signed_at, BODY);
        assert_eq!(verify(SECRET, Some(&header), BODY, NOW), expected);
    }

    #[test]
    fn another_body_another_secret_or_another_timestamp_do_not_verify() {
        let header = sign(SECRET, NOW, BODY);
        assert_eq!(
            verify(SECRET, Some(&header), br#"{"eventId":"evt_2"}"#, NOW),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(b"another-secret", Some(&header), BODY, NOW),
            Err(SignatureError::Mismatch)
        );
        let moved = header.replace(&format!("t={NOW}"), &format!("t={}", NOW + 1));
        assert_eq!(
            verify(SECRET, Some(&moved), BODY, NOW),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn one_matching_signature_among_several_is_enough_while_a_secret_rotates() {
        let old = sign(b"the-old-secret", NOW, BODY);
        let new = sign(SECRET, NOW, BODY);
        let v1 = |h: &str| h.split_once(",v1=").map(|(_, s)| s.to_owned()).unwrap();
        let header = format!("t={NOW},v1={},v0=legacy,v1={}", v1(&old), v1(&new));
        assert_eq!(verify(SECRET, Some(&header), BODY, NOW), Ok(()));
    }
}
