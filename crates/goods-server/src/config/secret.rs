//! Secrets from the environment or from files (the container convention, `*_FILE`), and the
//! start-up check that refuses a secret nobody should sign with: a placeholder copied from an
//! example, something short, repetitive or made of words.

use super::{ConfigError, bad};
use secrecy::SecretString;

/// How to make one, in every refusal.
const HOW: &str = "generate one with `openssl rand -base64 48`";

/// The shortest secret accepted, in bytes.
pub const MIN_LEN: usize = 32;

/// The least entropy accepted, in bits, estimated from the secret's own character
/// frequencies (what a secret of `MIN_LEN` random lowercase letters and digits has, and far
/// below what `openssl rand -base64 48` gives: about 360).
const MIN_BITS: f64 = 128.0;

/// Words that mark a value copied from an example rather than generated.
const PLACEHOLDERS: &[&str] = &[
    "change-me",
    "changeme",
    "change_me",
    "replace",
    "example",
    "placeholder",
    "your-",
    "your_",
    "insert",
    "dummy",
    "sample",
    "default",
    "secret",
    "password",
];

/// `var` from the environment, or the contents of the file `var_FILE` names (trailing line
/// breaks removed); `None` when neither is set, an error when both are.
pub fn read(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    file_var: &'static str,
) -> Result<Option<SecretString>, ConfigError> {
    match (get(var), get(file_var)) {
        (Some(_), Some(_)) => Err(bad(file_var, format!("set {var} or {file_var}, not both"))),
        (Some(value), None) => Ok(Some(value.into())),
        (None, Some(path)) => std::fs::read_to_string(&path)
            .map(|text| Some(text.trim_end_matches(['\n', '\r']).to_owned().into()))
            .map_err(|e| bad(file_var, format!("cannot read {path}: {e}"))),
        (None, None) => Ok(None),
    }
}

/// `url` with the password read from `file_var` (a container secret) when that is set; a URL
/// with a password of its own besides is an error.
pub fn with_password_file(
    get: &impl Fn(&str) -> Option<String>,
    url_var: &'static str,
    url: String,
    file_var: &'static str,
) -> Result<String, ConfigError> {
    let Some(path) = get(file_var) else {
        return Ok(url);
    };
    let mut parsed = url::Url::parse(&url).map_err(|e| bad(url_var, format!("not a URL: {e}")))?;
    if parsed.password().is_some() {
        return Err(bad(
            file_var,
            format!("{url_var} has a password of its own: set one or the other"),
        ));
    }
    let password = std::fs::read_to_string(&path)
        .map_err(|e| bad(file_var, format!("cannot read {path}: {e}")))?;
    parsed
        .set_password(Some(password.trim_end_matches(['\n', '\r'])))
        .map_err(|()| bad(url_var, "cannot carry a password (no host)"))?;
    Ok(parsed.into())
}

/// Bits of entropy in `value` if each character were drawn independently with the frequency
/// it has in `value` (Shannon's estimate): repetition and small alphabets lower it.
fn estimated_bits(value: &str) -> f64 {
    let mut counts = std::collections::HashMap::new();
    for b in value.bytes() {
        *counts.entry(b).or_insert(0_u32) += 1;
    }
    let len = value.len() as f64;
    let per_char: f64 = counts
        .values()
        .map(|&n| {
            let p = f64::from(n) / len;
            -p * p.log2()
        })
        .sum();
    per_char * len
}

/// Whether `value` is one shorter piece over and over (`abcabcabc...`).
fn repeats(value: &[u8]) -> bool {
    (1..=value.len() / 2).any(|period| {
        value.len().is_multiple_of(period) && value.chunks(period).all(|c| c == &value[..period])
    })
}

/// Whether `value` reads as words: letters split by spaces or punctuation, no digits.
fn is_phrase(value: &str) -> bool {
    let separators = value.bytes().filter(|b| b" -_.,".contains(b)).count();
    separators >= 2
        && value
            .bytes()
            .all(|b| b.is_ascii_alphabetic() || b" -_.,'".contains(&b))
}

/// The share of a secret's characters at or above which it counts as guessable.
const MAX_GUESSABLE_SHARE: f64 = 0.5;

/// The share of `value`'s characters zxcvbn explains by patterns a cracker tries first, the
/// larger of the whole's and of 16-character pieces' (zxcvbn stops past 2^64 guesses). Random
/// secrets score 0-17%; keyboard walks, runs and run-together passphrases 67-100%.
fn guessable_share(value: &str) -> f64 {
    fn explained(piece: &str) -> usize {
        zxcvbn::zxcvbn(piece, &[])
            .sequence()
            .iter()
            .filter(|m| {
                !matches!(
                    m.pattern,
                    zxcvbn::matching::patterns::MatchPattern::BruteForce
                )
            })
            .map(|m| m.token.chars().count())
            .sum()
    }
    let chars: Vec<char> = value.chars().collect();
    if chars.is_empty() {
        return 0.0;
    }
    let pieces: usize = chars
        .chunks(16)
        .map(|piece| explained(&piece.iter().collect::<String>()))
        .sum();
    #[allow(clippy::cast_precision_loss)]
    let share = explained(value).max(pieces) as f64 / chars.len() as f64;
    share
}

