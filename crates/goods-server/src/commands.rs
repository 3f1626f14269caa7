//! The subcommands besides serving (`migrate`, `sign-payment`, `health`, `verify-draw`; see
//! docs/configuration.md), each returning the process's exit code.

use crate::config::MigrateConfig;
use crate::telemetry;
use std::process::ExitCode;

/// The command line, as every refusal of one prints it.
pub const USAGE: &str = "usage: goods-server [migrate [--to VERSION] | sign-payment | health | verify-draw --seed HEX --commitment HEX --user ID [--cutoff HEX] [--root HEX --leaf-index N --tree-size N --path HEX,HEX,...]]";

/// How long traces may take to flush when no shutdown grace bounds it (a failed start, a
/// migration).
pub const FLUSH: std::time::Duration = std::time::Duration::from_secs(2);

/// Signs standard input with `PAYMENT_WEBHOOK_SECRET` (or `_FILE`) at the current time, as the
/// payment provider does, and prints the header value.
pub fn sign_payment() -> ExitCode {
    use secrecy::ExposeSecret as _;
    use std::io::Read as _;
    let get = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let secret = match crate::config::payment_secret(&get) {
        Ok(Some(secret)) => secret,
        Ok(None) => {
            eprintln!(
                "goods-server sign-payment: set PAYMENT_WEBHOOK_SECRET (or PAYMENT_WEBHOOK_SECRET_FILE) as the server has it"
            );
            return ExitCode::from(2);
        }
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let mut body = Vec::new();
    if let Err(error) = std::io::stdin().read_to_end(&mut body) {
        eprintln!("goods-server sign-payment: reading the event from standard input: {error}");
        return ExitCode::FAILURE;
    }
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    println!(
        "{}",
        api_actix::signature::sign(secret.expose_secret().as_bytes(), now, &body)
    );
    ExitCode::SUCCESS
}

/// Checks a draw: the seed against the commitment (a mismatch stops there), then the user's rank
/// key, with the cutoff whether it won, and with a proof that the entry is in the published
/// set. Exit 0 when every check passes, 1 when one fails, 2 on bad arguments.
pub fn verify_draw(args: &[&str]) -> ExitCode {
    use goods_domain::{DrawCommitment, DrawSeed, EntriesRoot, InclusionProof, RankKey, UserId};
    let usage = |what: &str| {
        eprintln!("goods-server verify-draw: {what}; {USAGE}");
        ExitCode::from(2)
    };
    let mut named = std::collections::HashMap::new();
    for pair in args.chunks(2) {
        match pair {
            [
                name @ ("--seed" | "--commitment" | "--user" | "--cutoff" | "--root"
                | "--leaf-index" | "--tree-size" | "--path"),
                value,
            ] => {
                named.insert(*name, *value);
            }
            _ => return usage(&format!("unexpected arguments {args:?}")),
        }
    }
    let (Some(seed), Some(commitment), Some(user)) = (
        named.get("--seed").map(|s| DrawSeed::from_hex(s)),
        named
            .get("--commitment")
            .map(|c| DrawCommitment::from_hex(c)),
        named
            .get("--user")
            .map(|u| u.parse::<i64>().ok().and_then(|u| UserId::parse(u).ok())),
    ) else {
        return usage("--seed, --commitment and --user are required");
    };
    let (Ok(seed), Ok(commitment), Some(user)) = (seed, commitment, user) else {
        return usage("the seed and commitment are 64 hex digits, the user a positive integer");
    };
    let Ok(cutoff) = named
        .get("--cutoff")
        .map(|c| RankKey::from_hex(c))
        .transpose()
    else {
        return usage("the cutoff is 64 hex digits");
    };
    let proof = match named.get("--root") {
        None => None,
        Some(root) => {
            let number = |name| named.get(name).and_then(|n: &&str| n.parse::<u64>().ok());
            let path: Option<Vec<[u8; 32]>> = named.get("--path").map_or(Some(Vec::new()), |p| {
                p.split(',')
                    .filter(|h| !h.is_empty())
                    .map(|h| hex::decode(h).ok()?.try_into().ok())
                    .collect()
            });
            let (Ok(root), Some(leaf_index), Some(tree_size), Some(audit_path)) = (
                EntriesRoot::from_hex(root),
                number("--leaf-index"),
                number("--tree-size"),
                path,
            ) else {
                return usage(
                    "--root is 64 hex digits, with --leaf-index and --tree-size whole numbers and --path comma-separated 64-hex-digit hashes",
                );
            };
            Some((
                root,
                InclusionProof {
                    leaf_index,
                    tree_size,
                    audit_path,
                },
            ))
        }
    };
    if !seed.opens(&commitment) {
        println!(
            "COMMITMENT MISMATCH: SHA-256(seed) = {}, published {}",
            seed.commitment().to_hex(),
            commitment.to_hex()
        );
        return ExitCode::FAILURE;
    }
    println!("commitment ok: SHA-256(seed) = {}", commitment.to_hex());
    let key = seed.rank_key(user);
    println!("rankKey {}", key.to_hex());
    if let Some(cutoff) = &cutoff {
        let won = goods_domain::draw::won(&key, Some(cutoff));
        println!("{}", if won { "WON" } else { "NOT_WON" });
    }
    if let Some((root, proof)) = proof {
        if !goods_domain::draw::verify_inclusion(&root, user, &proof) {
            println!(
                "INCLUSION MISMATCH: user {user} is not leaf {} of {} under {}",
                proof.leaf_index,
                proof.tree_size,
                root.to_hex()
            );
            return ExitCode::FAILURE;
        }
        println!(
            "inclusion ok: user {user} is leaf {} of {} under {}",
            proof.leaf_index,
            proof.tree_size,
            root.to_hex()
        );
    }
    ExitCode::SUCCESS
}

/// Exit 0 when the ops listener (`OPS_BIND_ADDR`; a wildcard address is asked on loopback)
/// answers `/health/ready` with 200 within two seconds, 1 otherwise.
pub fn health() -> ExitCode {
    use std::io::{Read as _, Write as _};
    let raw = std::env::var("OPS_BIND_ADDR").unwrap_or_else(|_| "127.0.0.1:9464".into());
    let Ok(mut addr) = raw.parse::<std::net::SocketAddr>() else {
        eprintln!("goods-server health: OPS_BIND_ADDR {raw:?} is not a socket address");
        return ExitCode::from(2);
    };
    if addr.ip().is_unspecified() {
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let timeout = std::time::Duration::from_secs(2);
    let answer = std::net::TcpStream::connect_timeout(&addr, timeout).and_then(|mut stream| {
        stream.set_read_timeout(Some(timeout))?;
        stream.write_all(b"GET /health/ready HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer)?;
        Ok(answer)
    });
    match answer {
        Ok(answer) if answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200") => {
            ExitCode::SUCCESS
        }
        Ok(answer) => {
            eprintln!(
                "goods-server health: {}",
                answer.lines().next().unwrap_or("no answer")
            );
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("goods-server health: {addr}: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The migration step reads the database and the log settings only: a fleet's migration job
/// has no identity or gate to configure.
pub async fn migrate(to: Option<&str>) -> ExitCode {
    let config = match MigrateConfig::from_env() {
        Ok(config) => config,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let telemetry = match telemetry::init_console(&config.log_filter, config.log_format) {
        Ok(telemetry) => telemetry,
        Err(error) => {
            eprintln!("invalid configuration: {error:#}");
            return ExitCode::from(2);
        }
    };
    let outcome = crate::startup::migrate(&config.database, &config.database_tls, to)
        .await
        .map(|applied| {
            tracing::info!(
                count = applied.len(),
                applied = %applied.join(","),
                "migrations applied"
            );
        });
    finish(telemetry, outcome, FLUSH).await
}

/// Flushes the telemetry within `flush`, then turns `outcome` into the exit code (an error is
/// logged and printed once, here).
pub async fn finish(
    telemetry: telemetry::Telemetry,
    outcome: anyhow::Result<()>,
    flush: std::time::Duration,
) -> ExitCode {
    let _ = tokio::time::timeout(
        flush,
        tokio::task::spawn_blocking(move || telemetry.shutdown(flush)),
    )
    .await;
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            eprintln!("goods-server: {error:#}");
            ExitCode::FAILURE
        }
    }
}
