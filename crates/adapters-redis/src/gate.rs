//! The Redis admission gate (the design document's DropReservationStore).

use crate::connection::RedisConnection;
use crate::keys::{DropKeys, marker_field, restock_channel};
use crate::rate::{bucket_decision, bucket_key};
use crate::reserving::{Entry, Queues};
use crate::scripts::{self, CANCEL, CONFIRM, RELEASE, REMAINING, RESYNC, SEED};
use crate::sold_out::{Marker, Markers, SoldOutFlags};
use async_trait::async_trait;
use fred::prelude::*;
use fred::types::scripts::Script;
use goods_domain::batch::FreeUnits;
use goods_domain::ports::{
    AdmissionGate, GateSeed, Reservation, ReserveOutcome, StaleReservation, from_unix_ms, unix_ms,
    whole_units,
};
use goods_domain::{DropId, IdempotencyKey, InfraError, OrderId, Quantity, RateKey, Sku, UserId};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;

/// How long after `closeAt` a drop's gate keys live (purchases in flight at close settle).
const GRACE: time::Duration = time::Duration::hours(1);

#[derive(Clone)]
pub struct RedisGate {
    conn: RedisConnection,
    flags: Arc<SoldOutFlags>,
    /// The reservations waiting for their drop's next call (`reserving`).
    queues: Queues,
}

fn infra(context: &'static str) -> impl FnOnce(Error) -> InfraError {
    move |e| InfraError::new(context, e)
}

impl RedisGate {
    /// A gate on `conn`, with sold-out flags that expire after `flag_ttl` at the latest, and
    /// a task that drops them when a restock message arrives.
    pub fn new(conn: RedisConnection, flag_ttl: Duration) -> Self {
        let flags = Arc::new(SoldOutFlags::new(flag_ttl));
        let gate = Self {
            conn,
            flags,
            queues: Queues::default(),
        };
        gate.listen_for_restocks();
        gate
    }

    fn listen_for_restocks(&self) {
        let flags = Arc::clone(&self.flags);
        self.conn
            .subscribe(restock_channel(&self.conn.prefix), move |value| {
                if let Some(drop) = value.as_i64().and_then(|id| DropId::parse(id).ok()) {
                    flags.clear(drop);
                }
            });
    }

    /// Whether this instance answers SOLD_OUT for `drop`'s size `sku` on its own right now
    /// (its sold-out flag is up): what a restock message brings down.
    pub fn sold_out_flag_raised(&self, drop: DropId, sku: Option<&Sku>) -> bool {
        self.flags.is_raised(drop, sku)
    }

    fn keys(&self, drop: DropId) -> DropKeys {
        DropKeys::new(&self.conn.drops, drop)
    }

    /// Loads the marker snapshot behind the sold-out flag of `drop`'s size `sku`, in the
    /// background.
    fn raise_sold_out_flag(&self, drop: DropId, sku: Option<&Sku>) {
        let Some(epoch) = self.flags.begin_loading(drop, sku) else {
            return;
        };
        let sku = sku.cloned();
        let (pool, flags, idem) = (
            self.conn.pool.clone(),
            Arc::clone(&self.flags),
            self.keys(drop).idem,
        );
        self.conn.tasks.spawn(async move {
            match pool
                .next()
                .hgetall::<HashMap<String, String>, _>(idem)
                .await
            {
                Ok(raw) => {
                    let mut markers: Markers = HashMap::new();
                    for (user, key, marker) in raw.iter().filter_map(parse_marker) {
                        markers
                            .entry(user)
                            .or_default()
                            .insert(key.to_owned(), marker);
                    }
                    flags.install(drop, sku, epoch, markers);
                }
                Err(error) => {
                    tracing::debug!(error = %error, "sold-out snapshot not loaded");
                    flags.clear(drop);
                }
            }
        });
    }
}

impl RedisGate {
    /// Marks `confirmed` (all of `drop`) done with their orders, in one script.
    async fn confirm_in(
        &self,
        drop: DropId,
        confirmed: &[(&Reservation, OrderId)],
    ) -> Result<(), InfraError> {
        if confirmed.is_empty() {
            return Ok(());
        }
        let mut args: Vec<Value> = Vec::with_capacity(confirmed.len() * 4);
        for (r, order) in confirmed {
            args.push(marker_field(r.user_id, &r.key).into());
            args.push(i64::from(r.quantity.get()).into());
            args.push(order.get().into());
            args.push(sku_arg(r.sku.as_ref()));
        }
        let _: i64 = scripts::run(&self.conn, &CONFIRM, vec![self.keys(drop).idem], args)
            .await
            .map_err(infra("redis confirm"))?;
        Ok(())
    }

