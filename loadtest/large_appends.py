#!/usr/bin/env python3
"""32 MiB appends to one leader of a loopback cluster, and what they hold up.

  large_appends.py DIR [N]    DIR from scripts/cluster-up.sh (URSULA_GROUPS=4);
                              N appends of 32 MiB (default 5) to one stream

While the large appends run one after another, a second connection appends
64 bytes every 5 ms, round robin over streams the same voter leads in other
groups than the large stream's. Prints each large append's time and the
small appends' count, p50, p99 and max: a Raft thread held by a large
write shows as small appends of other groups waiting. Pair it with the
voters' CPU (/proc/PID/stat) and their "no answer within" warnings.
"""
import http.client
import sys
import threading
import time
import urllib.parse

GROUPS = 4
CT = {"Content-Type": "application/octet-stream"}


def request(url, method, path, body=b"", headers=CT):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, data


def group_of(path):
    """core/stream/src/routing.rs: FNV-1a 64 over `bucket \\0 stream`."""
    _, bucket, stream = path.split("/")
    h = 0xCBF29CE484222325
    for c in bucket.encode() + b"\0" + stream.encode():
        h = ((h ^ c) * 0x100000001B3) % (1 << 64)
    return h % GROUPS


def main():
    urls = [u.strip() for u in open(sys.argv[1] + "/urls")]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 5

    def leader_of(path):
        for _ in range(50):
            status, headers, _ = request(urls[0], "POST", path, b"w")
            if status == 307:
                loc = urllib.parse.urlparse(headers["location"])
                return f"{loc.scheme}://{loc.netloc}"
            if status in (200, 204):
                return urls[0]
            time.sleep(0.2)
        sys.exit(f"no leader for {path}")

    def create(path):
        for url in urls:
            if request(url, "PUT", path)[0] in (200, 201, 204):
                return
        sys.exit(f"cannot create {path}")

    streams = []
    for i in range(40):
        path = f"/bench/s{i}"
        create(path)
        streams.append((path, leader_of(path)))
    # A large stream whose leader also leads another group.
    for i in range(20):
        large = f"/bench/large{i}"
        create(large)
        leader = leader_of(large)
        small = [p for p, lead in streams if lead == leader and group_of(p) != group_of(large)]
        if small:
            break
    else:
        sys.exit("no voter leads two groups")
    print("leader", leader, "small streams on it:", len(small))

    body = bytes(range(256)) * (32 * 4096)
    done = threading.Event()
    latencies = []

    def smalls():
        u = urllib.parse.urlparse(leader)
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        i = 0
        while not done.is_set():
            t = time.monotonic()
            c.request("POST", small[i % len(small)], body=b"x" * 64, headers=CT)
            r = c.getresponse()
            r.read()
            latencies.append(time.monotonic() - t)
            if r.status != 204:
                print("small append answered", r.status)
            i += 1
            time.sleep(0.005)

    thread = threading.Thread(target=smalls)
    thread.start()
    times = []
    for _ in range(count):
        t = time.monotonic()
        status, _, data = request(leader, "POST", large, body)
        times.append(time.monotonic() - t)
        if status != 204:
            print("large append answered", status, data[:200])
    done.set()
    thread.join()
    latencies.sort()
    ms = lambda q: latencies[min(len(latencies) - 1, int(len(latencies) * q))] * 1000  # noqa: E731
    print("large appends (s):", " ".join(f"{t:.2f}" for t in times))
    print(f"small appends: n={len(latencies)} p50={ms(0.5):.1f}ms p99={ms(0.99):.1f}ms max={latencies[-1] * 1000:.1f}ms")


if __name__ == "__main__":
    main()
