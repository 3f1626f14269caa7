//! The Lua scripts, embedded, run with EVALSHA and reloaded on NOSCRIPT. The token bucket's
//! function (`gcra.lua`) is the text before each script that charges a bucket.

use crate::connection::RedisConnection;
use fred::prelude::*;
use fred::types::scripts::Script;
use fred::types::{MultipleKeys, MultipleValues};
use std::sync::LazyLock;

pub static SEED: LazyLock<Script> =
    LazyLock::new(|| Script::from_lua(include_str!("../lua/seed.lua")));
pub static RESERVE: LazyLock<Script> = LazyLock::new(|| {
    Script::from_lua(concat!(
        include_str!("../lua/gcra.lua"),
        include_str!("../lua/reserve.lua")
    ))
});
pub static CONFIRM: LazyLock<Script> =
    LazyLock::new(|| Script::from_lua(include_str!("../lua/confirm.lua")));
pub static CANCEL: LazyLock<Script> =
    LazyLock::new(|| Script::from_lua(include_str!("../lua/cancel.lua")));
pub static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::from_lua(include_str!("../lua/release.lua")));
pub static RESYNC: LazyLock<Script> =
    LazyLock::new(|| Script::from_lua(include_str!("../lua/resync.lua")));
pub static PERMIT: LazyLock<Script> =
    LazyLock::new(|| Script::from_lua(include_str!("../lua/permit.lua")));
pub static RATE: LazyLock<Script> = LazyLock::new(|| {
    Script::from_lua(concat!(
        include_str!("../lua/gcra.lua"),
        include_str!("../lua/rate.lua")
    ))
});
pub static REMAINING: LazyLock<Script> =
    LazyLock::new(|| Script::from_lua(include_str!("../lua/remaining.lua")));

/// Runs `script` on the connection's client for the caller ([`RedisConnection::client`]):
/// EVALSHA, and on NOSCRIPT (a restarted or flushed Redis) SCRIPT LOAD and EVALSHA again.
pub async fn run<R, K, V>(
    conn: &RedisConnection,
    script: &Script,
    keys: K,
    args: V,
) -> Result<R, Error>
where
    R: FromValue,
    K: Into<MultipleKeys> + Send,
    V: TryInto<MultipleValues> + Send,
    V::Error: Into<Error> + Send,
{
    script.evalsha_with_reload(&conn.client(), keys, args).await
}