    /// Runs `seed.lua` or `resync.lua`, which take the same keys and arguments.
    async fn run_seed(&self, script: &Script, seed: &GateSeed) -> Result<i64, Error> {
        let keys = self.keys(seed.drop_id);
        let mut held: HashMap<UserId, u32> = HashMap::new();
        for order in seed.orders.iter().filter(|o| o.live) {
            *held.entry(order.user_id).or_default() += order.quantity.get();
        }
        let expires = seed.expires_at.saturating_add(GRACE).unix_timestamp();
        let sizes: Vec<(&Sku, u32)> = seed
            .remaining
            .iter()
            .filter_map(|(sku, units)| Some((sku.as_ref()?, *units)))
            .collect();
        let mut args: Vec<Value> = vec![
            i64::from(seed.remaining_in_all()).into(),
            expires.into(),
            restock_channel(&self.conn.prefix).into(),
            seed.drop_id.get().into(),
            count(sizes.len()),
        ];
        for (sku, units) in sizes {
            args.push(sku.as_str().into());
            args.push(i64::from(units).into());
        }
        args.push(count(held.len()));
        for (user, units) in held {
            args.push(user.get().into());
            args.push(i64::from(units).into());
        }
        for order in &seed.orders {
            let done = Marker::Done {
                quantity: order.quantity.get(),
                order: order.order_id,
                sku: order.sku.clone(),
            };
            args.push(marker_field(order.user_id, &order.key).into());
            args.push(done.stored().into());
        }
        let keys = vec![keys.remaining, keys.held, keys.idem, keys.sizes];
        let applied = scripts::run(&self.conn, script, keys, args).await;
        self.restocked_here(seed.drop_id);
        applied
    }

    /// The drop's marker hash as stored (`{user}|{key}` to a marker), read in one HGETALL.
    async fn read_markers(
        &self,
        drop: DropId,
        context: &'static str,
    ) -> Result<HashMap<String, String>, InfraError> {
        self.conn
            .pool
            .next()
            .hgetall(self.keys(drop).idem)
            .await
            .map_err(infra(context))
    }

    /// Brings this instance's flag for `drop` down as soon as a change that can give units
    /// back has run here, not only when its restock message comes back from Redis: this
    /// instance's next reserve must see the units it just returned.
    fn restocked_here(&self, drop: DropId) {
        self.flags.clear(drop);
    }
}

/// One entry of a marker hash: the buyer, the key and the marker; `None` for an entry this
/// release cannot read (it is skipped).
fn parse_marker<'a>((field, value): (&'a String, &String)) -> Option<(UserId, &'a str, Marker)> {
    let (user, key) = field.split_once('|')?;
    let user = UserId::parse(user.parse().ok()?).ok()?;
    Some((user, key, Marker::parse(value)?))
}

fn reply_status(reply: &[Value]) -> Result<String, InfraError> {
    reply
        .first()
        .and_then(Value::as_string)
        .ok_or_else(|| InfraError::msg(format!("unexpected reserve reply {reply:?}")))
}

fn reply_number(reply: &[Value]) -> Result<i64, InfraError> {
    reply
        .get(1)
        .and_then(Value::as_i64)
        .ok_or_else(|| InfraError::msg(format!("unexpected reserve reply {reply:?}")))
}

/// A size as the scripts take it: `''` for a drop without sizes.
fn sku_arg(sku: Option<&Sku>) -> Value {
    sku.map_or("", Sku::as_str).into()
}

fn count(n: usize) -> Value {
    i64::try_from(n).unwrap_or(i64::MAX).into()
}

