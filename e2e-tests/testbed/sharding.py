#!/usr/bin/env python3
"""Shard keys over memcached servers the way OpenStack does: pymemcache's `HashClient`.

oslo.cache's `dogpile.cache.pymemcache` backend hands `[cache] memcache_servers`
to pymemcache's HashClient, which places each key on one server by rendezvous
hashing over the configured `host:port` strings. `make bench-e2e` (benches/sharding.rs),
`make bench-moves` (benches/moves.rs) and the node suite run this script to
measure how many keys survive scaling, pod restarts and rollouts with the
client configured from the operator's server list.

Usage:
  sharding.py store --servers H:P,... [--hosts NAME=IP,...] [--keys N] [--generation G]
  sharding.py update --servers H:P,... [--hosts NAME=IP,...] [--keys N] --generation G
  sharding.py check --servers H:P,... [--hosts NAME=IP,...] [--keys N] [--generation G]
  sharding.py serve --servers H:P,... [--hosts NAME=IP,...] [--keys N]
  sharding.py kept --servers H:P,... [--hosts NAME=IP,...] [--keys N] [--wait SECONDS]

Each command also takes `--value-sizes MIN-MAX`: values of MIN to MAX bytes
instead of short ones, each key's size and bytes fixed by the key (sizes
log-uniform over the range: many small items, few large), and the report
gains `bytes` (the keys' values, in all) and, when reading, `hit_bytes`.

`store` empties every server (`flush_all`), then writes keys `key-0` ...
`key-<N-1>`: a full cache holding each key exactly where the client puts it,
and no stale copy elsewhere that a later placement could hit by luck. `check`
reads them back; a hit is a key whose value is the one stored. `update` writes
each key's value of `--generation` (0 unless given) without emptying the
servers, as an application writes newer values; `check --generation` then
counts a key as a hit only with that value. `serve` reads
them as an application with a read-through cache does (oslo.cache's
get-or-create): each miss is stored again, so the cache refills. `kept` reads
them back like `check`, but a server that does not answer (a memcached
restarting) is asked again until it does, for at most `--wait` seconds: a hit
is a key the cache still holds, whether or not a client could read it at that
very moment. Each prints one
JSON object: `keys`, `stored` or `hits`, `placement` (keys per server) and
`unreachable` (servers that did not answer `version`; their keys count as
misses).

`--hosts` stands in for cluster DNS: the e2e cluster has none, so the caller
passes what CoreDNS would answer for `<pod>.<service>.<namespace>.svc` (each
ready endpoint's hostname and address in the headless Service's
EndpointSlices). Names are resolved through that map only; a name it lacks does
not resolve (NXDOMAIN, as for a pod that is not ready), and IP addresses are
used as they are. The hash ring stays keyed by the configured `host:port`
strings, so a pod that comes back with a new address under the same name
keeps its keys.
"""

import argparse
import hashlib
import ipaddress
import json
import socket
import sys
import time
import types

from pymemcache.client.base import Client, normalize_server_spec
from pymemcache.client.hash import HashClient

BATCH = 1000
TIMEOUT = 5


class Resolver(types.ModuleType):
    """The socket module, with getaddrinfo answering from a fixed name map."""

    def __init__(self, hosts):
        super().__init__("socket")
        self.hosts = hosts

    def __getattr__(self, name):
        return getattr(socket, name)

    def getaddrinfo(self, host, port, *args, **kwargs):
        if host in self.hosts:
            host = self.hosts[host]
        else:
            try:
                ipaddress.ip_address(host)
            except ValueError:
                raise socket.gaierror(socket.EAI_NONAME, f"{host}: not in --hosts") from None
        return socket.getaddrinfo(host, port, *args, **kwargs)


def parse_hosts(text):
    hosts = {}
    for pair in filter(None, text.split(",")):
        name, sep, address = pair.partition("=")
        if not sep or not name or not address:
            raise argparse.ArgumentTypeError(f"--hosts entry {pair!r} is not NAME=IP")
        ipaddress.ip_address(address)
        hosts[name] = address
    return hosts


def parse_servers(text):
    servers = [s for s in text.split(",") if s]
    if not servers:
        raise argparse.ArgumentTypeError("--servers is empty")
    return servers


def keys(count):
    return [f"key-{i}" for i in range(count)]


