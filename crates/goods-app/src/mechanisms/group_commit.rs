//! Group commit: the admitted purchases of one drop are committed together.
//!
//! Every buyer of a hot drop updates the same two rows, so one order a transaction queues them on
//! those locks. Each drop's committer commits what is waiting (up to [`GroupCommit::max_batch`])
//! in one [`PurchaseLedger::place_orders`] and answers each waiter; while up to
//! [`GroupCommit::in_flight`] batches are in the database the next gathers, so a lone buyer
//! commits at once and a thousand share a few dozen transactions.

use async_trait::async_trait;
use goods_domain::ports::{
    AdmissionGate, PlaceOrder, Placed, Placement, PurchaseLedger, Reservation,
};
use goods_domain::{DropId, InfraError, OrderId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument as _;

use super::tasks::Tasks;

/// How a drop's committer batches purchases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupCommit {
    /// The most orders one transaction commits (`GROUP_COMMIT_MAX_BATCH`); 1 commits every
    /// order alone.
    pub max_batch: usize,
    /// How long the committer of a busy drop waits for a batch to fill once it has taken what
    /// was waiting (`GROUP_COMMIT_LINGER_MS`). It never applies to a lone buyer: a drop whose
    /// previous batch held one order is committed at once.
    pub linger: Duration,
    /// How many of a drop's batches may be in the database at once (`GROUP_COMMIT_IN_FLIGHT`);
    /// one by default, since with the database on the same cores the overlap costs more than it
    /// gains (docs/benchmarks.md).
    pub in_flight: usize,
}

impl Default for GroupCommit {
    fn default() -> Self {
        Self {
            max_batch: 64,
            linger: Duration::ZERO,
            in_flight: 1,
        }
    }
}

/// A drop's committer stops after this long without a purchase (it restarts on the next one).
const IDLE: Duration = Duration::from_secs(60);

/// Where a drop's batches go: one call commits a batch and answers each item, in order. The
/// purchases' ledger is one; a draw's entries are another.
#[async_trait]
pub(crate) trait Sink: Send + Sync + 'static {
    /// What one request hands in.
    type Item: Send + 'static;
    /// What it is answered.
    type Answer: Send + 'static;
    /// The drop an item belongs to: one committer per drop.
    fn drop_of(item: &Self::Item) -> DropId;
    /// Commits `batch` in one transaction.
    async fn commit(&self, batch: Vec<Self::Item>) -> Result<Vec<Self::Answer>, InfraError>;
    /// Every item's answer when the batch failed.
    fn failed(error: InfraError) -> Self::Answer;
}

/// The purchases' sink: the ledger's `place_orders`, then one confirm at the gate for every
/// order of the batch that the gate admitted.
pub(crate) struct Orders(pub(crate) Arc<dyn PurchaseLedger>);

/// A purchase handed to its drop's committer.
pub(crate) struct Commit {
    pub(crate) order: PlaceOrder,
    /// The gate that admitted it, and its reservation there: confirmed with the batch once the
    /// order is created, so that a retry of the key replays it. `None` when no gate admitted
    /// it (the database alone decided), or when the gate failed and is settled apart.
    pub(crate) confirm_at: Option<(Arc<dyn AdmissionGate>, Reservation)>,
}

#[async_trait]
impl Sink for Orders {
    type Item = Commit;
    type Answer = Placement;

    fn drop_of(item: &Commit) -> DropId {
        item.order.drop_id
    }

    async fn commit(&self, batch: Vec<Commit>) -> Result<Vec<Placement>, InfraError> {
        let (orders, confirm_at): (Vec<PlaceOrder>, Vec<_>) =
            batch.into_iter().map(|c| (c.order, c.confirm_at)).unzip();
        let placements = self.0.place_orders(&orders).await?;
        confirm_created(confirm_at, &placements).await;
        Ok(placements)
    }

    fn failed(error: InfraError) -> Placement {
        Err(error.into())
    }
}

