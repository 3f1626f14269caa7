# Recipes run the same commands as CI (.ci/run); nothing here is hidden from it.

# Start the service on the embedded default (SQLite file under ./data, in-process gate).
run:
    cargo run -p goods-server --release

# Format the code.
fmt:
    cargo fmt --all

# Formatting check, clippy with warnings as errors, dependency direction.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings
    scripts/check-deps

# The whole test suite (needs MariaDB; see README).
test:
    scripts/test

# Every test that needs nothing but Rust and cargo-nextest (.config/nextest.toml, profile quick):
# about 30 s warm here; the whole suite is `just test`.
test-quick:
    cargo nextest run --workspace --profile quick

# Benchmarks (needs MariaDB and Redis): the hot-drop ledger and the gates.
bench:
    cargo bench -p goods-bench

# Everything CI runs.
ci:
    .ci/run

# The release binary, built as the container image builds it (deploy/docker/Dockerfile).
release:
    cargo build --release --locked -p goods-server

# Load tests on loopback (release build, MariaDB and Redis running; wrk and k6 installed).
loadtest: release
    loadtest/soldout-vs-live.sh
    loadtest/fault-redis-pause.sh

# Supply chain: licenses, bans, sources and advisories (deny.toml; advisories fetch their
# database from GitHub; scripts/test runs the other three everywhere).
deny:
    cargo deny check
