//! Delivering sellers' webhooks: each round fans new events out to the endpoints that take them
//! and attempts the deliveries that are due, each endpoint's one after another and endpoints
//! side by side (at most `WEBHOOK_CONCURRENCY` requests at once). Before each request the
//! endpoint's host is resolved and every address checked again (a name that now points into the
//! private network is refused), and the request is made to the checked address. One instance of
//! the fleet runs rounds at a time (the `webhooks` lease, the binary's loop).

use crate::telemetry;
use goods_domain::EndpointId;
use goods_domain::InfraError;
use goods_domain::ports::{
    AddressResolver, Attempt, Clock, DueDelivery, FanOut, SecretVault, WebhookRequest,
    WebhookSender, WebhookStore,
};
use goods_domain::webhook::{
    AttemptOutcome, EndpointUrl, Reach, check_address, retry_after, signature_header,
};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;
use tokio_util::task::TaskTracker;

/// Events fanned out per round.
pub const FAN_OUT_BATCH: u32 = 500;
/// Deliveries attempted per round.
pub const DUE_BATCH: u32 = 256;
/// The `webhook_pending` gauge counts up to this many (its upkeep reads no more of the
/// backlog every few seconds).
pub const PENDING_COUNTED_UP_TO: u64 = 100_000;

/// What one round set off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoundReport {
    pub fanned_out: FanOut,
    /// Endpoints whose due deliveries started being made (each in a task of its own).
    pub endpoints: usize,
    /// The deliveries they were given.
    pub deliveries: usize,
}

/// The ports and settings of the delivery rounds, and the endpoints being delivered to now.
#[derive(Clone)]
pub struct Deliverer {
    store: Arc<dyn WebhookStore>,
    vault: Arc<dyn SecretVault>,
    resolver: Arc<dyn AddressResolver>,
    sender: Arc<dyn WebhookSender>,
    clock: Arc<dyn Clock>,
    reach: Reach,
    /// Requests in flight at most (`WEBHOOK_CONCURRENCY`).
    slots: Arc<Semaphore>,
    /// A number in `[0, 1)` for each retry's jitter.
    jitter: Arc<dyn Fn() -> f64 + Send + Sync>,
    /// Endpoints with a task delivering to them: a round leaves them out, so an endpoint gets
    /// one request at a time and one that hangs holds up no other.
    busy: Arc<Mutex<HashSet<EndpointId>>>,
    tasks: TaskTracker,
}

/// How an attempt ended, for the metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Delivered,
    Retried,
    Failed,
    /// Recorded by another instance already: the lease passed on while this one was paused
    /// (or the endpoint was deleted). The rest of its queue is left to the lease holder.
    Superseded,
}

impl Deliverer {
    #[allow(clippy::too_many_arguments)] // the feature's ports, each its own
    pub fn new(
        store: Arc<dyn WebhookStore>,
        vault: Arc<dyn SecretVault>,
        resolver: Arc<dyn AddressResolver>,
        sender: Arc<dyn WebhookSender>,
        clock: Arc<dyn Clock>,
        reach: Reach,
        concurrency: usize,
        jitter: Arc<dyn Fn() -> f64 + Send + Sync>,
    ) -> Self {
        Self {
            store,
            vault,
            resolver,
            sender,
            clock,
            reach,
            slots: Arc::new(Semaphore::new(concurrency.max(1))),
            jitter,
            busy: Arc::default(),
            tasks: TaskTracker::new(),
        }
    }

