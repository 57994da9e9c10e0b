"""What a DPoP proof costs on the status feed, the door every running guard polls every few
seconds (docs/decisions/0069): an unbound poll runs the same two queries as before; a bound
one adds the replay store's one upsert. The timings are printed (``-s`` shows them) for
bench/RESULTS.md; nothing here asserts a duration."""

from __future__ import annotations

import statistics
import time

from guard.dpop import DpopKey, verify_proof
from tests.conftest import plan_document

FEED_QUERIES = 2
ROUNDS = 200


def declare(persona, key: DpopKey | None) -> str:
    extra = {}
    if key is not None:
        proof = key.proof(
            htm="POST", htu="http://testserver/v1/plans", access_token=persona.api_key
        )
        extra = {"HTTP_DPOP": proof}
    response = persona.client.post("/v1/plans", {"plan": plan_document()}, format="json", **extra)
    assert response.status_code == 201, response.content
    return response.json()["id"]


def poll(persona, plan_id: str, key: DpopKey | None):
    path = f"/v1/plans/{plan_id}/status"
    extra = {}
    if key is not None:
        proof = key.proof(htm="GET", htu="http://testserver" + path, access_token=persona.api_key)
        extra = {"HTTP_DPOP": proof}
    return persona.client.get(path, **extra)


def test_an_unbound_poll_costs_what_it_did_and_a_bound_one_one_upsert_more(
    agent, django_assert_num_queries
):
    key = DpopKey.generate()
    unbound, bound = declare(agent, None), declare(agent, key)
    poll(agent, unbound, None), poll(agent, bound, key)  # the key's last use, out of the way

    with django_assert_num_queries(FEED_QUERIES):
        assert poll(agent, unbound, None).status_code == 200
    with django_assert_num_queries(FEED_QUERIES + 1):
        assert poll(agent, bound, key).status_code == 200


def median_ms(run) -> float:
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def test_the_cost_of_a_proof_per_poll(agent, db):
    key = DpopKey.generate()
    unbound, bound = declare(agent, None), declare(agent, key)
    url = "http://testserver/v1/plans/x/status"
    proof = key.proof(htm="GET", htu=url, access_token=agent.api_key)
    path = f"/v1/plans/{bound}/status"
    # Made beforehand: the poll's figure is the server's alone.
    proofs = iter(
        [
            key.proof(htm="GET", htu="http://testserver" + path, access_token=agent.api_key)
            for _ in range(ROUNDS)
        ]
    )

    sign = median_ms(lambda: key.proof(htm="GET", htu=url, access_token=agent.api_key))
    verify = median_ms(lambda: verify_proof(proof, htm="GET", htu=url, access_token=agent.api_key))
    plain = median_ms(lambda: poll(agent, unbound, None))
    with_proof = median_ms(lambda: agent.client.get(path, HTTP_DPOP=next(proofs)))

    print(
        f"\nDPoP per request (median of {ROUNDS}): sign {sign:.3f} ms (guard), verify"
        f" {verify:.3f} ms; status poll unbound {plain:.3f} ms, bound {with_proof:.3f} ms"
        f" (proof checked and its jti stored: +{with_proof - plain:.3f} ms)"
    )
