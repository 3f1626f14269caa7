//! Several hosts in one `DATABASE_URL` (`mysql://user@h1:p1,h2:p2,h3:p3/db`), the nodes of a
//! Galera Cluster: every instance writes through the first that answers and is a synced member
//! of the primary component, so the fleet's transactions meet in one node's locks.

use mysql_async::prelude::Queryable as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A `mysql://` URL split around its hosts: what comes before them (scheme and credentials),
/// the hosts in the order given, and what follows (database and parameters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostList {
    head: String,
    hosts: Vec<String>,
    tail: String,
}

impl HostList {
    /// Splits `url`; one host is a list of one.
    ///
    /// # Errors
    /// Not `mysql://`, or an empty host in the list.
    pub fn parse(url: &str) -> Result<Self, String> {
        let rest = url
            .strip_prefix("mysql://")
            .ok_or("must start with mysql://")?;
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(authority_end);
        let (userinfo, hosts) = match authority.rfind('@') {
            Some(at) => authority.split_at(at + 1),
            None => ("", authority),
        };
        let hosts: Vec<String> = hosts.split(',').map(str::to_owned).collect();
        if hosts.iter().any(String::is_empty) {
            return Err("names an empty host (hosts are separated by single commas)".into());
        }
        Ok(Self {
            head: format!("mysql://{userinfo}"),
            hosts,
            tail: tail.to_owned(),
        })
    }

    /// The hosts (`host:port`), in the order given.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }

    /// The URL of the host at `index` alone.
    pub fn url(&self, index: usize) -> String {
        format!("{}{}{}", self.head, self.hosts[index], self.tail)
    }

    /// This list's hosts with the credentials, database and parameters of `single`, a URL of
    /// one host (one that a URL library rewrote, say with a password from a file).
    ///
    /// # Errors
    /// As [`parse`](Self::parse) for `single`.
    pub fn with_parts_of(&self, single: &str) -> Result<Self, String> {
        let parts = Self::parse(single)?;
        Ok(Self {
            head: parts.head,
            hosts: self.hosts.clone(),
            tail: parts.tail,
        })
    }
}

impl std::fmt::Display for HostList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}{}", self.head, self.hosts.join(","), self.tail)
    }
}

/// Whether a node may be written through: with replication on (`wsrep_on`), only synced
/// (`wsrep_local_state` 4) in the primary component (`wsrep_cluster_status` Primary). A server
/// without Galera, or with its provider loaded but `wsrep_on` off (Debian's MariaDB reports
/// `Disconnected` then), may.
pub fn writable(wsrep_on: bool, local_state: Option<&str>, cluster_status: Option<&str>) -> bool {
    !wsrep_on || (local_state == Some("4") && cluster_status == Some("Primary"))
}

/// The host the instance writes through: the first of the list that answers and is
/// [`writable`], kept until it fails; then the next one after it, and so on around the list.
/// It never moves back by itself, so a node that returns mid-sale takes no writes until asked
/// ([`reset`](Self::reset)). Each move counts in `db_writer_moves_total`.
#[derive(Debug)]
pub struct Writer {
    hosts: HostList,
    current: AtomicUsize,
    /// How long one host may take to accept a connection and answer the status query.
    wait: Duration,
    /// When the writer last changed host, in nanoseconds after `since` (0: never): connections
    /// opened before it lead to the host left behind ([`moved_at`](Self::moved_at)).
    moved: AtomicU64,
    since: Instant,
}

impl Writer {
    pub fn new(hosts: HostList, wait: Duration) -> Self {
        Self {
            hosts,
            current: AtomicUsize::new(0),
            wait,
            moved: AtomicU64::new(0),
            since: Instant::now(),
        }
    }

    /// The index of the host written through now.
    pub fn current(&self) -> usize {
        self.current.load(Ordering::Relaxed)
    }

    /// When the writer last changed host (a move or a [`reset`](Self::reset)), if ever: a pooled
    /// connection opened before then may lead to another node, and is closed rather than used,
    /// so the fleet's writes meet on one node.
    pub fn moved_at(&self) -> Option<Instant> {
        match self.moved.load(Ordering::Acquire) {
            0 => None,
            nanos => Some(self.since + Duration::from_nanos(nanos)),
        }
    }