def value(key, generation=0, sizes=None):
    suffix = f"@{generation}" if generation else ""
    text = f"value-of-{key}{suffix}".encode()
    if sizes is None:
        return text
    low, high = sizes
    fraction = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64
    size = round(low * (high / low) ** fraction)
    return (text * (size // len(text) + 1))[:size]


def parse_sizes(text):
    low, sep, high = text.partition("-")
    if not sep or not low.isdigit() or not high.isdigit() or not 0 < int(low) <= int(high):
        raise argparse.ArgumentTypeError(f"--value-sizes {text!r} is not MIN-MAX bytes")
    return int(low), int(high)


def reachable(server, resolver):
    """A plain client for `server` if it answers `version`, else None."""
    client = Client(
        normalize_server_spec(server),
        connect_timeout=TIMEOUT,
        timeout=TIMEOUT,
        socket_module=resolver,
    )
    try:
        client.version()
        return client
    except Exception:
        client.close()
        return None


def kept(client, names, resolver, wait, sizes=None):
    """The keys of `names` their server holds, asking a server that does not
    answer again until it does, for at most `wait` seconds."""
    by_server = {}
    for key in names:
        by_server.setdefault(client.hasher.get_node(key), []).append(key)
    deadline = time.monotonic() + wait
    hits = 0
    for server, owned in by_server.items():
        while True:
            direct = Client(
                normalize_server_spec(server),
                connect_timeout=TIMEOUT,
                timeout=TIMEOUT,
                socket_module=resolver,
            )
            try:
                held = 0
                for start in range(0, len(owned), BATCH):
                    batch = owned[start : start + BATCH]
                    found = direct.get_many(batch)
                    held += sum(1 for key in batch if found.get(key) == value(key, 0, sizes))
                hits += held
                break
            except Exception:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            finally:
                direct.close()
    return hits


def run(command, servers, hosts, count, wait=20, generation=0, sizes=None):
    resolver = Resolver(hosts)
    clients = {server: reachable(server, resolver) for server in servers}
    client = HashClient(
        servers,
        connect_timeout=TIMEOUT,
        timeout=TIMEOUT,
        socket_module=resolver,
        ignore_exc=True,
    )
    names = keys(count)
    # The ring's nodes are the configured "host:port" strings.
    placement = {node: 0 for node in client.hasher.nodes}
    for key in names:
        placement[client.hasher.get_node(key)] += 1
    report = {
        "keys": count,
        "placement": placement,
        "unreachable": [s for s, c in clients.items() if c is None],
    }
    if command == "kept":
        report["hits"] = kept(client, names, resolver, wait, sizes)
    elif command in ("store", "update"):
        for direct in clients.values():
            if direct is not None and command == "store":
                direct.flush_all(noreply=False)
        failed = 0
        for start in range(0, count, BATCH):
            batch = {key: value(key, generation, sizes) for key in names[start : start + BATCH]}
            failed += len(client.set_many(batch, noreply=False))
        report["stored"] = count - failed
    else:
        hits = hit_bytes = 0
        for start in range(0, count, BATCH):
            batch = names[start : start + BATCH]
            found = client.get_many(batch)
            hit = [key for key in batch if found.get(key) == value(key, generation, sizes)]
            hits += len(hit)
            hit_bytes += sum(len(found[key]) for key in hit)
            if command == "serve" and len(hit) < len(batch):
                missed = set(batch) - set(hit)
                client.set_many({key: value(key, 0, sizes) for key in missed}, noreply=False)
        report["hits"] = hits
        if sizes is not None:
            report["hit_bytes"] = hit_bytes
    if sizes is not None:
        report["bytes"] = sum(len(value(key, generation, sizes)) for key in names)
    client.close()
    for direct in filter(None, clients.values()):
        direct.close()
    return report


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["store", "update", "check", "serve", "kept"])
    parser.add_argument("--servers", type=parse_servers, required=True, help="H:P,... in the client's order")
    parser.add_argument("--hosts", type=parse_hosts, default={}, help="NAME=IP,...: the DNS answers")
    parser.add_argument("--keys", type=int, default=20000)
    parser.add_argument("--wait", type=float, default=20, help="kept: seconds to wait for a server")
    parser.add_argument("--generation", type=int, default=0, help="which values: store, update, check")
    parser.add_argument("--value-sizes", type=parse_sizes, help="MIN-MAX: values of MIN to MAX bytes")
    args = parser.parse_args(argv)
    report = run(args.command, args.servers, args.hosts, args.keys, args.wait, args.generation, args.value_sizes)
    print(json.dumps(report, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
