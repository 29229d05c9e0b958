"""The fleet layer (DESIGN §10): several engines and several guard replicas.

* `ledger` — one replica's own record of what it may spend without the shared store (pure).
* `credits` — the per-(tenant, window) credit pool shared in Redis, with the static-share fallback.
* `router` — power-of-two-choices on headroom with a siloed fallback (pure).
* `merge` — several replicas' traces merged into one, in time order (pure).

Redis (redis-py) is the ``fleet`` extra, imported only where a store is opened.
"""
