"""The fuzz campaign, seeded and bounded in time (tests/fuzz/campaign.py).

``make test`` runs a short sample; ``make fuzz`` the long campaign (≥ 5,000
requests and a few hundred ConfigMap writes), whose figures are in
docs/fuzz.md. Sizes come from the environment:

* ``FEDPLACE_FUZZ_SEED`` (default 17) — the same seed replays the same cases;
* ``FEDPLACE_FUZZ_REQUESTS`` (default 300) — AdmissionReviews and socket abuses;
* ``FEDPLACE_FUZZ_CONFIGMAP_OPS`` (default 30) — ConfigMap writes and deletes;
* ``FEDPLACE_FUZZ_SECONDS`` (default 60) — time bound of each half;
* ``FEDPLACE_FUZZ_REPORT`` — also write the figures there as JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import random

import pytest

from tests.fuzz.campaign import fuzz_admission, fuzz_configmaps

SEED = int(os.environ.get("FEDPLACE_FUZZ_SEED", "17"))
REQUESTS = int(os.environ.get("FEDPLACE_FUZZ_REQUESTS", "300"))
CONFIGMAP_OPS = int(os.environ.get("FEDPLACE_FUZZ_CONFIGMAP_OPS", "30"))
SECONDS = float(os.environ.get("FEDPLACE_FUZZ_SECONDS", "60"))


@pytest.mark.timeout(SECONDS * 2 + 300)
async def test_fuzz_campaign(opa, kube, kube_api, kube_namespaces, tmp_path):
    admission_ns = await kube_namespaces.create("fuzz-admission")
    sync_ns = await kube_namespaces.create("fuzz-policy")
    rng = random.Random(SEED)
    admission_rng, configmap_rng = random.Random(rng.getrandbits(64)), random.Random(rng.getrandbits(64))
    admission, configmaps = await asyncio.gather(
        fuzz_admission(rng=admission_rng, requests=REQUESTS, seconds=SECONDS, opa=opa, kube=kube, api=kube_api,
                       policy_ns=admission_ns, log_dir=tmp_path),
        fuzz_configmaps(rng=configmap_rng, operations=CONFIGMAP_OPS, seconds=SECONDS, opa=opa, kube=kube,
                        api=kube_api, policy_ns=sync_ns, log_dir=tmp_path))
    print(f"\nfuzz seed {SEED}\n{admission.line()}\n{configmaps.line()}")
    report = os.environ.get("FEDPLACE_FUZZ_REPORT")
    if report:
        with open(report, "w", encoding="utf-8") as fh:
            json.dump({"seed": SEED, "admission": admission.as_dict(), "configmaps": configmaps.as_dict()}, fh,
                      indent=2, default=str)
    assert admission.requests >= min(REQUESTS, 50)
    assert admission.server_errors == 0, admission.examples
    assert not admission.crashed
    assert admission.fail_opens == 0, admission.examples
    assert admission.connections_end == 0, "connections left open"
    assert configmaps.writes > 0
    assert not configmaps.crashed and configmaps.healthy and configmaps.ready, configmaps.problems
    assert configmaps.statuses_missing == 0 and configmaps.statuses_oversized == 0
    assert configmaps.system_modules_in_opa == 0, configmaps.problems