/// Refuses a secret too weak to sign with, saying what is wrong and how to make a good one.
pub fn check_strength(var: &'static str, value: &str) -> Result<(), ConfigError> {
    let lower = value.to_ascii_lowercase();
    if let Some(word) = PLACEHOLDERS.iter().find(|w| lower.contains(*w)) {
        return Err(bad(
            var,
            format!("looks like a placeholder (it contains {word:?}); {HOW}"),
        ));
    }
    if value.len() < MIN_LEN {
        return Err(bad(
            var,
            format!(
                "must be at least {MIN_LEN} bytes (it has {}); {HOW}",
                value.len()
            ),
        ));
    }
    if repeats(value.as_bytes()) {
        return Err(bad(var, format!("is one piece repeated; {HOW}")));
    }
    if is_phrase(value) {
        return Err(bad(
            var,
            format!("is a phrase of words, which is guessable; {HOW}"),
        ));
    }
    let share = guessable_share(value);
    if share >= MAX_GUESSABLE_SHARE {
        return Err(bad(
            var,
            format!(
                "is guessable: {:.0}% of it is keyboard walks, runs, repeats or dictionary words; {HOW}",
                share * 100.0
            ),
        ));
    }
    let bits = estimated_bits(value);
    if bits < MIN_BITS {
        return Err(bad(
            var,
            format!(
                "has too little randomness (about {bits:.0} bits, at least {MIN_BITS:.0} needed); {HOW}"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    // What `openssl rand -base64 48` and `openssl rand -hex 32` print.
    #[case::base64_of_48_random_bytes(
        "3q2+7wXk0M1yQ9vT5bZc8RnLh4aUeF6sJpGdKtYr2xWmN0oVi7E1jB9gC5fH3lAz",
        true
    )]
    #[case::hex_of_32_random_bytes(
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        true
    )]
    #[case::the_k8s_examples_value("REPLACE-with-48-random-bytes-base64", false)]
    #[case::the_systemd_examples_value("change-me-to-at-least-32-random-bytes", false)]
    #[case::change_me_alone("change-me", false)]
    #[case::example_in_it("Xk29-example-secret-value-aaaaaaaaaaaaa", false)]
    #[case::too_short("k8Jq2Vn5Zr7Lp1Xc4Wm9Bt6Hd3", false)]
    #[case::one_character_repeated("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false)]
    #[case::a_piece_repeated("s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t-", false)]
    #[case::a_pattern_with_a_remainder("k8Jq2Vk8Jq2Vk8Jq2Vk8Jq2Vk8Jq2Vk8Jq2Vk8", false)]
    #[case::a_phrase("correct horse battery staple and more words", false)]
    #[case::a_hyphenated_phrase("correct-horse-battery-staple-is-famous", false)]
    #[case::digits_counting_up("0123456789012345678901234567890123456789", false)]
    #[case::a_keyboard_walk("qwertyuiop[]asdfghjkl;'zxcvbnm,./QWERTYUIOP", false)]
    #[case::a_diagonal_keyboard_walk("zaq12wsxcde34rfvbgt56yhnmju78ik,.lo90p;/", false)]
    #[case::a_column_keyboard_walk("1qaz2wsx3edc4rfv5tgb6yhn7ujm8ik,9ol.0p;/", false)]
    #[case::an_alphabet_run("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP", false)]
    #[case::a_run_together_passphrase("correcthorsebatterystaplemonkeydragonsunshine", false)]
    #[case::a_capitalised_passphrase("CorrectHorseBatteryStaple2024Summer!Winter", false)]
    #[case::passwords_repeated("password1password2password3password4", false)]
    #[case::random_base62_a("k8Jq2Vn5Zr7Lp1Xc4Wm9Bt6Hd3Yf0Ga5Se8Ru2", true)]
    #[case::random_base62_b("WXf9pq0Lm3sRtY8uVb2Nc5Kd7Jh1Gz4Ae6Io0", true)]
    fn a_secret_must_be_long_random_and_not_copied_from_an_example(
        #[case] value: &str,
        #[case] accepted: bool,
    ) {
        let verdict = check_strength("AUTH_JWT_SECRET", value);
        assert_eq!(verdict.is_ok(), accepted, "{value}: {verdict:?}");
        if let Err(e) = verdict {
            assert!(e.to_string().contains("openssl rand -base64 48"), "{e}");
        }
    }

    #[test]
    fn a_secret_comes_from_its_variable_or_its_file_and_never_both() {
        use secrecy::ExposeSecret as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "from-the-file\n").unwrap();
        let path = path.display().to_string();
        let lookup = |vars: Vec<(&'static str, String)>| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.clone())
            }
        };
        let read_with = |vars| read(&lookup(vars), "S", "S_FILE");
        assert_eq!(
            read_with(vec![("S_FILE", path.clone())])
                .unwrap()
                .unwrap()
                .expose_secret(),
            "from-the-file"
        );
        assert_eq!(
            read_with(vec![("S", "direct".into())])
                .unwrap()
                .unwrap()
                .expose_secret(),
            "direct"
        );
        assert!(read_with(vec![]).unwrap().is_none());
        assert_eq!(
            read_with(vec![("S", "x".into()), ("S_FILE", path)])
                .unwrap_err()
                .var,
            "S_FILE"
        );
        assert_eq!(
            read_with(vec![("S_FILE", "/no/such/file".into())])
                .unwrap_err()
                .var,
            "S_FILE"
        );
    }
}