/// Tells each gate the orders it admitted that the batch created, in one call per gate (one
/// in practice): the waiters are answered after it, as each was after its own confirm. A
/// confirm that fails leaves the markers to their lease (a retry or the healer resolves them).
async fn confirm_created(
    confirm_at: Vec<Option<(Arc<dyn AdmissionGate>, Reservation)>>,
    placements: &[Placement],
) {
    type Confirms = Vec<(Reservation, OrderId)>;
    let mut per_gate: Vec<(Arc<dyn AdmissionGate>, Confirms)> = Vec::new();
    for (at, placement) in confirm_at.into_iter().zip(placements) {
        let (Some((gate, reservation)), Ok(Placed::Created(order))) = (at, placement) else {
            continue;
        };
        match per_gate.iter_mut().find(|(g, _)| Arc::ptr_eq(g, &gate)) {
            Some((_, confirms)) => confirms.push((reservation, order.id)),
            None => per_gate.push((gate, vec![(reservation, order.id)])),
        }
    }
    for (gate, confirms) in per_gate {
        if let Err(error) = gate.confirm_all(&confirms).await {
            tracing::warn!(error = %error, orders = confirms.len(), "gate not settled after the database decided");
        }
    }
}

struct Waiter<S: Sink> {
    item: S::Item,
    answer: oneshot::Sender<S::Answer>,
    /// The request's span: the batch's span follows from every one of them, so a trace of a
    /// purchase leads to the transaction that committed it.
    span: tracing::Span,
    /// The current-thread runtime (an HTTP worker's) the buyer waits on, if it waits on one:
    /// its answer is handed over there, with the batch's others of that runtime (see
    /// [`answer`]).
    home: Option<Handle>,
}

type Queues<S> = HashMap<DropId, mpsc::UnboundedSender<Waiter<S>>>;

/// The committers of all drops, started on a drop's first request.
pub(crate) struct Committers<S: Sink = Orders> {
    sink: Arc<S>,
    config: GroupCommit,
    /// `None` once closed: no committer starts any more.
    queues: Mutex<Option<Queues<S>>>,
    /// Committers run on the application's tracker and runtime, not on the request's: an HTTP
    /// worker's runtime stops with it while other workers' buyers still wait on the committer.
    tasks: Tasks,
}

impl<S: Sink> Committers<S> {
    pub(crate) fn new(sink: S, config: GroupCommit, tasks: Tasks) -> Self {
        Self {
            sink: Arc::new(sink),
            config: GroupCommit {
                max_batch: config.max_batch.max(1),
                in_flight: config.in_flight.max(1),
                ..config
            },
            queues: Mutex::new(Some(HashMap::new())),
            tasks,
        }
    }

