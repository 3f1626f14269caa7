#!/usr/bin/env python3
"""Where the server's CPU went, from folded stacks (inferno-collapse-perf --all): each sample is
given to the part of the service nearest its leaf (a malloc called by serde_json is JSON's; a
write(2) called by mysql_async is the database's), and a second table says how much of all of it
was the allocator and the kernel, whoever called them.

    profile-table.py FOLDED US_PER_REQUEST   # prints a Markdown table
"""
import re
import sys

# Checked in this order at each frame, from the leaf up; the first that matches takes the sample.
PARTS = [
    ("gate: Redis scripts (fred, adapters-redis)", r"^(fred|adapters_redis|redis_protocol)::|<fred::"),
    ("database: pool, SQL, driver (deadpool, diesel, mysql_async, adapters-sql/mysql)",
     r"^<?(mysql_async|mysql_common|diesel|diesel_async|adapters_sql|adapters_mysql|deadpool)::"),
    ("JSON (serde, serde_json)", r"^<?(serde_json|serde)::"),
    ("metrics (metrics, the Prometheus recorder)", r"^<?(metrics|metrics_exporter_prometheus|metrics_util)::"),
    ("tracing and spans (tracing, opentelemetry)",
     r"^<?(tracing|tracing_core|tracing_subscriber|tracing_opentelemetry|opentelemetry\w*)::"),
    ("identity and rate limits (api-actix auth, rate)", r"^<?api_actix::(auth|rate)|jsonwebtoken|hmac|sha2"),
    ("the purchase use case (goods-app, goods-domain)", r"^<?(goods_app|goods_domain)::"),
    ("HTTP (actix-http, actix-web, api-actix handlers)", r"^<?(actix_http|actix_web|actix_server|actix_rt|api_actix|goods_server)::"),
]
LAST = ("the async runtime (tokio)", r"^<?tokio::")
ALLOC = r"(^|[^a-z])(malloc|free|realloc|calloc|_int_malloc|_int_free|cfree|sdallocx|mallocx)([^a-z]|$)|^<?alloc::alloc"


def part_of(frames):
    for frame in reversed(frames):
        for name, pattern in PARTS:
            if re.search(pattern, frame):
                return name
    for frame in reversed(frames):
        if re.search(LAST[1], frame):
            return LAST[0]
    return "other (libc, std, idle wake-ups)"


def main():
    folded, per_request = sys.argv[1], float(sys.argv[2])
    parts, in_kernel, total, alloc, kernel = {}, {}, 0, 0, 0
    for line in open(folded, encoding="utf-8", errors="replace"):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack:
            continue
        n = int(count)
        frames = stack.split(";")
        total += n
        name = part_of(frames)
        parts[name] = parts.get(name, 0) + n
        leaf = frames[-1]
        if leaf.endswith("_[k]"):
            kernel += n
            in_kernel[name] = in_kernel.get(name, 0) + n
        elif any(re.search(ALLOC, f) for f in frames[-4:]):
            alloc += n
    print("| part | share of the samples | µs per request | of which in the kernel |")
    print("|---|---|---|---|")
    for name, n in sorted(parts.items(), key=lambda kv: -kv[1]):
        k = in_kernel.get(name, 0)
        print(f"| {name} | {100 * n / total:.1f}% | {per_request * n / total:.1f} | "
              f"{per_request * k / total:.1f} |")
    # cpu-clock samples are weighed by their period: nanoseconds of CPU.
    print(f"| **all** ({total / 1e6:,.0f} ms of sampled CPU) | 100% | {per_request:.1f} | "
          f"{per_request * kernel / total:.1f} |")
    print()
    print(f"Of all of it, whoever called them: the kernel (system calls, loopback TCP) "
          f"{100 * kernel / total:.1f}%, the allocator {100 * alloc / total:.1f}%.")


main()
