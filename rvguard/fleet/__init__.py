"""The fleet layer (DESIGN §10): several engines and several guard replicas.

* `ledger` — one replica's own record of what it may spend without the shared store (pure).
* `credits` — the per-(tenant, window) credit pool shared in Redis, with the static-share fallback.
* `store` — its Redis transport: warm-up, the checks made before pooling, the name lease, redaction.
* `router` — power-of-two-choices on headroom with a siloed fallback (pure).
* `merge` — several replicas' traces merged into one, in time order (pure).
* `judge` — AF on the merged trace: floor credit ≤ B fleet-wide, entitlement in the pool's order (pure).
* `relocate` — a request resumed on another engine from its prompt and output token ids (pure).

The gateway wires them (`rvguard.gateway.fleet`, `rvguard.gateway.replica`).

Redis (redis-py) is the ``fleet`` extra, imported only where a store is opened.
"""
