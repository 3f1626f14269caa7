//! Real MySQL/MariaDB servers for tests.

use diesel_async::{AsyncConnection, AsyncMysqlConnection, SimpleAsyncConnection};
use std::sync::OnceLock;

/// The server URL (no database): `TEST_MYSQL_URL`, else a MySQL 8 container when Docker
/// answers, else a panic that says how to provide one.
pub fn server_url() -> String {
    crate::needs::needs(crate::needs::Service::Mysql);
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Some(url) = std::env::var("TEST_MYSQL_URL")
            .ok()
            .filter(|u| !u.is_empty())
        {
            return url.trim_end_matches('/').to_owned();
        }
        if docker_answers() {
            return start_container();
        }
        panic!(
            "no MySQL for the adapter tests: set TEST_MYSQL_URL (e.g. mysql://root@127.0.0.1:3306, \
             a user that may CREATE DATABASE) or start a Docker engine for testcontainers"
        )
    })
    .clone()
}

/// A new test database's name: `{kind}_{run}_{random}`. `TEST_RUN_ID` (set by scripts/test:
/// the run's start in unix seconds and its process id) names the run, so a run drops its own
/// databases and leftovers of old runs, never those of another run on the same server.
pub fn database_name(kind: &str) -> String {
    let run = std::env::var("TEST_RUN_ID")
        .ok()
        .filter(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        .unwrap_or_else(|| "local".to_owned());
    format!("{kind}_{run}_{}", uuid::Uuid::new_v4().simple())
}

/// Creates a fresh, empty database and returns its URL, so tests run in parallel.
pub async fn fresh_database() -> String {
    let server = server_url();
    let name = database_name("adapter");
    let mut conn = AsyncMysqlConnection::establish(&server)
        .await
        .unwrap_or_else(|e| panic!("TEST_MYSQL_URL={server} is unreachable: {e}"));
    conn.batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    format!("{server}/{name}")
}

pub(crate) fn docker_answers() -> bool {
    std::process::Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output()
        .is_ok_and(|out| out.status.success())
}

/// Starts MySQL 8 in a container on a runtime of its own that lives as long as the process, so
/// every test's runtime can use it.
fn start_container() -> String {
    use testcontainers_modules::mysql::Mysql;
    use testcontainers_modules::testcontainers::runners::AsyncRunner;
    use testcontainers_modules::testcontainers::{ImageExt, ReuseDirective};
    let run = crate::run_id();
    // Its own thread and runtime: this is called from inside the tests' runtimes. The thread
    // ends once the container answers; the container is marked for reuse, so dropping the
    // handle leaves it running for every other test process of the run (nextest runs each test
    // in a process of its own), and scripts/test removes it by its label when the run ends.
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async move {
            let container = Mysql::default()
                .with_tag("8.1")
                .with_container_name(format!("goods-test-mysql-{run}"))
                .with_label(crate::RUN_LABEL, run)
                .with_reuse(ReuseDirective::Always)
                .start()
                .await
                .unwrap();
            let port = container.get_host_port_ipv4(3306).await.unwrap();
            format!("mysql://root@127.0.0.1:{port}")
        })
    })
    .join()
    .expect("the mysql container did not start")
}

/// The names of the indexes of `table` in the database at `url`.
pub async fn index_names(url: &str, table: &str) -> Vec<String> {
    use diesel::sql_types::Text;
    use diesel_async::RunQueryDsl;
    #[derive(diesel::QueryableByName)]
    struct Index {
        #[diesel(sql_type = Text)]
        name: String,
    }
    let mut conn = AsyncMysqlConnection::establish(url).await.unwrap();
    diesel::sql_query(
        "SELECT DISTINCT index_name AS name FROM information_schema.statistics \
         WHERE table_schema = DATABASE() AND table_name = ?",
    )
    .bind::<Text, _>(table)
    .load::<Index>(&mut conn)
    .await
    .unwrap()
    .into_iter()
    .map(|i| i.name)
    .collect()
}

/// How many client connections the server holds to the database at `url`, not counting the
/// one asking.
pub async fn connections_to(url: &str) -> i64 {
    use diesel::sql_types::BigInt;
    use diesel_async::RunQueryDsl;
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = BigInt)]
        n: i64,
    }
    let mut conn = AsyncMysqlConnection::establish(url).await.unwrap();
    diesel::sql_query(
        "SELECT COUNT(*) AS n FROM information_schema.processlist \
         WHERE db = DATABASE() AND id <> CONNECTION_ID()",
    )
    .get_result::<Count>(&mut conn)
    .await
    .unwrap()
    .n
}

/// The number `query` (a `SELECT ... AS n`) answers in the database at `url`.
pub async fn count(url: &str, query: &str) -> i64 {
    use diesel::sql_types::BigInt;
    use diesel_async::RunQueryDsl;
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = BigInt)]
        n: i64,
    }
    let mut conn = AsyncMysqlConnection::establish(url).await.unwrap();
    diesel::sql_query(query)
        .get_result::<Count>(&mut conn)
        .await
        .unwrap()
        .n
}