    /// One round: fan new events out, then start delivering what is due to each endpoint not
    /// busy already, in a task of its own (the round does not wait for them).
    pub async fn round(&self) -> Result<RoundReport, InfraError> {
        let now = self.clock.now();
        let fanned_out = self.store.fan_out(FAN_OUT_BATCH, now).await?;
        let busy: Vec<EndpointId> = self.busy_now().into_iter().collect();
        let due = self.store.due_deliveries(now, DUE_BATCH, &busy).await?;
        let mut report = RoundReport {
            fanned_out,
            ..RoundReport::default()
        };
        // Each endpoint's deliveries in the order they came due, one at a time.
        let mut queues: Vec<Vec<DueDelivery>> = Vec::new();
        for delivery in due {
            match queues
                .iter_mut()
                .find(|q| q[0].endpoint.id == delivery.endpoint.id)
            {
                Some(queue) => queue.push(delivery),
                None => queues.push(vec![delivery]),
            }
        }
        for queue in queues {
            let endpoint = queue[0].endpoint.id;
            if !self.lock_busy().insert(endpoint) {
                continue;
            }
            report.endpoints += 1;
            report.deliveries += queue.len();
            let this = self.clone();
            self.tasks.spawn(async move {
                for delivery in queue {
                    let Ok(_slot) = this.slots.acquire().await else {
                        break;
                    };
                    match this.deliver(&delivery).await {
                        Ok(Some(Ended::Superseded)) => {
                            tracing::info!(endpoint.id = %endpoint, event.id = %delivery.event_id, "a webhook delivery was recorded elsewhere: this endpoint's deliveries are left to the webhooks lease's holder");
                            break;
                        }
                        Ok(_) => {}
                        Err(error) => {
                            tracing::warn!(endpoint.id = %endpoint, error = %error, "a webhook attempt was not recorded; it stays due");
                            break;
                        }
                    }
                }
                this.lock_busy().remove(&endpoint);
            });
        }
        Ok(report)
    }

    /// The fleet's bookkeeping, every few seconds by the lease holder: endpoints whose
    /// deliveries have all failed for `disable_after` are disabled (logged, counted), and the
    /// backlog's gauges set.
    pub async fn upkeep(&self, disable_after: time::Duration) -> Result<(), InfraError> {
        let now = self.clock.now();
        for endpoint in self.store.disable_failing(now, disable_after).await? {
            tracing::warn!(endpoint.id = %endpoint, "webhook endpoint disabled: every delivery failed for WEBHOOK_DISABLE_AFTER_S");
            metrics::counter!(telemetry::WEBHOOK_ENDPOINTS_DISABLED).increment(1);
        }
        let backlog = self
            .store
            .delivery_backlog(now, PENDING_COUNTED_UP_TO)
            .await?;
        #[allow(clippy::cast_precision_loss)] // a count far below 2^52
        metrics::gauge!(telemetry::WEBHOOK_PENDING).set(backlog.pending as f64);
        let age = backlog
            .oldest_due
            .map_or(0.0, |due| (now - due).as_seconds_f64().max(0.0));
        metrics::gauge!(telemetry::WEBHOOK_OLDEST_PENDING_AGE).set(age);
        Ok(())
    }

    /// Waits until every delivery started has ended (tests; a shutdown).
    pub async fn idle(&self) {
        self.tasks.close();
        self.tasks.wait().await;
        self.tasks.reopen();
    }

    fn lock_busy(&self) -> std::sync::MutexGuard<'_, HashSet<EndpointId>> {
        self.busy
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn busy_now(&self) -> HashSet<EndpointId> {
        self.lock_busy().clone()
    }

    /// Attempts `delivery` and records what came of it; `None` when it could not be signed
    /// (the seal key: the operator's problem, not the endpoint's), left due for a later round.
    async fn deliver(&self, delivery: &DueDelivery) -> Result<Option<Ended>, InfraError> {
        let now = self.clock.now();
        let Some(outcome) = self.attempt(delivery, now).await else {
            return Ok(None);
        };
        let next_attempt_at = if outcome.delivered() {
            None
        } else {
            retry_after(delivery.attempts + 1, (self.jitter)()).map(|wait| now + wait)
        };
        let ended = match (outcome.delivered(), next_attempt_at) {
            (true, _) => Ended::Delivered,
            (false, Some(_)) => Ended::Retried,
            (false, None) => Ended::Failed,
        };
        if !outcome.delivered() {
            tracing::info!(
                endpoint.id = %delivery.endpoint.id,
                event.id = %delivery.event_id,
                attempt = delivery.attempts + 1,
                outcome = ?outcome,
                "webhook delivery failed"
            );
        }
        let recorded = self
            .store
            .record_attempt(
                delivery.id,
                &Attempt {
                    outcome,
                    next_attempt_at,
                },
                now,
            )
            .await?;
        if !recorded {
            return Ok(Some(Ended::Superseded));
        }
        let label = match ended {
            Ended::Delivered => "delivered",
            Ended::Retried => "retried",
            Ended::Failed => "failed",
            Ended::Superseded => return Ok(Some(ended)),
        };
        metrics::counter!(telemetry::WEBHOOK_DELIVERIES, "outcome" => label).increment(1);
        Ok(Some(ended))
    }

