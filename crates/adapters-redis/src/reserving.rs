//! The reservations of one drop, sent to Redis together.
//!
//! Every reserve that reaches Redis joins its drop's queue on its runtime, and the first to
//! join spawns the task that sends the queue. That task runs once the runtime has polled the
//! tasks that were ready before it, so the reserves an HTTP worker's runtime makes in one turn
//! of its loop (buyers whose requests arrived together, as they do when a group commit answers
//! a batch and its clients send again) go in one call of `reserve.lua`, each answered by its
//! own reply, and a reserve made alone goes alone, a turn later. The script takes them in order,
//! each as if it ran alone, so a batch answers what the same reserves one after another would.
//!
//! No batch waits for another's reply: each call is one command, with the command timeout of
//! one, and a failed call fails each of its reserves as the single call failed its one (an
//! unknown outcome the caller settles).

use crate::connection::RedisConnection;
use crate::keys::DropKeys;
use crate::scripts::{self, RESERVE};
use fred::prelude::*;
use goods_domain::DropId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::oneshot;

/// The most reservations one call carries (the group commit's default batch): the script holds
/// Redis for the time of all of them.
pub(crate) const MOST: usize = 64;

/// The arguments of one reservation, in `reserve.lua`'s order, and its bucket's key.
pub(crate) struct Entry {
    /// Nine values; the seventh, the bucket's index in the keys, is set when the batch is sent.
    pub(crate) args: [Value; 9],
    pub(crate) bucket: Option<String>,
}

struct Waiting {
    entry: Entry,
    answer: oneshot::Sender<Result<Vec<Value>, Error>>,
}

type Slot = (tokio::runtime::Id, DropId);

/// The queues of reservations not sent yet, one per runtime and drop.
#[derive(Clone, Default)]
pub(crate) struct Queues(Arc<Mutex<HashMap<Slot, Vec<Waiting>>>>);

impl Queues {
    /// Sends `entry` in the next call for `drop` on this runtime, and answers its reply: the
    /// script's reply to it alone.
    pub(crate) async fn reserve(
        &self,
        conn: &RedisConnection,
        drop_id: DropId,
        entry: Entry,
    ) -> Result<Vec<Value>, Error> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::new(ErrorKind::Unknown, "a reservation outside a Tokio runtime"))?;
        let slot = (runtime.id(), drop_id);
        let (answer, reply) = oneshot::channel();
        let first = {
            let mut queues = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            let queue = queues.entry(slot).or_default();
            queue.push(Waiting { entry, answer });
            queue.len() == 1
        };
        if first {
            self.spawn_sender(conn, slot);
        }
        reply.await.unwrap_or_else(|_| {
            Err(Error::new(
                ErrorKind::Canceled,
                "the reservation's batch ended without a reply",
            ))
        })
    }

    /// Spawns the task that sends the slot's queue, on the runtime of the caller.
    fn spawn_sender(&self, conn: &RedisConnection, slot: Slot) {
        let (queues, conn) = (self.clone(), conn.clone());
        drop(tokio::spawn(async move {
            let batch = queues.take(&conn, slot);
            call(&conn, slot.1, batch).await;
        }));
    }

    /// Takes up to [`MOST`] of the slot's queue; a task of its own sends the rest.
    fn take(&self, conn: &RedisConnection, slot: Slot) -> Vec<Waiting> {
        let mut queues = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(queue) = queues.get_mut(&slot) else {
            return Vec::new();
        };
        if queue.len() > MOST {
            let rest = queue.split_off(MOST);
            let batch = std::mem::replace(queue, rest);
            self.spawn_sender(conn, slot);
            batch
        } else {
            queues.remove(&slot).unwrap_or_default()
        }
    }
}

/// Sends `batch` in one call of `reserve.lua` and answers each reservation with its reply.
async fn call(conn: &RedisConnection, drop_id: DropId, batch: Vec<Waiting>) {
    if batch.is_empty() {
        return;
    }
    let keys = DropKeys::new(&conn.drops, drop_id);
    let mut script_keys = vec![keys.remaining, keys.held, keys.idem, keys.sizes];
    let mut args: Vec<Value> = Vec::with_capacity(batch.len() * 9);
    let mut answers = Vec::with_capacity(batch.len());
    for Waiting { entry, answer } in batch {
        let [user, field, qty, limit, lease, sku, _, interval, burst] = entry.args;
        let bucket = match entry.bucket {
            Some(key) => {
                script_keys.push(key);
                i64::try_from(script_keys.len()).unwrap_or(i64::MAX)
            }
            None => 0,
        };
        args.extend([
            user,
            field,
            qty,
            limit,
            lease,
            sku,
            bucket.into(),
            interval,
            burst,
        ]);
        answers.push(answer);
    }
    let replies: Result<Vec<Value>, Error> = scripts::run(conn, &RESERVE, script_keys, args).await;
    match replies {
        Ok(replies) if replies.len() == answers.len() => {
            for (answer, reply) in answers.into_iter().zip(replies) {
                // A reserve whose caller went away has no one to answer.
                let _ = answer.send(Ok(reply.into_array()));
            }
        }
        Ok(replies) => {
            let error = Error::new(
                ErrorKind::Protocol,
                format!(
                    "{} replies to {} reservations",
                    replies.len(),
                    answers.len()
                ),
            );
            for answer in answers {
                let _ = answer.send(Err(error.clone()));
            }
        }
        Err(error) => {
            for answer in answers {
                let _ = answer.send(Err(error.clone()));
            }
        }
    }
}
