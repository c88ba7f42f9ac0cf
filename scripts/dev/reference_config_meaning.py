"""The hand-written columns of docs/reference/configuration.md for the sections that have no
field table yet (include/holdback/core/field_table.hpp; the tables' rows carry their own meaning
and use, which reference-config.py reads from `holdback validate --schema`).

reference-config.py takes everything else from the loader; a field the loader shows that has no
entry in MEANING (nor a row with a meaning) fails it. Keep each entry one sentence that says what the key does and why a user
sets it; the guides explain. COMMON lists the keys most files set ("common" in the page's "use"
column); every other key is "advanced": set it for the reason its meaning gives. A key the loader
deprecates needs no entry here: the page lists it with the loader's advice.
"""

MEANING = {
    "flowControl": {
        "profile": "`reference` switches every default to the Go reference's arithmetic (no score cap, reference telemetry validation, no ledger): set it to reproduce the Go gateway's decisions while migrating; [migrating from Go](../guide/migrating-from-go.md)",
        "enginePriority": "pass the request's effective priority to the model server in the body, so the engine's own scheduler also serves higher bands first: `vllm` (`priority`, lower first: the sign flips), `sglang`; `off` sends nothing",
        "maxRequests": "global cap on queued requests across bands, to bound the gateway's memory; 0 = unlimited",
        "maxBytes": "global cap on queued request bytes, to bound the gateway's memory; 0 = unlimited",
        "defaultRequestTTL": "how long a request may wait in the queue when neither its band nor its request sets a shorter TTL (your clients' patience); `0s` = no expiry",
        "noEndpointRequestTTL": "how long requests wait while the pool has no usable endpoint (a rollout, a scale from zero) before they are answered 503",
        "enableEviction": "turn in-flight eviction on, so that protected requests are not starved by sheddable ones already running (the host supplies the `evict` callback)",
        "eviction.confirmationGrace": "after a confirmed revocation, how long the controller waits for telemetry to show the freed room before deciding again; derived from the detector (upstream's wiring), shorten it to a few scrape intervals when the detector has the slot term (`maxRunningRequests`), which sees an aborted request at once; below the sensor's lag it over-evicts",
        "eviction.revokeOnBlock": "revoke when a protected band's head is blocked by the ceiling (upstream's trigger); `false` leaves reserve restoration alone, as the recommended configuration does",
        "eviction.restoreReserve.enabled": "revoke sheddable requests to restore the reservation policy's reserve after a burst took it (aiming for the policy's `epsilon`); with it the policy neither holds its reserve nor starts protective (the block's presence turns it on)",
        "fairnessIdLabelLimit": "distinct `fairness_id` label values on the queue gauges (the most queued flows), to bound your metrics' cardinality; the rest are summed into `\"other\"`; 0 = no per-flow gauges",
    },
}

# The keys most files set; the page marks them "common", every other key "advanced".
COMMON = {
    "flowControl": {"maxRequests", "defaultRequestTTL", "enableEviction", "eviction.revokeOnBlock",
                    "eviction.restoreReserve.enabled"},
}