fn units(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

#[async_trait]
impl AdmissionGate for RedisGate {
    #[tracing::instrument(level = "debug", skip_all, fields(drop.id = %seed.drop_id))]
    async fn seed_if_absent(&self, seed: &GateSeed) -> Result<(), InfraError> {
        let _: i64 = self
            .run_seed(&SEED, seed)
            .await
            .map_err(infra("redis seed"))?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(drop.id = %seed.drop_id))]
    async fn resync(&self, seed: &GateSeed) -> Result<(), InfraError> {
        // Done markers no order explains go first: the script keeps every marker the seed
        // lacks, and these are not in flight (see GateSeed::unexplained).
        if !seed.unexplained.is_empty() {
            let fields: Vec<String> = seed
                .unexplained
                .iter()
                .map(|(user, key)| marker_field(*user, key))
                .collect();
            let _: i64 = self
                .conn
                .pool
                .next()
                .hdel(self.keys(seed.drop_id).idem, fields)
                .await
                .map_err(infra("redis unexplained markers"))?;
        }
        let _: i64 = self
            .run_seed(&RESYNC, seed)
            .await
            .map_err(infra("redis resync"))?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(drop.id = %drop_id))]
    async fn done_markers(
        &self,
        drop_id: DropId,
    ) -> Result<Vec<(UserId, IdempotencyKey)>, InfraError> {
        let raw = self.read_markers(drop_id, "redis done markers").await?;
        Ok(raw
            .iter()
            .filter_map(parse_marker)
            .filter(|(_, _, marker)| matches!(marker, Marker::Done { .. }))
            .filter_map(|(user, key, _)| Some((user, IdempotencyKey::parse(key).ok()?)))
            .collect())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(drop.id = %drop_id))]
    async fn stale(
        &self,
        drop_id: DropId,
        now: OffsetDateTime,
    ) -> Result<Vec<StaleReservation>, InfraError> {
        let raw = self.read_markers(drop_id, "redis stale markers").await?;
        let now_ms = unix_ms(now);
        Ok(raw
            .iter()
            .filter_map(parse_marker)
            .filter_map(|(user_id, key, marker)| {
                let Marker::InProgress {
                    quantity,
                    deadline_ms,
                    sku,
                } = marker
                else {
                    return None;
                };
                if deadline_ms >= now_ms {
                    return None;
                }
                Some(StaleReservation {
                    user_id,
                    key: IdempotencyKey::parse(key).ok()?,
                    sku,
                    quantity: Quantity::parse("quantity", i64::from(quantity)).ok()?,
                    deadline: from_unix_ms(deadline_ms)?,
                })
            })
            .collect())
    }

    fn answers_locally(&self, drop: DropId, sku: Option<Sku>) -> bool {
        self.flags.is_raised(drop, sku.as_ref())
    }

    /// On one Redis, not on a cluster: there a buyer's bucket is in another slot than the
    /// drop's keys, and the rate limiter charges it in a round trip of its own.
    fn keeps_buckets(&self) -> bool {
        !self.conn.pool.is_clustered()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(drop.id = %r.drop_id, user.id = %r.user_id))]
    async fn reserve(&self, r: &Reservation) -> Result<ReserveOutcome, InfraError> {
        if let Some(answer) =
            self.flags
                .answer(r.drop_id, r.sku.as_ref(), r.user_id, &r.key, r.quantity)
        {
            return Ok(answer);
        }
        let mut entry = Entry {
            args: [
                r.user_id.get().into(),
                marker_field(r.user_id, &r.key).into(),
                i64::from(r.quantity.get()).into(),
                i64::from(r.per_user_limit.get()).into(),
                r.deadline_ms().into(),
                sku_arg(r.sku.as_ref()),
                0.into(),
                0.into(),
                0.into(),
            ],
            bucket: None,
        };
        if let Some(limit) = r.bucket {
            if !self.keeps_buckets() {
                return Err(InfraError::msg(
                    "a buyer's bucket given to a Redis Cluster's gate (it is in another slot)",
                ));
            }
            entry.bucket = Some(bucket_key(&self.conn.prefix, RateKey::Buyer(r.user_id)));
            entry.args[7] = i64::try_from(limit.interval().as_micros())
                .unwrap_or(i64::MAX)
                .into();
            entry.args[8] = i64::from(limit.burst()).into();
        }
        let reply = self
            .queues
            .reserve(&self.conn, r.drop_id, entry)
            .await
            .map_err(infra("redis reserve"))?;
        let outcome = match reply_status(&reply)?.as_str() {
            "RATE_LIMITED" => ReserveOutcome::RateLimited(bucket_decision(&reply[1..])?),
            "ADMITTED" => ReserveOutcome::Admitted,
            "REPLAY" => ReserveOutcome::Replay(
                OrderId::parse(reply_number(&reply)?)
                    .map_err(|e| InfraError::new("replay marker", e))?,
            ),
            "IN_PROGRESS" => ReserveOutcome::InProgress {
                deadline: from_unix_ms(reply_number(&reply)?)
                    .ok_or_else(|| InfraError::msg(format!("corrupt lease {reply:?}")))?,
            },
            "KEY_REUSED" => ReserveOutcome::KeyReused,
            "SOLD_OUT" => ReserveOutcome::SoldOut {
                remaining: units(reply_number(&reply)?),
            },
            "PER_USER_LIMIT" => ReserveOutcome::PerUserLimitExceeded {
                limit: r.per_user_limit.get(),
            },
            "NOT_SEEDED" => ReserveOutcome::NotSeeded,
            other => return Err(InfraError::msg(format!("unknown reserve reply {other}"))),
        };
        if outcome == (ReserveOutcome::SoldOut { remaining: 0 }) {
            self.raise_sold_out_flag(r.drop_id, r.sku.as_ref());
        }
        Ok(outcome)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(drop.id = %r.drop_id, order.id = %order))]
    async fn confirm(&self, r: &Reservation, order: OrderId) -> Result<(), InfraError> {
        self.confirm_in(r.drop_id, &[(r, order)]).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(orders = confirmed.len()))]
    async fn confirm_all(&self, confirmed: &[(Reservation, OrderId)]) -> Result<(), InfraError> {
        // One script per drop (its keys share a slot); a committer's batch is of one drop.
        let mut drops: Vec<DropId> = confirmed.iter().map(|(r, _)| r.drop_id).collect();
        drops.sort_unstable();
        drops.dedup();
        for drop in drops {
            let of_drop: Vec<(&Reservation, OrderId)> = confirmed
                .iter()
                .filter(|(r, _)| r.drop_id == drop)
                .map(|(r, order)| (r, *order))
                .collect();
            self.confirm_in(drop, &of_drop).await?;
        }
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(drop.id = %r.drop_id, user.id = %r.user_id))]
    async fn cancel(&self, r: &Reservation) -> Result<(), InfraError> {
        let keys = self.keys(r.drop_id);
        let args: Vec<Value> = vec![
            r.user_id.get().into(),
            marker_field(r.user_id, &r.key).into(),
            restock_channel(&self.conn.prefix).into(),
            r.drop_id.get().into(),
            Marker::InProgress {
                quantity: r.quantity.get(),
                deadline_ms: r.deadline_ms(),
                sku: r.sku.clone(),
            }
            .stored()
            .into(),
        ];
        let _: i64 = scripts::run(
            &self.conn,
            &CANCEL,
            vec![keys.remaining, keys.held, keys.idem, keys.sizes],
            args,
        )
        .await
        .map_err(infra("redis cancel"))?;
        self.restocked_here(r.drop_id);
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(drop.id = %drop_id, user.id = %user_id))]
    async fn release(
        &self,
        drop_id: DropId,
        user_id: UserId,
        sku: Option<Sku>,
        quantity: Quantity,
    ) -> Result<(), InfraError> {
        let keys = self.keys(drop_id);
        let args: Vec<Value> = vec![
            user_id.get().into(),
            i64::from(quantity.get()).into(),
            restock_channel(&self.conn.prefix).into(),
            drop_id.get().into(),
            sku_arg(sku.as_ref()),
        ];
        let _: i64 = scripts::run(
            &self.conn,
            &RELEASE,
            vec![keys.remaining, keys.held, keys.sizes],
            args,
        )
        .await
        .map_err(infra("redis release"))?;
        self.restocked_here(drop_id);
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(drop.id = %drop_id))]
    async fn closed(&self, drop_id: DropId, at: OffsetDateTime) -> Result<(), InfraError> {
        let keys = self.keys(drop_id);
        let release = at.saturating_add(GRACE).unix_timestamp();
        let pipeline = self.conn.pool.next().pipeline();
        for key in [keys.remaining, keys.held, keys.idem, keys.sizes] {
            // LT: a sooner expiry (the drop's own closeAt + grace) is kept.
            let _: () = pipeline
                .expire_at(key, release, Some(fred::types::ExpireOptions::LT))
                .await
                .map_err(infra("redis close"))?;
        }
        let _: Vec<Value> = pipeline.all().await.map_err(infra("redis close"))?;
        Ok(())
    }

    async fn remaining(&self, drop_id: DropId) -> Result<Option<FreeUnits>, InfraError> {
        let keys = self.keys(drop_id);
        let reply: Vec<Value> = scripts::run(
            &self.conn,
            &REMAINING,
            vec![keys.remaining, keys.sizes],
            Vec::<Value>::new(),
        )
        .await
        .map_err(infra("redis remaining"))?;
        let corrupt = || InfraError::msg(format!("unexpected remaining reply {reply:?}"));
        let in_all = reply.first().and_then(Value::as_i64).ok_or_else(corrupt)?;
        if in_all < 0 {
            return Ok(None);
        }
        if reply.len() == 1 {
            return Ok(Some(whole_units(units(in_all))));
        }
        let mut sizes = FreeUnits::new();
        for pair in reply[1..].chunks(2) {
            let [sku, left] = pair else {
                return Err(corrupt());
            };
            let sku = sku
                .as_string()
                .and_then(|s| Sku::parse("sku", &s).ok())
                .ok_or_else(corrupt)?;
            sizes.insert(Some(sku), units(left.as_i64().ok_or_else(corrupt)?));
        }
        Ok(Some(sizes))
    }
}