    /// The request, made to an address of the endpoint's host checked now; `None` when the
    /// secret does not open.
    async fn attempt(
        &self,
        delivery: &DueDelivery,
        now: time::OffsetDateTime,
    ) -> Option<AttemptOutcome> {
        let endpoint = &delivery.endpoint;
        let refused = |why: String| Some(AttemptOutcome::NoAnswer(why));
        let url = match EndpointUrl::parse(&endpoint.url, self.reach) {
            Ok(url) => url,
            Err(e) => return refused(format!("url {}", e.message)),
        };
        let addresses = match self.resolver.resolve(url.host(), url.port()).await {
            Ok(addresses) => addresses,
            Err(e) => return refused(e.to_string()),
        };
        for address in &addresses {
            if let Err(e) = check_address(*address, self.reach) {
                return refused(format!("url {}", e.message));
            }
        }
        let address = *addresses.first()?;
        let secret = match self.vault.open_secret(endpoint.id, &endpoint.secret) {
            Ok(secret) => secret,
            Err(error) => {
                tracing::error!(endpoint.id = %endpoint.id, error = %error, "a webhook secret does not open");
                return None;
            }
        };
        // The rotated-out secret signs beside the new one for its overlap; if its seal does
        // not open, the request is signed by the current secret alone (the one the seller was
        // last shown), and the failure is logged.
        let previous = match endpoint
            .previous_secret
            .as_ref()
            .filter(|(_, until)| *until > now)
        {
            None => None,
            Some((sealed, _)) => match self.vault.open_secret(endpoint.id, sealed) {
                Ok(previous) => Some(previous),
                Err(error) => {
                    tracing::error!(endpoint.id = %endpoint.id, error = %error, "an endpoint's previous webhook secret does not open: signing with the current one alone");
                    None
                }
            },
        };
        let timestamp = now.unix_timestamp();
        let signature = signature_header(
            &secret,
            previous.as_ref(),
            &delivery.event_id,
            timestamp,
            delivery.body.as_bytes(),
        )?;
        let request = WebhookRequest {
            url: endpoint.url.clone(),
            address: std::net::SocketAddr::new(address, url.port()),
            id: delivery.event_id.clone(),
            timestamp,
            signature,
            body: delivery.body.clone(),
        };
        Some(self.sender.send(&request).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use goods_domain::ports::{
        Endpoint, MockAddressResolver, MockClock, MockSecretVault, MockWebhookSender,
        MockWebhookStore, SealedSecret,
    };
    use goods_domain::webhook::{EventTypes, WebhookSecret};
    use goods_domain::{EndpointId, UserId};
    use std::net::IpAddr;
    use std::sync::Mutex;
    use time::macros::datetime;

    const NOW: time::OffsetDateTime = datetime!(2026-12-06 12:00 UTC);

    fn sealed(n: u8) -> SealedSecret {
        SealedSecret {
            key_id: "k".into(),
            sealed: vec![n],
        }
    }

    fn due(attempts: u32, previous: Option<time::OffsetDateTime>) -> DueDelivery {
        DueDelivery {
            id: 40,
            endpoint: Endpoint {
                id: EndpointId::parse(3).unwrap(),
                seller: UserId::parse(7).unwrap(),
                url: "https://hooks.shop.example/in".into(),
                types: EventTypes::all(),
                description: None,
                enabled: true,
                created_at: NOW,
                secret: sealed(1),
                previous_secret: previous.map(|until| (sealed(2), until)),
                failing_since: None,
            },
            event_id: "drop-1-1".into(),
            body: r#"{"id":"drop-1-1"}"#.into(),
            attempts,
        }
    }

    /// A store with nothing to fan out that gives `dues` to the first round and nothing after.
    fn store_giving(dues: Vec<DueDelivery>) -> MockWebhookStore {
        let mut store = MockWebhookStore::new();
        store
            .expect_fan_out()
            .returning(|_, _| Ok(FanOut::default()));
        let mut given = Some(dues);
        store
            .expect_due_deliveries()
            .returning(move |_, _, _| Ok(given.take().unwrap_or_default()));
        store
    }

    fn store_with(delivery: DueDelivery, recorded: Arc<Mutex<Vec<Attempt>>>) -> MockWebhookStore {
        let mut store = store_giving(vec![delivery]);
        store
            .expect_record_attempt()
            .returning(move |id, attempt, at| {
                assert_eq!((id, at), (40, NOW));
                recorded.lock().unwrap().push(attempt.clone());
                Ok(true)
            });
        store
    }

    fn vault() -> MockSecretVault {
        let mut v = MockSecretVault::new();
        v.expect_open_secret()
            .returning(|_, sealed| Ok(WebhookSecret::from_bytes([sealed.sealed[0]; 32])));
        v
    }

    fn resolving(address: &'static str) -> MockAddressResolver {
        let mut r = MockAddressResolver::new();
        r.expect_resolve()
            .withf(|host, port| host == "hooks.shop.example" && *port == 443)
            .returning(move |_, _| Ok(vec![address.parse::<IpAddr>().unwrap()]));
        r
    }

    fn clock() -> MockClock {
        let mut c = MockClock::new();
        c.expect_now().return_const(NOW);
        c
    }

    fn deliverer(
        store: MockWebhookStore,
        resolver: MockAddressResolver,
        sender: MockWebhookSender,
    ) -> Deliverer {
        deliverer_with(store, vault(), resolver, Arc::new(sender), 4)
    }

    fn deliverer_with(
        store: MockWebhookStore,
        vault: MockSecretVault,
        resolver: MockAddressResolver,
        sender: Arc<dyn WebhookSender>,
        concurrency: usize,
    ) -> Deliverer {
        Deliverer::new(
            Arc::new(store),
            Arc::new(vault),
            Arc::new(resolver),
            sender,
            Arc::new(clock()),
            Reach::default(),
            concurrency,
            Arc::new(|| 0.0),
        )
    }

    /// A round, and every delivery it started brought to its end.
    async fn run(deliverer: Deliverer) -> RoundReport {
        let report = deliverer.round().await.unwrap();
        deliverer.idle().await;
        report
    }

    fn answering(status: u16, sent: Arc<Mutex<Vec<WebhookRequest>>>) -> MockWebhookSender {
        let mut s = MockWebhookSender::new();
        s.expect_send().returning(move |request| {
            sent.lock().unwrap().push(request.clone());
            AttemptOutcome::Answered(status)
        });
        s
    }

    #[tokio::test]
    async fn a_due_delivery_is_signed_sent_to_the_checked_address_and_recorded_delivered() {
        let (recorded, sent) = (Arc::default(), Arc::default());
        let report = run(deliverer(
            store_with(due(0, None), Arc::clone(&recorded)),
            resolving("93.184.215.14"),
            answering(204, Arc::clone(&sent)),
        ))
        .await;
        assert_eq!((report.endpoints, report.deliveries), (1, 1));
        let sent = sent.lock().unwrap();
        let secret = WebhookSecret::from_bytes([1; 32]);
        assert_eq!(
            sent[0],
            WebhookRequest {
                url: "https://hooks.shop.example/in".into(),
                address: "93.184.215.14:443".parse().unwrap(),
                id: "drop-1-1".into(),
                timestamp: NOW.unix_timestamp(),
                signature: secret
                    .sign("drop-1-1", NOW.unix_timestamp(), br#"{"id":"drop-1-1"}"#)
                    .unwrap(),
                body: r#"{"id":"drop-1-1"}"#.into(),
            }
        );
        assert_eq!(
            *recorded.lock().unwrap(),
            [Attempt {
                outcome: AttemptOutcome::Answered(204),
                next_attempt_at: None
            }]
        );
    }

    /// A name that resolved to a public address at creation and resolves into the private
    /// network now (DNS rebinding) is not sent to: a failed attempt, retried on the schedule.
    #[tokio::test]
    async fn a_host_now_resolving_to_a_private_address_gets_no_request() {
        let recorded = Arc::default();
        let mut sender = MockWebhookSender::new();
        sender.expect_send().never();
        run(deliverer(
            store_with(due(0, None), Arc::clone(&recorded)),
            resolving("10.0.0.5"),
            sender,
        ))
        .await;
        assert_eq!(
            *recorded.lock().unwrap(),
            [Attempt {
                outcome: AttemptOutcome::NoAnswer("url reaches a private address: 10.0.0.5".into()),
                next_attempt_at: Some(NOW + time::Duration::seconds(5)),
            }]
        );
    }

    /// The waits after failures follow the schedule; after the eighth attempt, FAILED.
    #[rstest::rstest]
    #[case(0, Some(time::Duration::seconds(5)))]
    #[case(1, Some(time::Duration::minutes(5)))]
    #[case(6, Some(time::Duration::hours(10)))]
    #[case(7, None)]
    #[tokio::test]
    async fn a_failed_attempt_is_tried_again_on_the_schedule_until_none_is_left(
        #[case] before: u32,
        #[case] wait: Option<time::Duration>,
    ) {
        let recorded = Arc::default();
        run(deliverer(
            store_with(due(before, None), Arc::clone(&recorded)),
            resolving("93.184.215.14"),
            answering(503, Arc::default()),
        ))
        .await;
        assert_eq!(
            recorded.lock().unwrap()[0].next_attempt_at,
            wait.map(|w| NOW + w)
        );
    }

    /// A sender whose requests to one endpoint never end.
    struct Hanging;

    #[async_trait::async_trait]
    impl WebhookSender for Hanging {
        async fn send(&self, request: &WebhookRequest) -> AttemptOutcome {
            if request.url.contains("hangs") {
                std::future::pending::<()>().await;
            }
            AttemptOutcome::Answered(204)
        }
    }

    /// An endpoint that hangs holds up no other: the round returns at once, the other
    /// endpoint's delivery is recorded, and the next round leaves the hanging one out (it gets
    /// one request at a time) while still asking for everything else that is due.
    #[tokio::test]
    async fn an_endpoint_that_hangs_holds_up_no_other() {
        let mut hanging = due(0, None);
        hanging.id = 41;
        hanging.endpoint.id = EndpointId::parse(4).unwrap();
        hanging.endpoint.url = "https://hangs.shop.example/in".into();
        let recorded: Arc<Mutex<Vec<i64>>> = Arc::default();
        let excluded: Arc<Mutex<Vec<Vec<EndpointId>>>> = Arc::default();
        let mut store = MockWebhookStore::new();
        store
            .expect_fan_out()
            .returning(|_, _| Ok(FanOut::default()));
        let mut given = Some(vec![hanging, due(0, None)]);
        let asked = Arc::clone(&excluded);
        store
            .expect_due_deliveries()
            .returning(move |_, _, except| {
                asked.lock().unwrap().push(except.to_vec());
                Ok(given.take().unwrap_or_default())
            });
        let record = Arc::clone(&recorded);
        store.expect_record_attempt().returning(move |id, _, _| {
            record.lock().unwrap().push(id);
            Ok(true)
        });
        let mut resolver = MockAddressResolver::new();
        resolver
            .expect_resolve()
            .returning(|_, _| Ok(vec!["93.184.215.14".parse::<IpAddr>().unwrap()]));
        let deliverer = Deliverer::new(
            Arc::new(store),
            Arc::new(vault()),
            Arc::new(resolver),
            Arc::new(Hanging),
            Arc::new(clock()),
            Reach::default(),
            4,
            Arc::new(|| 0.0),
        );
        let report = tokio::time::timeout(std::time::Duration::from_secs(5), deliverer.round())
            .await
            .expect("the round waits for no request")
            .unwrap();
        assert_eq!((report.endpoints, report.deliveries), (2, 2));
        tokio::time::timeout(std::time::Duration::from_secs(5), async {
            while recorded.lock().unwrap().is_empty() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the other endpoint's delivery was made");
        assert_eq!(*recorded.lock().unwrap(), [40]);
        deliverer.round().await.unwrap();
        assert_eq!(
            *excluded.lock().unwrap(),
            [vec![], vec![EndpointId::parse(4).unwrap()]]
        );
    }

    /// The upkeep disables what the store finds failing for the whole time, counted, and sets
    /// the backlog's gauges (the due age from the oldest due delivery).
    #[tokio::test]
    async fn the_upkeep_disables_failing_endpoints_and_sets_the_backlog_gauges() {
        use metrics_util::debugging::DebugValue;
        let (snapshotter, _guard) = crate::test_support::local_metrics();
        let mut store = MockWebhookStore::new();
        store
            .expect_disable_failing()
            .withf(|at, after| *at == NOW && *after == time::Duration::days(5))
            .returning(|_, _| Ok(vec![EndpointId::parse(3).unwrap()]));
        store
            .expect_delivery_backlog()
            .withf(|at, up_to| *at == NOW && *up_to == PENDING_COUNTED_UP_TO)
            .returning(|_, _| {
                Ok(goods_domain::ports::DeliveryBacklog {
                    pending: 12,
                    oldest_due: Some(NOW - time::Duration::seconds(90)),
                })
            });
        deliverer(store, MockAddressResolver::new(), MockWebhookSender::new())
            .upkeep(time::Duration::days(5))
            .await
            .unwrap();
        let mut seen: Vec<(String, String)> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .map(|(key, _, _, value)| {
                let value = match value {
                    DebugValue::Counter(n) => n.to_string(),
                    DebugValue::Gauge(g) => g.into_inner().to_string(),
                    DebugValue::Histogram(_) => "histogram".into(),
                };
                (key.key().name().to_owned(), value)
            })
            .collect();
        seen.sort();
        assert_eq!(
            seen,
            [
                (
                    "webhook_endpoints_disabled_total".to_owned(),
                    "1".to_owned()
                ),
                (
                    "webhook_oldest_pending_age_seconds".to_owned(),
                    "90".to_owned()
                ),
                ("webhook_pending".to_owned(), "12".to_owned()),
            ]
        );
    }

    #[rstest::rstest]
    #[case::within_the_overlap(NOW + time::Duration::hours(1), 2)]
    #[case::past_it(NOW - time::Duration::seconds(1), 1)]
    #[tokio::test]
    async fn a_rotated_secret_signs_beside_the_new_one_for_its_overlap(
        #[case] until: time::OffsetDateTime,
        #[case] signatures: usize,
    ) {
        let sent = Arc::default();
        run(deliverer(
            store_with(due(0, Some(until)), Arc::default()),
            resolving("93.184.215.14"),
            answering(200, Arc::clone(&sent)),
        ))
        .await;
        let sent = sent.lock().unwrap();
        let parts: Vec<&str> = sent[0].signature.split(' ').collect();
        assert_eq!(parts.len(), signatures);
        let old = WebhookSecret::from_bytes([2; 32])
            .sign("drop-1-1", NOW.unix_timestamp(), br#"{"id":"drop-1-1"}"#)
            .unwrap();
        assert_eq!(parts.contains(&old.as_str()), signatures == 2);
    }

    /// A previous secret whose seal does not open (a retired key no longer held): the request
    /// is still made, signed by the current secret alone.
    #[tokio::test]
    async fn a_previous_secret_that_does_not_open_leaves_the_current_signature_alone() {
        let mut vault = MockSecretVault::new();
        vault
            .expect_open_secret()
            .returning(|_, sealed| match sealed.sealed[0] {
                1 => Ok(WebhookSecret::from_bytes([1; 32])),
                _ => Err(InfraError::msg("the key that sealed it is not configured")),
            });
        let (recorded, sent) = (Arc::default(), Arc::default());
        run(deliverer_with(
            store_with(
                due(0, Some(NOW + time::Duration::hours(1))),
                Arc::clone(&recorded),
            ),
            vault,
            resolving("93.184.215.14"),
            Arc::new(answering(204, Arc::clone(&sent))),
            4,
        ))
        .await;
        let current = WebhookSecret::from_bytes([1; 32])
            .sign("drop-1-1", NOW.unix_timestamp(), br#"{"id":"drop-1-1"}"#)
            .unwrap();
        assert_eq!(sent.lock().unwrap()[0].signature, current);
        assert_eq!(
            recorded.lock().unwrap()[0].outcome,
            AttemptOutcome::Answered(204)
        );
    }

    /// A sender that counts its requests in flight, each held for 50 ms.
    #[derive(Default)]
    struct Counting {
        now: std::sync::atomic::AtomicUsize,
        most: std::sync::atomic::AtomicUsize,
        done: std::sync::atomic::AtomicUsize,
    }

    #[async_trait::async_trait]
    impl WebhookSender for Counting {
        async fn send(&self, _: &WebhookRequest) -> AttemptOutcome {
            use std::sync::atomic::Ordering::SeqCst;
            let now = self.now.fetch_add(1, SeqCst) + 1;
            self.most.fetch_max(now, SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            self.now.fetch_sub(1, SeqCst);
            self.done.fetch_add(1, SeqCst);
            AttemptOutcome::Answered(204)
        }
    }

    /// Six endpoints with a delivery due each, `WEBHOOK_CONCURRENCY` 2: every one is made, and
    /// never more than 2 requests are in flight at once (exactly 2 at the busiest).
    #[tokio::test(start_paused = true)]
    async fn no_more_requests_are_in_flight_than_the_concurrency_allows() {
        use std::sync::atomic::Ordering::SeqCst;
        let dues: Vec<DueDelivery> = (0..6)
            .map(|n| {
                let mut d = due(0, None);
                d.id = 40 + n;
                d.endpoint.id = EndpointId::parse(10 + n).unwrap();
                d
            })
            .collect();
        let mut store = store_giving(dues);
        store.expect_record_attempt().returning(|_, _, _| Ok(true));
        let mut resolver = MockAddressResolver::new();
        resolver
            .expect_resolve()
            .returning(|_, _| Ok(vec!["93.184.215.14".parse::<IpAddr>().unwrap()]));
        let sender = Arc::new(Counting::default());
        let report = run(deliverer_with(store, vault(), resolver, sender.clone(), 2)).await;
        assert_eq!((report.endpoints, report.deliveries), (6, 6));
        assert_eq!(sender.done.load(SeqCst), 6);
        assert_eq!(sender.most.load(SeqCst), 2);
    }

    /// An attempt recorded by another instance already (this one was paused while the lease
    /// passed on): the endpoint's other deliveries of the round are not sent, left to the
    /// lease's holder.
    #[tokio::test]
    async fn an_attempt_recorded_elsewhere_stops_the_endpoints_queue() {
        let mut second = due(0, None);
        second.id = 41;
        second.event_id = "drop-1-2".into();
        let mut store = store_giving(vec![due(0, None), second]);
        store
            .expect_record_attempt()
            .times(1)
            .returning(|_, _, _| Ok(false));
        let sent = Arc::default();
        let report = run(deliverer(
            store,
            resolving("93.184.215.14"),
            answering(204, Arc::clone(&sent)),
        ))
        .await;
        assert_eq!((report.endpoints, report.deliveries), (1, 2));
        let ids: Vec<String> = sent.lock().unwrap().iter().map(|r| r.id.clone()).collect();
        assert_eq!(ids, ["drop-1-1"]);
    }
}