    fn mark_moved(&self) {
        let nanos = u64::try_from(self.since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.moved.store(nanos.max(1), Ordering::Release);
        metrics::counter!(adapters_sql::WRITER_MOVES).increment(1);
    }

    /// Moves back to the first host of the list: the operator's call (SIGHUP), once that node is
    /// synced again. When it is not, the next connection moves on from it as after a failure.
    pub fn reset(&self) {
        if self.current.swap(0, Ordering::Relaxed) != 0 {
            self.mark_moved();
        }
    }

    pub fn hosts(&self) -> &HostList {
        &self.hosts
    }

    /// A connection to the host written through, made by `open` (the URL of one host): the
    /// current one, or, when it does not answer in time or is not writable, the next that does.
    ///
    /// # Errors
    /// The last host's failure, when none of them can be written through.
    pub async fn connect<C, E, F, Fut>(&self, open: F) -> Result<C, String>
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = Result<(C, bool), E>>,
        E: std::fmt::Display,
    {
        let start = self.current();
        let mut last = String::new();
        for step in 0..self.hosts.len() {
            let index = (start + step) % self.hosts.len();
            match tokio::time::timeout(self.wait, open(self.hosts.url(index))).await {
                Ok(Ok((conn, true))) => {
                    if index != start
                        && self
                            .current
                            .compare_exchange(start, index, Ordering::Relaxed, Ordering::Relaxed)
                            .is_ok()
                    {
                        tracing::warn!(
                            from = %self.hosts.hosts[start],
                            to = %self.hosts.hosts[index],
                            "database writer moved to the next synced node"
                        );
                        self.mark_moved();
                    }
                    return Ok(conn);
                }
                Ok(Ok((_, false))) => {
                    last = format!(
                        "{} is not a synced member of the primary component",
                        self.hosts.hosts[index]
                    );
                }
                Ok(Err(error)) => last = format!("{}: {error}", self.hosts.hosts[index]),
                Err(_) => {
                    last = format!(
                        "{} did not answer within {} ms",
                        self.hosts.hosts[index],
                        self.wait.as_millis()
                    );
                }
            }
            tracing::warn!(reason = %last, "database host skipped");
        }
        Err(last)
    }
}

/// Whether the server on `conn` may be written through ([`writable`]).
///
/// # Errors
/// The status query's failure.
pub async fn node_writable(conn: &mut mysql_async::Conn) -> Result<bool, mysql_async::Error> {
    let on: Vec<(String, String)> = conn
        .query("SHOW GLOBAL VARIABLES WHERE Variable_name = 'wsrep_on'")
        .await?;
    let wsrep_on = on.iter().any(|(_, value)| value.eq_ignore_ascii_case("ON"));
    if !wsrep_on {
        return Ok(true);
    }
    let rows: Vec<(String, String)> = conn
        .query(
            "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_local_state', 'wsrep_cluster_status')",
        )
        .await?;
    let get = |name: &str| {
        rows.iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    };
    Ok(writable(
        true,
        get("wsrep_local_state"),
        get("wsrep_cluster_status"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[rstest::rstest]
    #[case("mysql://root@h1:1/db", "mysql://root@", &["h1:1"], "/db")]
    #[case("mysql://u:p%40w@h1:1,h2:2,h3:3/db?x=1", "mysql://u:p%40w@", &["h1:1", "h2:2", "h3:3"], "/db?x=1")]
    #[case("mysql://h1,h2", "mysql://", &["h1", "h2"], "")]
    #[case("mysql://a@b@h1:1,h2:2/db", "mysql://a@b@", &["h1:1", "h2:2"], "/db")]
    fn a_url_splits_around_its_hosts(
        #[case] url: &str,
        #[case] head: &str,
        #[case] hosts: &[&str],
        #[case] tail: &str,
    ) {
        let list = HostList::parse(url).unwrap();
        assert_eq!(
            (list.head.as_str(), list.hosts.clone(), list.tail.as_str()),
            (head, hosts.iter().map(|h| (*h).to_owned()).collect(), tail)
        );
        assert_eq!(list.to_string(), url);
    }

    #[rstest::rstest]
    #[case("postgres://h/db")]
    #[case("mysql://u@h1:1,,h2:2/db")]
    #[case("mysql://u@h1:1,/db")]
    #[case("mysql://u@/db")]
    fn a_url_without_a_usable_host_list_is_refused(#[case] url: &str) {
        assert!(HostList::parse(url).is_err(), "{url}");
    }

    #[test]
    fn each_host_gets_the_whole_url_and_a_rewritten_one_keeps_the_hosts() {
        let list = HostList::parse("mysql://u@h1:1,h2:2/db?x=1").unwrap();
        assert_eq!(list.url(1), "mysql://u@h2:2/db?x=1");
        let with_password = list.with_parts_of("mysql://u:secret@h1:1/db?x=1").unwrap();
        assert_eq!(
            with_password.to_string(),
            "mysql://u:secret@h1:1,h2:2/db?x=1"
        );
    }

    #[rstest::rstest]
    #[case::no_galera(false, None, None, true)]
    #[case::provider_loaded_but_off(false, None, Some("Disconnected"), true)]
    #[case::synced_primary(true, Some("4"), Some("Primary"), true)]
    #[case::desynced(true, Some("2"), Some("Primary"), false)]
    #[case::minority(true, Some("4"), Some("non-Primary"), false)]
    #[case::disconnected(true, Some("0"), Some("Disconnected"), false)]
    #[case::no_status(true, None, None, false)]
    fn only_a_synced_member_of_the_primary_component_is_written_through(
        #[case] wsrep_on: bool,
        #[case] state: Option<&str>,
        #[case] status: Option<&str>,
        #[case] expected: bool,
    ) {
        assert_eq!(writable(wsrep_on, state, status), expected);
    }

    /// A host answers `Ok((host, writable))`, fails, or hangs.
    async fn fake(
        url: String,
        hanging: &[&str],
        failing: &[&str],
        unsynced: &[&str],
    ) -> Result<(String, bool), String> {
        let host = HostList::parse(&url).unwrap().hosts[0].clone();
        if hanging.contains(&host.as_str()) {
            std::future::pending::<()>().await;
        }
        if failing.contains(&host.as_str()) {
            return Err("connection refused".into());
        }
        Ok((host.clone(), !unsynced.contains(&host.as_str())))
    }

    #[tokio::test(start_paused = true)]
    async fn the_writer_moves_on_past_a_dead_a_hung_and_an_unsynced_host_and_stays() {
        let writer = Writer::new(
            HostList::parse("mysql://u@a,b,c,d/db").unwrap(),
            Duration::from_millis(500),
        );
        let conn = writer
            .connect(|url| fake(url, &["b"], &["a"], &["c"]))
            .await
            .unwrap();
        assert_eq!((conn.as_str(), writer.current()), ("d", 3));
        let moved = writer.moved_at().expect("the move is dated");
        // `a` answers again: the writer stays on `d` until asked.
        let conn = writer
            .connect(|url| fake(url, &[], &[], &[]))
            .await
            .unwrap();
        assert_eq!((conn.as_str(), writer.moved_at()), ("d", Some(moved)));
        writer.reset();
        let back = writer.moved_at().unwrap();
        assert!(
            back > moved,
            "the way back dates the connections to `d` as stale"
        );
        let conn = writer
            .connect(|url| fake(url, &[], &[], &[]))
            .await
            .unwrap();
        assert_eq!(conn, "a");
        // Asked again while on the first host: nothing moves, no connection goes stale.
        writer.reset();
        assert_eq!(writer.moved_at(), Some(back));
    }

    #[test]
    fn a_writer_that_never_moved_dates_no_connection_as_stale() {
        let writer = Writer::new(
            HostList::parse("mysql://u@a,b/db").unwrap(),
            Duration::from_millis(500),
        );
        writer.reset();
        assert_eq!(writer.moved_at(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn with_no_host_writable_the_last_failure_is_named() {
        let writer = Writer::new(
            HostList::parse("mysql://u@a,b/db").unwrap(),
            Duration::from_millis(500),
        );
        let error = writer
            .connect(|url| fake(url, &["b"], &["a"], &[]))
            .await
            .unwrap_err();
        assert_eq!(error, "b did not answer within 500 ms");
        assert_eq!(writer.current(), 0);
    }
}