    /// Closes every drop's queue: each committer commits what it holds, answers its buyers
    /// and ends. A purchase placed afterwards is refused as unavailable.
    pub(crate) fn close(&self) {
        self.lock().take();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Queues<S>>> {
        match self.queues.lock() {
            Ok(queues) => queues,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Commits `item` with whatever else of its drop is waiting, and answers it alone.
    pub(crate) async fn place(&self, item: S::Item) -> S::Answer {
        let (answer, answered) = oneshot::channel();
        let drop = S::drop_of(&item);
        let mut waiter = Waiter {
            item,
            answer,
            span: tracing::Span::current(),
            home: Handle::try_current()
                .ok()
                .filter(|h| h.runtime_flavor() == RuntimeFlavor::CurrentThread),
        };
        // A committer that stopped for idleness closes its queue first; the retry starts a
        // new one.
        loop {
            let Some(queue) = self.queue(drop) else {
                return S::failed(InfraError::unavailable(
                    "shutting down: nothing new is committed",
                ));
            };
            match queue.send(waiter) {
                Ok(()) => break,
                Err(mpsc::error::SendError(back)) => {
                    waiter = back;
                    if let Some(queues) = self.lock().as_mut()
                        && queues.get(&drop).is_some_and(|q| q.same_channel(&queue))
                    {
                        queues.remove(&drop);
                    }
                }
            }
        }
        answered.await.unwrap_or_else(|_| {
            S::failed(InfraError::msg(
                "the drop's committer stopped before answering",
            ))
        })
    }

    /// The drop's queue, its committer started if it has none; `None` once closed.
    fn queue(&self, drop: DropId) -> Option<mpsc::UnboundedSender<Waiter<S>>> {
        let mut queues = self.lock();
        let queue = queues.as_mut()?.entry(drop).or_insert_with(|| {
            let (queue, waiting) = mpsc::unbounded_channel();
            self.tasks
                .spawn(run(Arc::clone(&self.sink), self.config, waiting));
            queue
        });
        Some(queue.clone())
    }
}

/// A drop's committer: once fewer than `in_flight` of its batches are in the database, takes
/// what is waiting, starts committing it, and again. The queue needs no bound of its own: only
/// purchases holding a write slot (the buffer) reach it.
async fn run<S: Sink>(
    sink: Arc<S>,
    config: GroupCommit,
    mut waiting: mpsc::UnboundedReceiver<Waiter<S>>,
) {
    let mut committing = tokio::task::JoinSet::new();
    let mut busy = false;
    loop {
        while committing.len() >= config.in_flight {
            committing.join_next().await;
        }
        let first = match tokio::time::timeout(IDLE, waiting.recv()).await {
            Ok(Some(waiter)) => waiter,
            Ok(None) => break,
            Err(_) => {
                // Refuse new purchases, then commit the ones that arrived meanwhile.
                waiting.close();
                let mut rest = Vec::new();
                while let Ok(waiter) = waiting.try_recv() {
                    rest.push(waiter);
                }
                while !rest.is_empty() {
                    let later = rest.split_off(rest.len().min(config.max_batch));
                    commit(Arc::clone(&sink), rest).await;
                    rest = later;
                }
                break;
            }
        };
        let mut batch = vec![first];
        while batch.len() < config.max_batch {
            match waiting.try_recv() {
                Ok(waiter) => batch.push(waiter),
                Err(_) => break,
            }
        }
        if busy && batch.len() < config.max_batch && !config.linger.is_zero() {
            let until = tokio::time::Instant::now() + config.linger;
            while batch.len() < config.max_batch {
                match tokio::time::timeout_at(until, waiting.recv()).await {
                    Ok(Some(waiter)) => batch.push(waiter),
                    Ok(None) | Err(_) => break,
                }
            }
        }
        busy = batch.len() > 1;
        committing.spawn(commit(Arc::clone(&sink), batch));
    }
    // Batches still in the database finish and answer their buyers (dropping the set would
    // abort them).
    while committing.join_next().await.is_some() {}
}

/// Commits one batch and answers each waiter. A waiter that is gone (its request timed out or
/// was dropped) is left out: nobody would learn the outcome, and its reservation's lease
/// resolves it.
async fn commit<S: Sink>(sink: Arc<S>, batch: Vec<Waiter<S>>) {
    let span = tracing::info_span!("group_commit", orders = tracing::field::Empty);
    let (items, waiting): (Vec<S::Item>, Vec<Answer<S>>) = batch
        .into_iter()
        .filter(|w| !w.answer.is_closed())
        .map(|w| {
            span.follows_from(&w.span);
            (w.item, (w.answer, w.home))
        })
        .unzip();
    if items.is_empty() {
        return;
    }
    span.record("orders", items.len());
    let count = items.len();
    let answers: Vec<S::Answer> = match sink.commit(items).instrument(span).await {
        Ok(placements) if placements.len() == count => placements,
        Ok(placements) => {
            let error = format!(
                "the store answered {} items of a batch of {}",
                placements.len(),
                count
            );
            (0..count)
                .map(|_| S::failed(InfraError::msg(error.clone())))
                .collect()
        }
        Err(error) => {
            let unavailable = error.is_unavailable();
            let context = error.to_string();
            (0..count)
                .map(|_| {
                    S::failed(if unavailable {
                        InfraError::unavailable(context.clone())
                    } else {
                        InfraError::msg(context.clone())
                    })
                })
                .collect()
        }
    };
    answer::<S>(waiting.into_iter().zip(answers));
}

/// A waiter's channel and the runtime it waits on.
type Answer<S> = (oneshot::Sender<<S as Sink>::Answer>, Option<Handle>);
/// The answers to hand to the buyers of one runtime.
type Answers<S> = Vec<(oneshot::Sender<<S as Sink>::Answer>, <S as Sink>::Answer)>;

/// Sends each waiter its answer. Waking a task of a current-thread runtime from another thread
/// writes to that runtime's eventfd every time (tokio does not know whether it sleeps), so the
/// answers of the buyers waiting on one such runtime (an HTTP worker's) go there in one task,
/// which wakes each of them as a local task: one cross-thread wake-up per worker and batch, not
/// one per order. Buyers waiting on this thread's runtime, or on a multi-thread one, are sent
/// theirs at once. A worker's runtime that has stopped takes no task; its buyers are gone with
/// it.
fn answer<S: Sink>(answers: impl Iterator<Item = (Answer<S>, S::Answer)>) {
    let here = Handle::try_current().ok().map(|h| h.id());
    let mut by_home: Vec<(Handle, Answers<S>)> = Vec::new();
    for ((to, home), answer) in answers {
        let Some(home) = home.filter(|h| Some(h.id()) != here) else {
            let _ = to.send(answer);
            continue;
        };
        match by_home.iter_mut().find(|(h, _)| h.id() == home.id()) {
            Some((_, group)) => group.push((to, answer)),
            None => by_home.push((home, vec![(to, answer)])),
        }
    }
    for (home, group) in by_home {
        drop(home.spawn(async move {
            for (to, answer) in group {
                let _ = to.send(answer);
            }
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use async_trait::async_trait;
    use goods_domain::ports::{
        CancelOrderError, Cancelled, PlaceOrderError, Placed, StaleResolution,
    };
    use goods_domain::{IdempotencyKey, OrderId, OrderStatus, UserId};
    use time::OffsetDateTime;
    use tokio::sync::Semaphore;

    /// A ledger that records each batch (as buyer ids) and answers each order with an order
    /// whose id is the buyer's; a batch commits only when the test hands out a permit.
    struct Recording {
        batches: Mutex<Vec<Vec<i64>>>,
        commits: Semaphore,
        fail: Option<bool>,
    }

    impl Recording {
        fn new(open: bool, fail: Option<bool>) -> Arc<Self> {
            Arc::new(Self {
                batches: Mutex::default(),
                commits: Semaphore::new(if open { Semaphore::MAX_PERMITS } else { 0 }),
                fail,
            })
        }

        fn batches(&self) -> Vec<Vec<i64>> {
            self.batches.lock().unwrap().clone()
        }
    }

    #[async_trait]
    impl PurchaseLedger for Recording {
        async fn place_orders(&self, batch: &[PlaceOrder]) -> Result<Vec<Placement>, InfraError> {
            self.batches
                .lock()
                .unwrap()
                .push(batch.iter().map(|o| o.user_id.get()).collect());
            self.commits.acquire().await.unwrap().forget();
            match self.fail {
                Some(true) => return Err(InfraError::unavailable("no answer within 3000 ms")),
                Some(false) => return Err(InfraError::msg("disk full")),
                None => {}
            }
            Ok(batch
                .iter()
                .map(|o| {
                    let mut order = sample_order(OrderStatus::Pending);
                    order.id = OrderId::parse(o.user_id.get()).unwrap();
                    order.user_id = o.user_id;
                    Ok(Placed::Created(order))
                })
                .collect())
        }

        async fn cancel_order(
            &self,
            _: OrderId,
            _: UserId,
            _: goods_domain::Expiry,
        ) -> Result<Cancelled, CancelOrderError> {
            unreachable!("not part of group commit")
        }

        async fn apply_payment(
            &self,
            _: &goods_domain::PaymentEvent,
            _: OffsetDateTime,
            _: goods_domain::PaymentWindow,
        ) -> Result<goods_domain::ports::AppliedPayment, goods_domain::ports::PaymentEventError>
        {
            unreachable!("not part of group commit")
        }

        async fn expire_order(
            &self,
            _: OrderId,
            _: goods_domain::Expiry,
        ) -> Result<Option<goods_domain::GoodsOrder>, InfraError> {
            unreachable!("not part of group commit")
        }

        async fn resolve_stale(
            &self,
            _: UserId,
            _: &IdempotencyKey,
            _: OffsetDateTime,
        ) -> Result<StaleResolution, InfraError> {
            unreachable!("not part of group commit")
        }
    }

    /// Committers with one batch in flight per drop, unless a test says otherwise.
    fn committers(ledger: &Arc<Recording>, max_batch: usize, linger_ms: u64) -> Arc<Committers> {
        committers_in_flight(ledger, max_batch, linger_ms, 1)
    }

    fn committers_in_flight(
        ledger: &Arc<Recording>,
        max_batch: usize,
        linger_ms: u64,
        in_flight: usize,
    ) -> Arc<Committers> {
        Arc::new(Committers::new(
            Orders(Arc::clone(ledger) as Arc<dyn PurchaseLedger>),
            GroupCommit {
                max_batch,
                linger: Duration::from_millis(linger_ms),
                in_flight,
            },
            Tasks::default(),
        ))
    }

    /// Buyer `buyer`'s purchase, with no gate to confirm it at.
    fn unconfirmed(buyer: i64) -> Commit {
        Commit {
            order: place_order(buyer),
            confirm_at: None,
        }
    }

    fn placed_id(placement: Placement) -> i64 {
        match placement {
            Ok(Placed::Created(order)) => order.id.get(),
            other => panic!("not created: {other:?}"),
        }
    }

    /// Queues purchases of `buyers` one after the other, each in its own task.
    async fn queue(
        committers: &Arc<Committers>,
        buyers: impl IntoIterator<Item = i64>,
    ) -> Vec<tokio::task::JoinHandle<Placement>> {
        let mut tasks = Vec::new();
        for buyer in buyers {
            let committers = Arc::clone(committers);
            tasks.push(tokio::spawn(async move {
                committers.place(unconfirmed(buyer)).await
            }));
            // Lets the task reach the queue before the next one, so the queue keeps their order.
            tokio::task::yield_now().await;
        }
        tasks
    }

    /// Buyer 1's purchase, as a batch the ledger holds until the test hands out a permit.
    async fn first_in_flight(
        committers: &Arc<Committers>,
        ledger: &Recording,
    ) -> Vec<tokio::task::JoinHandle<Placement>> {
        let tasks = queue(committers, [1]).await;
        while ledger.batches().is_empty() {
            tokio::task::yield_now().await;
        }
        tasks
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_buyer_is_committed_at_once_even_with_a_linger() {
        let ledger = Recording::new(true, None);
        let committers = committers(&ledger, 64, 50);
        let start = tokio::time::Instant::now();
        assert_eq!(placed_id(committers.place(unconfirmed(7)).await), 7);
        assert_eq!(tokio::time::Instant::now(), start, "waited for a batch");
        assert_eq!(ledger.batches(), vec![vec![7]]);
    }

    #[tokio::test]
    async fn buyers_arriving_during_a_commit_share_the_next_and_each_gets_its_own_order() {
        let ledger = Recording::new(false, None);
        let committers = committers(&ledger, 64, 0);
        let first = first_in_flight(&committers, &ledger).await;
        let rest = queue(&committers, 2..=6).await;
        ledger.commits.add_permits(2);
        for (buyer, task) in (1..=6).zip(first.into_iter().chain(rest)) {
            assert_eq!(placed_id(task.await.unwrap()), buyer);
        }
        assert_eq!(ledger.batches(), vec![vec![1], vec![2, 3, 4, 5, 6]]);
    }

    #[tokio::test]
    async fn a_batch_holds_at_most_max_batch_orders() {
        let ledger = Recording::new(false, None);
        let committers = committers(&ledger, 4, 0);
        let mut tasks = first_in_flight(&committers, &ledger).await;
        tasks.extend(queue(&committers, 2..=11).await);
        ledger.commits.add_permits(4);
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        assert_eq!(
            ledger.batches(),
            vec![vec![1], vec![2, 3, 4, 5], vec![6, 7, 8, 9], vec![10, 11]]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_drop_lingers_for_the_batch_to_fill() {
        let ledger = Recording::new(false, None);
        let committers = committers(&ledger, 64, 20);
        let mut tasks = first_in_flight(&committers, &ledger).await;
        tasks.extend(queue(&committers, [2, 3]).await);
        ledger.commits.add_permits(1);
        while ledger.batches().len() < 2 {
            tokio::task::yield_now().await;
        }
        // The drop is busy now (its last batch held two): the batch after it waits for more.
        tasks.extend(queue(&committers, [4]).await);
        ledger.commits.add_permits(1);
        tokio::time::sleep(Duration::from_millis(5)).await;
        tasks.extend(queue(&committers, [5]).await);
        ledger.commits.add_permits(1);
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        assert_eq!(ledger.batches(), vec![vec![1], vec![2, 3], vec![4, 5]]);
    }

    #[tokio::test]
    async fn a_second_batch_starts_while_the_first_is_in_the_database_but_no_third() {
        let ledger = Recording::new(false, None);
        let committers = committers_in_flight(&ledger, 64, 0, 2);
        let mut tasks = first_in_flight(&committers, &ledger).await;
        tasks.extend(queue(&committers, [2]).await);
        while ledger.batches().len() < 2 {
            tokio::task::yield_now().await;
        }
        // Two batches in the database: buyers 3 and 4 wait for one of them to finish.
        tasks.extend(queue(&committers, [3, 4]).await);
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert_eq!(ledger.batches(), vec![vec![1], vec![2]]);
        ledger.commits.add_permits(3);
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        assert_eq!(ledger.batches(), vec![vec![1], vec![2], vec![3, 4]]);
    }

    #[tokio::test]
    async fn closing_commits_what_is_queued_refuses_what_comes_after_and_ends_the_committers() {
        let ledger = Recording::new(false, None);
        let tasks = Tasks::default();
        let committers = Arc::new(Committers::new(
            Orders(Arc::clone(&ledger) as Arc<dyn PurchaseLedger>),
            GroupCommit::default(),
            tasks.clone(),
        ));
        let mut queued = first_in_flight(&committers, &ledger).await;
        queued.extend(queue(&committers, [2, 3]).await);
        committers.close();
        let late = committers.place(unconfirmed(4)).await;
        assert!(
            matches!(&late, Err(PlaceOrderError::Infra(e)) if e.is_unavailable()),
            "{late:?}"
        );
        ledger.commits.add_permits(2);
        for (buyer, task) in (1..=3).zip(queued) {
            assert_eq!(placed_id(task.await.unwrap()), buyer);
        }
        assert!(
            tasks.shutdown(Duration::from_secs(5)).await,
            "a committer still runs"
        );
        assert_eq!(ledger.batches(), vec![vec![1], vec![2, 3]]);
    }

    #[tokio::test]
    async fn a_buyer_who_went_away_is_left_out_of_the_batch() {
        let ledger = Recording::new(false, None);
        let committers = committers(&ledger, 64, 0);
        let mut tasks = first_in_flight(&committers, &ledger).await;
        let gone = queue(&committers, [2]).await.remove(0);
        tasks.extend(queue(&committers, [3]).await);
        gone.abort();
        let _ = gone.await;
        ledger.commits.add_permits(2);
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        assert_eq!(ledger.batches(), vec![vec![1], vec![3]]);
    }

    #[rstest::rstest]
    #[case(true)]
    #[case(false)]
    #[tokio::test]
    async fn a_failed_batch_answers_every_buyer_with_its_failure(#[case] unavailable: bool) {
        let ledger = Recording::new(false, Some(unavailable));
        let committers = committers(&ledger, 64, 0);
        let mut tasks = first_in_flight(&committers, &ledger).await;
        tasks.extend(queue(&committers, [2, 3]).await);
        ledger.commits.add_permits(2);
        for task in tasks {
            match task.await.unwrap() {
                Err(PlaceOrderError::Infra(e)) => assert_eq!(e.is_unavailable(), unavailable),
                other => panic!("{other:?}"),
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_committer_stops_and_the_next_purchase_starts_another() {
        let ledger = Recording::new(true, None);
        let committers = committers(&ledger, 64, 0);
        committers.place(unconfirmed(1)).await.unwrap();
        tokio::time::sleep(IDLE + Duration::from_secs(1)).await;
        assert!(
            committers.lock().as_ref().unwrap()[&place_order(1).drop_id].is_closed(),
            "the idle committer still runs"
        );
        assert_eq!(placed_id(committers.place(unconfirmed(2)).await), 2);
        assert_eq!(ledger.batches(), vec![vec![1], vec![2]]);
    }

    /// Each `confirm_all` call, as the order ids it confirmed.
    type Calls = Arc<Mutex<Vec<Vec<i64>>>>;

    /// A gate that records each `confirm_all` call as the buyers it confirms (their order ids
    /// are their ids here), failing each call when `fail`.
    fn recording_gate(fail: bool) -> (Arc<dyn AdmissionGate>, Calls) {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&calls);
        let mut gate = goods_domain::ports::MockAdmissionGate::new();
        gate.expect_confirm().times(0);
        gate.expect_confirm_all().returning(move |confirmed| {
            for (r, order) in confirmed {
                assert_eq!(
                    r.user_id.get(),
                    order.get(),
                    "confirmed with another's order"
                );
            }
            recorded
                .lock()
                .unwrap()
                .push(confirmed.iter().map(|(_, order)| order.get()).collect());
            if fail {
                Err(InfraError::unavailable("no answer within 200 ms"))
            } else {
                Ok(())
            }
        });
        (Arc::new(gate), calls)
    }

    /// Buyer `buyer`'s purchase, admitted by `gate`.
    fn admitted(buyer: i64, gate: &Arc<dyn AdmissionGate>) -> Commit {
        let order = place_order(buyer);
        let reservation = Reservation {
            drop_id: order.drop_id,
            user_id: order.user_id,
            sku: None,
            quantity: order.quantity,
            per_user_limit: order.per_user_limit,
            key: order.key.clone(),
            deadline: OPEN + time::Duration::seconds(8),
            bucket: None,
        };
        Commit {
            order,
            confirm_at: Some((Arc::clone(gate), reservation)),
        }
    }

    #[tokio::test]
    async fn a_batch_is_confirmed_at_its_gate_in_one_call_before_its_buyers_are_answered() {
        let ledger = Recording::new(false, None);
        let committers = committers(&ledger, 64, 0);
        let (gate, confirms) = recording_gate(false);
        let place = |buyer: i64| {
            let (committers, commit) = (Arc::clone(&committers), admitted(buyer, &gate));
            let confirms = Arc::clone(&confirms);
            tokio::spawn(async move {
                let placed = placed_id(committers.place(commit).await);
                // Answered only once its marker is done: a retry of the key replays the order.
                assert!(
                    confirms
                        .lock()
                        .unwrap()
                        .iter()
                        .flatten()
                        .any(|id| *id == placed),
                    "buyer {placed} answered before the gate was told"
                );
                placed
            })
        };
        let mut tasks = vec![place(1)];
        while ledger.batches().is_empty() {
            tokio::task::yield_now().await;
        }
        // Buyer 4 was not admitted by the gate (it had failed): its order is not confirmed.
        for buyer in [2, 3] {
            tasks.push(place(buyer));
            tokio::task::yield_now().await;
        }
        let unadmitted = Arc::clone(&committers);
        tasks.push(tokio::spawn(async move {
            placed_id(unadmitted.place(unconfirmed(4)).await)
        }));
        tokio::task::yield_now().await;
        tasks.push(place(5));
        tokio::task::yield_now().await;
        ledger.commits.add_permits(2);
        for (buyer, task) in [1, 2, 3, 4, 5].into_iter().zip(tasks) {
            assert_eq!(task.await.unwrap(), buyer);
        }
        assert_eq!(ledger.batches(), vec![vec![1], vec![2, 3, 4, 5]]);
        assert_eq!(*confirms.lock().unwrap(), vec![vec![1], vec![2, 3, 5]]);
    }

    #[tokio::test]
    async fn a_confirm_that_fails_still_answers_every_buyer_with_its_order() {
        let ledger = Recording::new(true, None);
        let committers = committers(&ledger, 64, 0);
        let (gate, confirms) = recording_gate(true);
        assert_eq!(placed_id(committers.place(admitted(7, &gate)).await), 7);
        assert_eq!(*confirms.lock().unwrap(), vec![vec![7]]);
    }

    #[rstest::rstest]
    #[case(true)]
    #[case(false)]
    #[tokio::test]
    async fn a_failed_batch_confirms_nothing(#[case] unavailable: bool) {
        let ledger = Recording::new(true, Some(unavailable));
        let committers = committers(&ledger, 64, 0);
        let (gate, confirms) = recording_gate(false);
        let placed = committers.place(admitted(7, &gate)).await;
        assert!(
            matches!(placed, Err(PlaceOrderError::Infra(_))),
            "{placed:?}"
        );
        assert!(confirms.lock().unwrap().is_empty());
    }

    /// Records the thread each wake-up of the wrapped future comes from.
    struct WokenFrom<F> {
        inner: std::pin::Pin<Box<F>>,
        from: Arc<Mutex<Vec<std::thread::ThreadId>>>,
    }

    struct Recorder {
        inner: std::task::Waker,
        from: Arc<Mutex<Vec<std::thread::ThreadId>>>,
    }

    impl std::task::Wake for Recorder {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }

        fn wake_by_ref(self: &Arc<Self>) {
            self.from.lock().unwrap().push(std::thread::current().id());
            self.inner.wake_by_ref();
        }
    }

    impl<F: std::future::Future> std::future::Future for WokenFrom<F> {
        type Output = F::Output;

        fn poll(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<F::Output> {
            let waker = std::task::Waker::from(Arc::new(Recorder {
                inner: cx.waker().clone(),
                from: Arc::clone(&self.from),
            }));
            self.inner
                .as_mut()
                .poll(&mut std::task::Context::from_waker(&waker))
        }
    }

    /// Buyers waiting on an HTTP worker's current-thread runtime are answered there: the
    /// committer's thread hands the batch's answers to one task on that runtime, and each buyer
    /// is woken from the worker's own thread (a local wake-up, no write to the runtime's
    /// eventfd), never from the committer's.
    #[test]
    fn buyers_on_a_workers_runtime_are_woken_from_that_runtimes_thread() {
        let from = Arc::new(Mutex::new(Vec::new()));
        let (handed, senders) = std::sync::mpsc::channel();
        let worker = {
            let from = Arc::clone(&from);
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async move {
                    let (to, waiting): (Vec<_>, Vec<_>) =
                        (0..8).map(|_| oneshot::channel::<Placement>()).unzip();
                    let mut all =
                        futures::future::join_all(waiting.into_iter().map(|w| WokenFrom {
                            inner: Box::pin(w),
                            from: Arc::clone(&from),
                        }));
                    // Every buyer waits (its waker is registered) before the answers go out.
                    assert!(futures::poll!(&mut all).is_pending());
                    handed.send((to, Handle::current())).unwrap();
                    let answers = all.await;
                    assert!(answers.iter().all(Result::is_ok), "every buyer answered");
                    std::thread::current().id()
                })
            })
        };
        let (to, home) = senders.recv().unwrap();
        answer::<Orders>(to.into_iter().map(|to| {
            (
                (to, Some(home.clone())),
                Orders::failed(InfraError::msg("an answer")),
            )
        }));
        let worker_thread = worker.join().unwrap();
        let from = from.lock().unwrap().clone();
        assert_eq!(from.len(), 8, "one wake-up a buyer");
        assert!(
            from.iter().all(|t| *t == worker_thread),
            "woken from the committer's thread: {from:?}"
        );
    }
}
